// ModelRunner: the device side of a step. It turns a sched::BatchPlan into a model::ForwardBatch,
// performs the plan's state duties around the forward — drop the tables of ended sequences,
// apply block-table diffs, reset or restore state slots before, copy state slots into snapshots
// after — and runs the model. It owns the KvState (the bytes behind the KV manager's ids) and a
// mirror of every running sequence's block table; it never decides anything the plan does not say.
// Snapshot id s lives in KvState slot n_state_slots + s. Not thread-safe (engine thread only).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/device_sample_plan.h"
#include "engine/engine_config.h"
#include "engine/image_inputs.h"
#include "engine/loaded_model.h"
#include "model/kv_state.h"
#include "sched/batch_plan.h"

namespace deepinfer::engine {

// `buf` with room for `need` elements: replaced by `alloc(max(need, 2 x its size))` when short.
// Grown by doubling, the outgrown buffers (they stay with the Ops) are at most as large together
// as the last.
template <typename Alloc>
void ensure_room(tensor::TensorView& buf, int64_t need, Alloc alloc) {
  const int64_t held = buf.empty() ? 0 : buf.numel();
  if (held < need) buf = alloc(std::max(need, 2 * held));
}

class ModelRunner {
 public:
  // `model` must outlive the runner. `state.n_slots` = n_state_slots + snapshot slots; with a
  // drafter, `state.spare_positions` bounds the drafts a step may verify.
  ModelRunner(LoadedModel* model, const model::KvStateOptions& state, int32_t n_state_slots,
              Drafter drafter = Drafter::kNone);

  // Applies the plan's bookkeeping and state duties and builds the forward batch. logit_row[i]
  // receives the batch's logit row of plan.seqs[i] (-1: no logits this step). Rows for prompt
  // logprobs (SeqPlan::n_prompt_logit_rows) come after every sampled row: prompt_logit_rows().
  Result<model::ForwardBatch> prepare(const sched::BatchPlan& plan, std::vector<int32_t>* logit_row);
  // What a step sampled where its logits are copies back per logit row: the token and, when some
  // row asked for logprobs (n_top >= 0), every row's raw logprob and top-n_top (Ops::logprob_rows).
  struct DeviceSampled {
    std::vector<int32_t> ids;        // [rows] -1 = nothing finite
    int32_t n_top = -1;              // DeviceSamplePlan::n_top: -1 none; else entries per row (0..20)
    std::vector<float> logprob;      // [rows] of ids[r] (raw mode)
    std::vector<int32_t> rank;       // [rows] of ids[r] in its raw row (0: no token)
    std::vector<int32_t> top_ids;    // [rows x n_top]
    std::vector<float> top_logprobs; // [rows x n_top]
    // Row `row` as the host sampler's RowOutput: the token and, when the request asked for
    // `logprobs`, its raw logprob and first *logprobs top entries (the device's list holds the
    // step's largest count, ordered, so its prefix is this row's list).
    sample::RowOutput row_output(size_t row, std::optional<int32_t> logprobs) const;
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
  // The sampling ops of launch_sampling alone, into views on the device: ids [rows] I32 and, when
  // `logprob` is not empty, the raw logprobs (logprob [rows] F32, top_ids / top_logprobs [rows, n]).
  void queue_sampling(const tensor::TensorView& logits, const DeviceSamplePlan& plan, const tensor::TensorView& ids,
                      const tensor::TensorView& logprob, const tensor::TensorView& top_ids,
                      const tensor::TensorView& top_logprobs);
  Status collect_sampling(const SampleTicket& ticket, DeviceSampled* out);
  // Queued right behind the plan's forward (before anything planned ahead of its update can run):
  // copies state slots into the snapshots the plan asked for.
  void take_snapshots(const sched::BatchPlan& plan);
  // Forgets a sequence's table at once (abort outside a plan; the next plan repeats it harmlessly).
  void drop(kv::SeqId seq) {
    tables_.erase(seq);
    mtp_rows_.erase(seq);
  }
  // A sequence's image spans (its prompt's; kept across preemption, which recomputes the prompt)
  // until forget_images: prepare() hands the rows of every chunk that covers them to the model.
  void set_images(kv::SeqId seq, std::shared_ptr<const ImageSpans> images) { images_[seq] = std::move(images); }
  void forget_images(kv::SeqId seq) { images_.erase(seq); }

