// sched::Scheduler: continuous batching over a kv::Manager. One engine step is
//   plan = schedule();  runner(plan) → forward → sample;  events = update(plan, outputs);
// Policy: running decodes first, then running prefill chunks, then FCFS admission of waiting
// requests, under max_num_batched_tokens and max_num_seqs. When blocks run out, the most
// recently admitted running request is preempted by recompute. Deterministic: the same calls
// produce the same plans. Not thread-safe: the engine calls it from its step thread;
// abort()/finish() between schedule() and update() are deferred to update().
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "kv/manager.h"
#include "sched/batch_plan.h"
#include "sched/request.h"

namespace deepinfer::sched {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;             // running sequences (also bounded by state slots)
  int32_t max_num_batched_tokens = 8192;  // tokens per step, drafts included
  int32_t max_model_len = 0;              // prompt + generated; 0: bounded by the pool only
  int32_t max_prefill_chunk = 0;          // cap on one sequence's prefill chunk; 0: budget only
  // Cap on the prefill chunk of a request with prompt_logits: each of its rows becomes a [vocab]
  // F32 logits row in the step (129,280 floats = 505 KiB each on V4), so this bounds them per
  // request and step (256 MiB at 512); 0: no cap of its own.
  int32_t max_prompt_logits_chunk = 512;
  int32_t max_draft_tokens = 0;           // speculative lookahead per sequence and step
  // Token ids before first_position sent with a sequence whose state slot starts cold (V4.1's
  // Engram hashes n-grams over them, SeqPlan::lookback_ids); 0: none.
  int32_t n_lookback_tokens = 0;
};

struct SchedulerStats {
  int64_t n_steps = 0;
  int64_t n_preemptions = 0;
  int64_t n_admissions = 0;
  int64_t n_tokens_prefix_hit = 0;  // Σ H over admissions
  int64_t n_tokens_replayed = 0;    // Σ (H − replay start) over admissions
  int64_t n_snapshot_restores = 0;
};

class Scheduler {
 public:
  static Result<Scheduler> create(SchedulerConfig config, kv::KvConfig kv_config);

  // Queues a request (FCFS). Fails on a duplicate id, an empty prompt, negative ids, or a
  // prompt that leaves no room for one generated token (max_seq_tokens()).
  Status add_request(RequestParams params);
  // Plans the next step. The plan is in flight until update(plan, ...); calling schedule()
  // again before that is a programmer error. An empty plan needs no update().
  BatchPlan schedule();
  // Asynchronous scheduling: plans the step after `in_flight` (the plan awaiting update()) before
  // its results are known, so the device can run it while the host takes in that step's tokens:
  // what schedule() would plan after the update, as far as it is known without the tokens (file
  // comment of scheduler_ahead.cc). A sequence that `in_flight` samples for decodes that token
  // (token_from_device set; left out if it surely ends it by length), a prompt chunk is followed by
  // the next, a request that sat `in_flight` out goes on; waiting requests are then admitted FCFS
  // into the sequence slots free now, as schedule() admits them. Declines (an empty plan: the
  // caller schedules after update()) with drafts, an abort pending, a snapshot keyed by an unknown
  // token or a second one pending for a request, or blocks short (nothing is preempted here). A request that ends in update(in_flight) is released there as always (the device
  // runs this plan's step before anything planned later reuses its blocks or slot); this plan's
  // update ignores its row.
  BatchPlan schedule_ahead(const BatchPlan& in_flight);
  // Applies the step's results: outputs[i] belongs to plan.seqs[i]. Appends tokens, commits
  // full blocks to the prefix cache, publishes snapshots, rolls back rejected drafts, finishes
  // sequences (engine stop or length) and frees them. Error (state unchanged) on mismatched outputs.
  Result<std::vector<SeqEvent>> update(const BatchPlan& plan, std::span<const SeqOutput> outputs);
  // Ends a request in any state, releasing everything it holds (deferred to update() if it is
  // in the plan in flight). Reported in the next plan's aborted_ids. NotFound if unknown.
  Status abort(SeqId id);
  // Engine-detected end outside update() (kStop or kLength); reported in finished_ids.
  Status finish(SeqId id, FinishReason reason);
  // Draft tokens to verify in the next step (decode sequences only; at most max_draft_tokens
  // are used, fewer when the budget or length limits leave less room).
  Status set_draft_tokens(SeqId id, std::span<const TokenId> drafts);

