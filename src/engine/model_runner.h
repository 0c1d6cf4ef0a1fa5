// ModelRunner: the device side of a step. It turns a sched::BatchPlan into a model::ForwardBatch,
// performs the plan's state duties around the forward — drop the tables of ended sequences,
// apply block-table diffs, reset or restore state slots before, copy state slots into snapshots
// after — and runs the model. It owns the KvState (the bytes behind the KV manager's ids) and a
// mirror of every running sequence's block table; it never decides anything the plan does not say.
// Snapshot id s lives in KvState slot n_state_slots + s. Not thread-safe (engine thread only).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/device_sample_plan.h"
#include "engine/loaded_model.h"
#include "model/kv_state.h"
#include "sched/batch_plan.h"

namespace deepinfer::engine {

class ModelRunner {
 public:
  // `model` must outlive the runner.
  ModelRunner(LoadedModel* model, const model::KvStateOptions& state, int32_t n_state_slots);

  // Applies the plan's bookkeeping and state duties and builds the forward batch. logit_row[i]
  // receives the batch's logit row of plan.seqs[i] (-1: no logits this step).
  Result<model::ForwardBatch> prepare(const sched::BatchPlan& plan, std::vector<int32_t>* logit_row);
  // What a step sampled where its logits are copies back per logit row: the token and, when some
  // row asked for logprobs (n_top >= 0), every row's raw logprob and top-n_top (Ops::logprob_rows).
  struct DeviceSampled {
    std::vector<int32_t> ids;        // [rows] -1 = nothing finite
    int32_t n_top = -1;              // DeviceSamplePlan::n_top: -1 none; else entries per row (0..20)
    std::vector<float> logprob;      // [rows] of ids[r] (raw mode)
    std::vector<int32_t> top_ids;    // [rows x n_top]
    std::vector<float> top_logprobs; // [rows x n_top]
  };
  // Runs the model: the logits stay where the model wrote them (on a GPU the step is queued, not
  // waited for, so the host can prepare the sampling meanwhile). Then exactly one of:
  //   * logits_to_host: the host sampler's path — device logits copied into a page-locked buffer
  //     the runner owns ([rows, vocab] F32, valid until the next call; CPU logits stay as they are);
  //   * sample_on_device: a step whose rows are all sampled whole where the logits are
  //     (sample::is_device_sampleable; `plan` has a row per logit row): Ops::adjust_logits first
  //     when some row has steps 1-4, then each row's token (Ops::argmax_rows when every row is
  //     greedy, else Ops::sample_rows) and, with plan.n_top >= 0, the raw logprobs
  //     (Ops::logprob_rows, of the unadjusted logits) into *out — on a GPU (1 + 2 n_top) numbers
  //     per row in one copy instead of the row's 129,280 floats.
  Result<model::ForwardResult> forward(const model::ForwardBatch& batch);
  Status logits_to_host(model::ForwardResult* result);
  Status sample_on_device(const tensor::TensorView& logits, const DeviceSamplePlan& plan, DeviceSampled* out);
  // sample_on_device in two halves, so that the host can queue the next step in between
  // (asynchronous scheduling): launch_sampling queues the sampling ops and the copy of their
  // results into one of two page-locked buffers; collect_sampling waits for that copy. The ids stay
  // on the device until the next launch_sampling, where a step planned ahead reads its input tokens
  // (prepare: SeqPlan::token_from_device). At most two launches may be uncollected.
  struct SampleTicket {
    uint64_t copy = 0;  // Ops::copy_to_host_async's ticket
    int64_t rows = 0, n_top = -1;
    int buffer = 0;     // which page-locked buffer
  };
  Status launch_sampling(const tensor::TensorView& logits, const DeviceSamplePlan& plan, SampleTicket* ticket);
  Status collect_sampling(const SampleTicket& ticket, DeviceSampled* out);
  // Queued right behind the plan's forward (before anything planned ahead of its update can run):
  // copies state slots into the snapshots the plan asked for.
  void take_snapshots(const sched::BatchPlan& plan);
  // Forgets a sequence's table at once (abort outside a plan; the next plan repeats it harmlessly).
  void drop(kv::SeqId seq) { tables_.erase(seq); }

  // The mirrored block table of a sequence (empty if unknown): tests compare it with the manager's.
  std::span<const kv::BlockId> block_table(kv::SeqId seq) const;
  int32_t n_tables() const { return static_cast<int32_t>(tables_.size()); }
  model::KvState& state() { return state_; }

 private:
  Status apply_table_diff(const sched::SeqPlan& sp);
  Status init_state(const sched::SeqPlan& sp);

  LoadedModel* model_;
  model::KvState state_;
  tensor::TensorView host_logits_;  // [>= n_logit_rows x vocab] F32 host staging for device backends
  // What launch_sampling writes on the device — [ids | logprob | top_ids | top_logprobs] per row,
  // in one I32 buffer (F32 as bits) so one copy brings it back — and the two page-locked buffers
  // the copies land in, each grown by doubling (the outgrown ones stay with the Ops).
  tensor::TensorView sampled_dev_;
  tensor::TensorView sampled_host_[2];
  int next_host_buffer_ = 0;
  // The logit row of each sequence in the last prepared step, and that step's row count: where a
  // step planned ahead finds its input tokens among the ids the last step samples.
  std::unordered_map<kv::SeqId, int32_t> last_logit_row_, logit_row_scratch_;
  int64_t last_rows_ = 0;
  int32_t n_state_slots_;
  int32_t n_snapshot_slots_;
  std::unordered_map<kv::SeqId, std::vector<kv::BlockId>> tables_;
};

}  // namespace deepinfer::engine