  // ---- Prompt logprobs (model_runner_prompt.cc) ----
  // The last prepare()'s logit rows for prompt logprobs, per plan row that has some: its prompt
  // positions [first_position, first_position + n), at logit rows [logit_row, logit_row + n) —
  // after the sampled rows, which are the first n_sampled_rows().
  struct PromptLogitRows {
    size_t plan_row = 0;
    int32_t first_position = 0, n = 0, logit_row = 0;
  };
  const std::vector<PromptLogitRows>& prompt_logit_rows() const { return prompt_rows_; }
  int64_t n_sampled_rows() const { return last_rows_; }
  // Queues the reduction of logits rows [first_row, first_row + tokens.size()) — each row's raw
  // logprob of tokens[i], its rank (Ops::token_rank_rows) and the top n_top (Ops::logprob_rows),
  // where the logits are — and the copy of the results into one of two page-locked buffers, so
  // the [rows, vocab] logits die with the step. collect_prompt_logprobs waits for that copy. As
  // launch_sampling's, at most two launches may be uncollected.
  using PromptTicket = SampleTicket;
  struct PromptReduced {
    std::vector<float> logprob;       // [rows]
    std::vector<int32_t> rank;        // [rows]
    std::vector<int32_t> top_ids;     // [rows x n_top] (-1 past the vocabulary)
    std::vector<float> top_logprobs;  // [rows x n_top]
    int64_t n_top = 0;
  };
  Status launch_prompt_logprobs(const tensor::TensorView& logits, int64_t first_row, std::span<const int32_t> tokens,
                                int32_t n_top, PromptTicket* ticket);
  Status collect_prompt_logprobs(const PromptTicket& ticket, PromptReduced* out);

  // ---- Speculative decoding (model_runner_spec.cc) ----
  // A step that verifies drafts writes the state of every row it runs. After sampling, rewind()
  // gives up the rows past each sequence's valid ones [first_position, first_position +
  // n_valid[i]): the state is positional with spare positions (KvStateOptions::spare_positions),
  // so the device holds exactly the state of a step that ran only the valid rows as far as any
  // later row reads it; the host's records of valid ring ranges move back. n_valid[i] < 0: leave
  // row i alone.
  Status rewind(const sched::BatchPlan& plan, std::span<const int32_t> n_valid);
  // What the drafter continues from, per sequence of the step just run (after rewind()).
  struct DraftInput {
    size_t plan_row = 0;       // index in plan.seqs
    std::vector<int32_t> next; // the token after each valid row of the step, in order (its last
                               // entry the token just sampled; a prompt chunk's, the prompt's next)
    int32_t n_drafts = 0;      // drafts wanted (0: feed the drafter's ring only: a prompt chunk,
                               // or a sequence with no room left)
  };
  // Per input: up to n_drafts draft tokens (picked as DraftPicker says) and, for each, the
  // drafter's estimate that it is accepted given the ones before it (V4.1: sigmoid of the confidence head; V4: the MTP's
  // probability of its own pick).
  struct Drafts {
    std::vector<int32_t> tokens;
    std::vector<float> confidence;
  };
  // How the MTP drafter picks draft j of input k from its logits row (V4; DSpark's Markov chain
  // is greedy inside the model). The engine samples a request's drafts with the request's own
  // sampler and noise (coupled drafts: accepted whenever the drafter's distribution puts the same
  // noise's winner where the target's does). Where the logits are, unless `host` is set:
  // `device` adds the pick's row `row` to the plan (DeviceSamplePlan::add; a row it leaves out, or
  // every row without `device`, is the greedy pick); the chained steps read their tokens where the
  // picks are, and the host waits once, for every pick's id and raw logprob. With `host` set, the
  // host picks from each row's logits copied back (-1 = the greedy pick), step after step.
  struct DraftPicker {
    std::function<void(size_t k, int32_t j, size_t row, DeviceSamplePlan* plan)> device;
    std::function<int32_t(size_t k, int32_t j, std::span<const float> logits)> host;
  };
  Result<std::vector<Drafts>> propose(const sched::BatchPlan& plan, std::span<const DraftInput> inputs,
                                      const DraftPicker& pick = {});
  Drafter drafter() const { return drafter_; }
  // Mirrors kv::Manager::rollback of rejected drafts: the sequence's table keeps its first
  // n_blocks blocks (the next plan's diff would say the same; the integrity check compares now).
  void rollback_table(kv::SeqId seq, size_t n_blocks);

  // The mirrored block table of a sequence (empty if unknown): tests compare it with the manager's.
  std::span<const kv::BlockId> block_table(kv::SeqId seq) const;
  int32_t n_tables() const { return static_cast<int32_t>(tables_.size()); }
  model::KvState& state() { return state_; }