  bool has_unfinished() const { return !requests_.empty(); }
  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t max_seq_tokens() const { return max_seq_tokens_; }
  const Request* find(SeqId id) const;
  std::span<const kv::BlockId> block_table(SeqId id) const { return kv_.block_table(id); }
  const std::deque<SeqId>& waiting() const { return waiting_; }
  const std::vector<SeqId>& running() const { return running_; }  // admission order
  const SchedulerStats& stats() const { return stats_; }
  const kv::Manager& kv() const { return kv_; }
  const SchedulerConfig& config() const { return config_; }

  // kv::Manager::check_integrity plus the scheduler's own bookkeeping.
  Status check_integrity() const;

 private:
  struct StepState {  // a plan being built (schedule(), schedule_ahead()) and its token budget left
    BatchPlan plan;
    int32_t budget = 0;
  };
  Scheduler(SchedulerConfig config, kv::Manager kv);

  void schedule_running(Request& req, StepState& step);
  // FCFS admissions into `step` while budget and sequence slots last (schedule(), schedule_ahead()).
  void admit_from_queue(StepState& step);
  bool admit_waiting(Request& req, StepState& step);
  int32_t draft_count(const Request& req, int32_t budget) const;
  // Tokens of the prompt's next chunk from `first` under `budget` and max_prefill_chunk, before a
  // snapshot cut (schedule_running, admit_waiting, schedule_ahead).
  int32_t chunk_tokens(const Request& req, int32_t first, int32_t budget) const;
  int32_t cut_at_snapshot(const Request& req, int32_t first, int32_t n_real, int32_t n_hit,
                          int32_t* boundary) const;
  // Appends the row of `req` running positions [first, first + n_real + n_drafts) to `step`.
  // from_device: a decode of the token the plan in flight samples (schedule_ahead; n_real = 1).
  void emit(Request& req, StepState& step, int32_t first, int32_t n_real, int32_t n_drafts, int32_t boundary,
            std::vector<kv::BlockId> new_blocks, bool reset, StateInit init, kv::SnapshotId restore,
            bool from_device = false);
  void preempt(SeqId victim, StepState& step);
  SeqId pick_victim(uint64_t step_id) const;
  bool is_in_flight(const Request& req) const;

  Status validate_outputs(const BatchPlan& plan, std::span<const SeqOutput> outputs) const;
  std::optional<SeqEvent> apply_output(const SeqPlan& sp, const SeqOutput& out);
  // kLength when the request, with `n_more` tokens beyond its own, is at a length limit.
  FinishReason length_finish(const Request& req, int32_t n_more = 0) const;
  void release(SeqId id, FinishReason reason);

  SchedulerConfig config_;
  kv::Manager kv_;
  int32_t max_seq_tokens_ = 0;
  // Live requests (waiting, preempted, running). Plans follow running_/waiting_ order, never
  // this map's iteration order.
  std::unordered_map<SeqId, Request> requests_;
  std::deque<SeqId> waiting_;          // FCFS; preempted requests re-enter at the front
  std::vector<SeqId> running_;         // admission order: the back is the next victim
  // Plans awaiting update(), oldest first: in_flight_step_, then the one scheduled ahead of its
  // update (schedule_ahead). A request is in flight while its scheduled_step >= in_flight_step_.
  std::optional<uint64_t> in_flight_step_;
  std::optional<uint64_t> ahead_step_;
  std::vector<SeqId> finished_since_plan_;
  std::vector<SeqId> aborted_since_plan_;
  uint64_t next_step_ = 0;
  uint64_t next_arrival_ = 0;
  uint64_t next_admit_ = 0;
  SchedulerStats stats_;
};

}  // namespace deepinfer::sched
