// Scheduler::schedule_ahead(): asynchronous scheduling's plan for step n + 1, made while step n is
// still in flight (vLLM's async scheduling, SGLang's overlap scheduler). It is the decode
// continuation of step n — the same sequences (decodes, and prompts whose last chunk step n runs),
// each decoding the token step n samples for it (read on the device: SeqPlan::token_from_device)
// — followed by FCFS admissions into the sequence slots free now, exactly as schedule() admits
// (a newcomer's prompt is on the host). It declines (an empty plan) whenever step n's results
// could change what step n + 1 should be beyond that: a request sitting step n out or prefilling
// a chunk that is not its last, drafts, snapshots, a pool too short to grow every table without
// preempting. The caller then waits for step n and schedules as usual.
#include <utility>
#include <vector>

#include "base/check.h"
#include "sched/scheduler.h"

namespace deepinfer::sched {

BatchPlan Scheduler::schedule_ahead(const BatchPlan& in_flight) {
  if (!in_flight_step_ || *in_flight_step_ != in_flight.step_id || ahead_step_ || in_flight.seqs.empty()) return {};
  if (config_.max_draft_tokens > 0 || in_flight.seqs.size() != running_.size()) return {};
  const int32_t bt = kv_.block_tokens();
  const bool snapshots = kv_.config().n_snapshot_slots > 0 && kv_.config().enable_prefix_caching;
  // Each continuing request and the position step n + 1 runs for it: that of step n's token.
  std::vector<std::pair<Request*, int32_t>> next;  // in step n's order (decodes first, admission order within)
  int64_t blocks_needed = 0;
  for (const SeqPlan& sp : in_flight.seqs) {
    Request& req = requests_.at(sp.seq_id);
    // A decode, or a prompt's last chunk (the step after an admission): either way step n samples
    // the token that step n + 1 decodes.
    const bool decode = req.state == RequestState::kDecode && sp.n_tokens_scheduled == 1;
    const bool last_chunk =
        req.state == RequestState::kPrefill && sp.first_position + sp.n_tokens_scheduled == req.n_tokens();
    if (!(decode || last_chunk) || sp.n_draft_tokens != 0 || !sp.needs_logits || sp.snapshot_take != kv::kNoId ||
        req.pending_finish != FinishReason::kNone || !req.draft_tokens.empty() ||
        req.scheduled_step != static_cast<int64_t>(in_flight.step_id)) {
      return {};
    }
    // Step n's token ends the request by length: there is nothing to run for it.
    if (length_finish(req, 1) != FinishReason::kNone) continue;
    // A snapshot due at the end of step n + 1 would be keyed by the hash of a block holding step
    // n's unknown token.
    const int32_t first = sp.first_position + sp.n_tokens_scheduled;
    if (snapshots && kv_.snapshot_policy().next_boundary(first, first + 1, req.n_prompt, req.n_hit_boundary) != 0) {
      return {};
    }
    const int64_t covered = static_cast<int64_t>(kv_.block_table(req.id).size()) * bt;
    if (first + 1 > covered) blocks_needed += 1;  // step n's table covers `first`: at most one block more
    next.push_back({&req, first});
  }
  // Waiting requests are admitted into the sequence slots free now: one that a request ending at
  // step n frees is taken at that update, so a newcomer waiting for it starts a step later than a
  // synchronous loop would start it (its tokens are the same).
  const bool admits = !waiting_.empty() && n_running() < config_.max_num_seqs;
  if ((next.empty() && !admits) || blocks_needed > kv_.n_free_blocks()) return {};

  StepState step;
  BatchPlan& plan = step.plan;
  plan.step_id = next_step_;  // taken (with the step's counters) only if the plan holds a row
  step.budget = config_.max_num_batched_tokens;
  for (auto [req, first] : next) {
    // Covers positions [0, first + 1): step n's and this step's (the manager counts from n_computed,
    // which step n's update advances to `first`).
    std::optional<std::vector<kv::BlockId>> fresh = kv_.allocate(req->id, first + 1 - req->n_computed);
    DI_CHECK(fresh.has_value(), "schedule_ahead: request {} found no block after counting {} free", req->id,
             kv_.n_free_blocks());
    SeqPlan sp;
    sp.seq_id = req->id;
    sp.state_slot = kv_.state_slot(req->id);
    sp.first_position = first;
    sp.n_tokens_scheduled = 1;
    sp.n_history_cached = req->n_tokens_cached;
    sp.window_floor = kv_.window_floor(req->id);
    sp.n_prompt = req->n_prompt;
    sp.needs_logits = true;
    sp.token_ids = {req->tokens.back()};  // a placeholder inside the vocabulary
    sp.token_from_device = true;
    sp.n_blocks = static_cast<int32_t>(kv_.block_table(req->id).size());
    sp.new_block_ids = std::move(*fresh);
    req->scheduled_step = static_cast<int64_t>(plan.step_id);
    plan.n_tokens_scheduled += 1;
    step.budget -= 1;
    plan.seqs.push_back(std::move(sp));
  }
  // Admissions, as schedule() makes them: the blocks the decodes above took are gone already.
  if (admits) admit_from_queue(step);
  if (plan.seqs.empty()) return {};  // nothing admitted after all (the pool): no step ahead
  ++next_step_;
  ++stats_.n_steps;
  plan.finished_ids = std::exchange(finished_since_plan_, {});
  plan.aborted_ids = std::exchange(aborted_since_plan_, {});
  ahead_step_ = plan.step_id;
  return std::move(plan);
}

}  // namespace deepinfer::sched