 private:
  Status apply_table_diff(const sched::SeqPlan& sp);
  Status init_state(const sched::SeqPlan& sp);
  // Appends the logit rows of prompt logprobs to b.logit_rows (prompt_rows_: where they are).
  void add_prompt_logit_rows(const sched::BatchPlan& plan, model::ForwardBatch& b);
  // Appends rows of `sp`'s sequence at positions first.. with `ids` to `b` (its tables: fill_tables).
  static void add_rows(model::ForwardBatch& b, const sched::SeqPlan& sp, int32_t first, std::span<const int32_t> ids,
                       int32_t window_floor);
  // The block tables of b's sequences (plan rows `rows`), padded with -1 to cover every row's
  // position (the drafters run past the blocks a sequence holds; they read no history).
  void fill_tables(model::ForwardBatch& b, const sched::BatchPlan& plan, std::span<const size_t> rows) const;
  Result<std::vector<Drafts>> propose_mtp(const sched::BatchPlan& plan, std::span<const DraftInput> inputs,
                                          const DraftPicker& pick);
  Result<std::vector<Drafts>> propose_dspark(const sched::BatchPlan& plan, std::span<const DraftInput> inputs);
  // The host's picks of logits [rows, V] (row r: input live[r], draft j; DraftPicker::host) and
  // each pick's softmax probability under the raw logits (the drafter's confidence); ids -1 where
  // a row has nothing finite.
  void pick_on_host(const tensor::TensorView& logits, std::span<const size_t> live, int32_t j,
                    const DraftPicker& pick, std::vector<int32_t>* ids, std::vector<float>* prob);

  // The raw logprobs both launches copy back, `rows` rows at `block` (an I32 buffer, F32 as bits):
  // [rows] logprob of tokens[r] | [rows] its rank | [rows, n] top ids | [rows, n] top logprobs
  // (Ops::logprob_rows + Ops::token_rank_rows of the raw logits). read_logprob_block unpacks a
  // host copy of one.
  void queue_logprob_block(const tensor::TensorView& logits, const tensor::TensorView& tokens, int32_t* block,
                           int64_t n, tensor::Device device);
  static void read_logprob_block(const int32_t* block, int64_t rows, int64_t n, std::vector<float>* logprob,
                                 std::vector<int32_t>* rank, std::vector<int32_t>* top_ids,
                                 std::vector<float>* top_logprobs);
  // Queues the copy of dev's first `count` I32 into host[buffer] (page-locked, grown as needed).
  uint64_t copy_back(const tensor::TensorView& dev, int64_t count, tensor::TensorView& host);

  LoadedModel* model_;
  model::KvState state_;
  tensor::TensorView host_logits_;  // [>= n_logit_rows x vocab] F32 host staging for device backends
  // What launch_sampling writes on the device — [ids | logprob block] per row, in one I32 buffer
  // (F32 as bits) so one copy brings it back — and the two page-locked buffers
  // the copies land in, each grown by doubling (the outgrown ones stay with the Ops).
  tensor::TensorView sampled_dev_;
  tensor::TensorView sampled_host_[2];
  int next_host_buffer_ = 0;
  // Prompt logprobs: the last prepare()'s rows, and launch_prompt_logprobs' results on the device
  // (a logprob block) and in two page-locked buffers, as the sampled ids are.
  std::vector<PromptLogitRows> prompt_rows_;
  tensor::TensorView prompt_dev_;
  tensor::TensorView prompt_host_[2];
  int next_prompt_buffer_ = 0;
  // The logit row of each sequence in the last prepared step, and that step's row count: where a
  // step planned ahead finds its input tokens among the ids the last step samples.
  std::unordered_map<kv::SeqId, int32_t> last_logit_row_, logit_row_scratch_;
  int64_t last_rows_ = 0;
  int32_t n_state_slots_;
  int32_t n_snapshot_slots_;
  Drafter drafter_;
  // MTP drafter: every row's final hidden state of the last forward ([rows, hc, D], persistent:
  // the drafter's own steps come between), each plan row's first batch
  // row in it, and the chained drafts' running state ([seqs, hc, D]).
  tensor::TensorView spec_hidden_, spec_x_, spec_chain_x_;
  std::vector<int32_t> token_begin_;
  // MTP ring per sequence: positions [floor, next) hold rows of this sequence (a gap — a prefix
  // hit, a preemption — starts it over at the gap).
  struct MtpRows {
    int32_t floor = 0, next = 0;
  };
  std::unordered_map<kv::SeqId, MtpRows> mtp_rows_;
  DeviceSamplePlan draft_plan_;     // the MTP picks' sampling (kept: its vectors' memory)
  // The MTP picks on the device: [chain step][input] ids, then the same of raw logprobs (F32 bits).
  tensor::TensorView draft_picks_;
  std::unordered_map<kv::SeqId, std::vector<kv::BlockId>> tables_;
  std::unordered_map<kv::SeqId, std::shared_ptr<const ImageSpans>> images_;
};

}  // namespace deepinfer::engine
