// Scheduler::update(): applies one step's results. Validation runs first and changes nothing on
// error; then per sequence: append tokens, extend block hashes, commit full blocks, roll back
// rejected drafts, publish/cancel snapshots, and finish (engine stop, length) or keep running.
#include <algorithm>
#include <utility>

#include "base/check.h"
#include "sched/scheduler.h"

namespace deepinfer::sched {

Status Scheduler::validate_outputs(const BatchPlan& plan, std::span<const SeqOutput> outputs) const {
  if (plan.seqs.empty()) {
    if (!outputs.empty()) return invalid_argument("update of empty plan {}: {} outputs", plan.step_id, outputs.size());
    return Status::ok();
  }
  if (!in_flight_step_ || *in_flight_step_ != plan.step_id) {
    return failed_precondition("update: plan {} is not the plan in flight", plan.step_id);
  }
  if (outputs.size() != plan.seqs.size()) {
    return invalid_argument("update of plan {}: {} outputs for {} sequences", plan.step_id,
                            outputs.size(), plan.seqs.size());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const SeqPlan& sp = plan.seqs[i];
    const SeqOutput& out = outputs[i];
    if (out.seq_id != sp.seq_id) {
      return invalid_argument("update of plan {}: output {} is for request {}, plan has {}",
                              plan.step_id, i, out.seq_id, sp.seq_id);
    }
    // Released by an earlier plan's update while this plan held it (schedule_ahead), or ended while
    // in flight: outputs ignored.
    auto it = requests_.find(sp.seq_id);
    if (it == requests_.end() || it->second.pending_finish != FinishReason::kNone) continue;
    const size_t n_max = sp.needs_logits ? 1 + static_cast<size_t>(sp.n_draft_tokens) : 0;
    if (out.tokens.size() > n_max || (sp.needs_logits && out.tokens.empty())) {
      return invalid_argument("request {}: {} output tokens, expected {}", sp.seq_id, out.tokens.size(),
                              sp.needs_logits ? "1 to 1 + drafts" : "none (prefill chunk)");
    }
    const size_t n_real = static_cast<size_t>(sp.n_tokens_scheduled - sp.n_draft_tokens);
    for (size_t j = 0; j < out.tokens.size(); ++j) {
      if (out.tokens[j] < 0) return invalid_argument("request {}: negative token id {}", sp.seq_id, out.tokens[j]);
      if (j + 1 < out.tokens.size() && out.tokens[j] != sp.token_ids[n_real + j]) {
        return invalid_argument("request {}: accepted token {} differs from draft {}", sp.seq_id,
                                out.tokens[j], sp.token_ids[n_real + j]);
      }
    }
  }
  return Status::ok();
}

Result<std::vector<SeqEvent>> Scheduler::update(const BatchPlan& plan, std::span<const SeqOutput> outputs) {
  DI_RETURN_IF_ERROR(validate_outputs(plan, outputs));
  std::vector<SeqEvent> events;
  if (plan.seqs.empty()) return events;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (std::optional<SeqEvent> e = apply_output(plan.seqs[i], outputs[i])) events.push_back(std::move(*e));
  }
  in_flight_step_ = std::exchange(ahead_step_, std::nullopt);  // the plan scheduled ahead, if any
  return events;
}

FinishReason Scheduler::length_finish(const Request& req, int32_t n_more) const {
  if (req.n_tokens() + n_more >= max_seq_tokens_) return FinishReason::kLength;
  if (req.max_new_tokens > 0 && req.n_generated() + n_more >= req.max_new_tokens) return FinishReason::kLength;
  return FinishReason::kNone;
}

std::optional<SeqEvent> Scheduler::apply_output(const SeqPlan& sp, const SeqOutput& out) {
  auto it = requests_.find(sp.seq_id);
  // Ended by an earlier plan's update while this plan (made by schedule_ahead) held it: the step
  // ran past the request's end; nothing of it is taken.
  if (it == requests_.end()) return std::nullopt;
  Request& req = it->second;
  if (req.pending_finish != FinishReason::kNone) {
    // Ended by the caller while in flight: results are dropped, nothing is committed.
    release(req.id, req.pending_finish);
    return std::nullopt;
  }
  const int32_t n_real = sp.n_tokens_scheduled - sp.n_draft_tokens;
  const int32_t n_accepted = sp.needs_logits ? static_cast<int32_t>(out.tokens.size()) - 1 : 0;
  req.tokens.insert(req.tokens.end(), out.tokens.begin(), out.tokens.end());
  kv_.hasher().extend(req.tokens, req.hash_root, &req.block_hashes);
  const int32_t n_valid = sp.first_position + n_real + n_accepted;
  kv_.commit(req.id, req.block_hashes, n_valid);
  if (n_valid < sp.first_position + sp.n_tokens_scheduled) kv_.rollback(req.id, n_valid);
  // A snapshot pending that this step did not reserve is a plan ahead's (schedule_ahead).
  kv_.end_step(req.id, /*keep_pending=*/sp.snapshot_take == kv::kNoId);
  req.n_computed = n_valid;
  req.state = n_valid == req.n_tokens() - 1 ? RequestState::kDecode : RequestState::kPrefill;

  SeqEvent ev{req.id, out.tokens, out.finish, n_accepted, std::max(req.n_prompt_cached, 0)};
  if (ev.finish == FinishReason::kNone && !out.tokens.empty()) ev.finish = length_finish(req);
  // Released now even when the plan scheduled ahead also holds the request (asynchronous
  // scheduling), so that its final event comes with its resources freed. That plan's step still
  // writes position n_computed's KV into its blocks and advances its state slot; safe because
  // whatever reuses them is planned after this update and runs on the device after that step
  // (one ordered queue): growth blocks of schedule_ahead, admissions of schedule() (which needs
  // no plan in flight). The write lands past the request's computed tokens, in a block that was
  // never committed, so no prefix-cache hit reads it.
  if (ev.finish != FinishReason::kNone) release(req.id, ev.finish);
  if (ev.tokens.empty() && ev.finish == FinishReason::kNone) return std::nullopt;
  return ev;
}

}  // namespace deepinfer::sched
