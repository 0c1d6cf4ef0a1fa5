// Scheduler::schedule_ahead(): asynchronous scheduling's plan for step n + 1, made while step n is
// still in flight (vLLM's async scheduling, SGLang's overlap scheduler). It is the plan schedule()
// would make after step n's update, as far as that is known without step n's tokens: every running
// request where step n leaves it — a decode or a prompt's last chunk of step n decodes the token
// step n samples for it (read on the device: SeqPlan::token_from_device), a prompt chunk that is not
// the last is followed by the next chunk, a request that sat step n out (the token budget) goes on
// from where it stands — decodes first, then prefill chunks, both in admission order, under the
// token budget as schedule() spends it; then FCFS admissions into the sequence slots free now,
// exactly as schedule() admits (a newcomer's prompt is on the host). Prompt chunks end at state
// snapshot boundaries as schedule() cuts them; the snapshot reserved here stays pending through step
// n's update (kv::Manager::end_step settles step n's own, which a request whose step n takes one
// holds beside it) and the engine copies it right behind this step's forward. It declines (an
// empty plan) whenever step n's results could change step n + 1 beyond that: drafts, a snapshot
// due where step n's unknown token decides its key, an abort pending, a pool too short to grow
// every table without preempting. The caller then waits for step n and schedules as usual.
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/check.h"
#include "sched/scheduler.h"

namespace deepinfer::sched {
namespace {

// A running request's row in the plan ahead: where it starts, how many tokens it runs, and whether
// its input is the token step n samples for it (else the ids are on the host: its prompt, or the
// last sampled token of a request that sat step n out).
struct AheadRow {
  Request* req = nullptr;
  int32_t first = 0;
  int32_t n_tokens = 0;
  bool from_device = false;
  int32_t boundary = 0;  // the state snapshot this step's chunk ends at (cut_at_snapshot), or 0
};

}  // namespace

BatchPlan Scheduler::schedule_ahead(const BatchPlan& in_flight) {
  if (!in_flight_step_ || *in_flight_step_ != in_flight.step_id || ahead_step_ || in_flight.seqs.empty()) return {};
  if (config_.max_draft_tokens > 0) return {};
  const int64_t step_n = static_cast<int64_t>(in_flight.step_id);
  const bool snapshots = kv_.config().n_snapshot_slots > 0 && kv_.config().enable_prefix_caching;
  // Step n's rows by request. A request of step n that is gone already ended at the update before
  // (step n was itself planned ahead): its row there is ignored, and it runs nothing here.
  std::unordered_map<SeqId, const SeqPlan*> in_step;
  for (const SeqPlan& sp : in_flight.seqs) {
    auto it = requests_.find(sp.seq_id);
    if (it == requests_.end()) continue;
    const Request& req = it->second;
    const int32_t end = sp.first_position + sp.n_tokens_scheduled;
    // A decode, a prompt's last chunk (step n samples the token step n + 1 decodes) or an earlier
    // chunk of the prompt (step n samples nothing; the next chunk's ids are the prompt's).
    const bool decode = req.state == RequestState::kDecode && sp.n_tokens_scheduled == 1 && sp.needs_logits;
    const bool chunk = req.state == RequestState::kPrefill && sp.needs_logits == (end == req.n_tokens());
    if (!(decode || chunk) || sp.n_draft_tokens != 0 || req.pending_finish != FinishReason::kNone ||
        !req.draft_tokens.empty() || req.scheduled_step != step_n) {
      return {};
    }
    in_step.emplace(sp.seq_id, &sp);
  }

  // The running requests as step n's update leaves them, in schedule()'s order: decodes, then
  // prefill chunks, each in admission order; the budget as schedule() spends it.
  std::vector<AheadRow> rows;
  int32_t budget = config_.max_num_batched_tokens;
  int64_t blocks_needed = 0;
  for (const bool decodes : {true, false}) {
    for (SeqId id : running_) {
      if (budget <= 0) break;
      Request& req = requests_.at(id);
      AheadRow row{&req, req.n_computed, 0, false, 0};
      if (auto it = in_step.find(id); it != in_step.end()) {
        row.first = it->second->first_position + it->second->n_tokens_scheduled;
        row.from_device = it->second->needs_logits;
      }
      const bool decode_next = row.from_device || req.state == RequestState::kDecode;
      if (decode_next != decodes) continue;
      if (row.from_device) {
        // Step n's token ends the request by length: there is nothing to run for it.
        if (length_finish(req, 1) != FinishReason::kNone) continue;
        // A snapshot due at the end of step n + 1 would be keyed by the hash of a block holding
        // step n's unknown token.
        if (snapshots && kv_.snapshot_policy().next_boundary(row.first, row.first + 1, req.n_prompt,
                                                             req.n_hit_boundary) != 0) {
          return {};
        }
        row.n_tokens = 1;
      } else {
        // schedule_running()'s chunk: the prompt's next tokens (or a sat-out decode's last token).
        row.n_tokens = chunk_tokens(req, row.first, budget);
        row.n_tokens = cut_at_snapshot(req, row.first, row.n_tokens, req.n_hit_boundary, &row.boundary);
      }
      budget -= row.n_tokens;
      const int64_t covered = static_cast<int64_t>(kv_.block_table(id).size());
      blocks_needed += std::max<int64_t>(0, kv_.n_blocks_for(int64_t{row.first} + row.n_tokens) - covered);
      rows.push_back(row);
    }
  }
  // Waiting requests are admitted into the sequence slots free now: one that a request ending at
  // step n frees is taken at that update, so a newcomer waiting for it starts a step later than a
  // synchronous loop would start it (its tokens are the same).
  const bool admits = !waiting_.empty() && n_running() < config_.max_num_seqs && budget > 0;
  if ((rows.empty() && !admits) || blocks_needed > kv_.n_free_blocks()) return {};

  StepState step;
  BatchPlan& plan = step.plan;
  plan.step_id = next_step_;  // taken (with the step's counters) only if the plan holds a row
  step.budget = config_.max_num_batched_tokens;
  for (const AheadRow& row : rows) {
    Request& req = *row.req;
    // Covers positions [0, first + n_tokens): step n's and this step's (the manager counts from
    // n_computed, which step n's update advances to where step n leaves the request).
    std::optional<std::vector<kv::BlockId>> fresh = kv_.allocate(req.id, row.first + row.n_tokens - req.n_computed);
    DI_CHECK(fresh.has_value(), "schedule_ahead: request {} found no block after counting {} free", req.id,
             kv_.n_free_blocks());
    emit(req, step, row.first, row.n_tokens, 0, row.boundary, std::move(*fresh), false, StateInit::kKeep, kv::kNoId,
         row.from_device);
  }
  // Admissions, as schedule() makes them: the blocks the rows above took are gone already.
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
