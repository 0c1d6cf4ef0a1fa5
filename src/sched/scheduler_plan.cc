// Scheduler::schedule(): builds one BatchPlan. Order of work: running decodes, running prefill
// chunks (both in admission order), then FCFS admission from the waiting queue — skipped in a
// step that had to preempt, so a freshly freed pool is not refilled by newcomers first.
#include <algorithm>
#include <utility>

#include "base/check.h"
#include "sched/scheduler.h"

namespace deepinfer::sched {

BatchPlan Scheduler::schedule() {
  DI_CHECK(!in_flight_step_, "schedule() while plan {} awaits update()", in_flight_step_.value_or(0));
  StepState step;
  step.plan.step_id = next_step_++;
  step.plan.finished_ids = std::exchange(finished_since_plan_, {});
  step.plan.aborted_ids = std::exchange(aborted_since_plan_, {});
  step.budget = config_.max_num_batched_tokens;
  ++stats_.n_steps;

  std::vector<SeqId> order;
  for (SeqId id : running_) {
    if (requests_.at(id).state == RequestState::kDecode) order.push_back(id);
  }
  for (SeqId id : running_) {
    if (requests_.at(id).state == RequestState::kPrefill) order.push_back(id);
  }
  for (SeqId id : order) {
    if (step.budget <= 0) break;
    Request& req = requests_.at(id);
    if (req.is_running()) schedule_running(req, step);  // else preempted earlier in this pass
  }
  if (step.plan.preempted_ids.empty()) admit_from_queue(step);
  for (auto& [id, req] : requests_) req.draft_tokens.clear();  // drafts are valid for one step
  if (!step.plan.seqs.empty()) in_flight_step_ = step.plan.step_id;
  return std::move(step.plan);
}

int32_t Scheduler::draft_count(const Request& req, int32_t budget) const {
  int64_t k = std::min<int64_t>(static_cast<int64_t>(req.draft_tokens.size()), config_.max_draft_tokens);
  // The step yields up to k + 1 tokens; they must fit the budget and the length limits.
  k = std::min<int64_t>(k, budget - 1);
  k = std::min<int64_t>(k, int64_t{max_seq_tokens_} - req.n_tokens() - 1);
  if (req.max_new_tokens > 0) k = std::min<int64_t>(k, int64_t{req.max_new_tokens} - req.n_generated() - 1);
  return static_cast<int32_t>(std::max<int64_t>(k, 0));
}

int32_t Scheduler::cut_at_snapshot(const Request& req, int32_t first, int32_t n_real, int32_t n_hit,
                                   int32_t* boundary) const {
  *boundary = 0;
  if (kv_.config().n_snapshot_slots == 0 || !kv_.config().enable_prefix_caching) return n_real;
  const int32_t bt = kv_.block_tokens();
  int32_t from = first;
  // The chunk must end exactly at the boundary: the snapshot copies the state after the step.
  while (int32_t b = kv_.snapshot_policy().next_boundary(from, first + n_real, req.n_prompt, n_hit)) {
    if (kv_.snapshot_pool().can_reserve(req.block_hashes[static_cast<size_t>(b / bt - 1)])) {
      *boundary = b;
      return b - first;
    }
    from = b;
  }
  return n_real;
}

SeqId Scheduler::pick_victim(uint64_t step_id) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (requests_.at(*it).scheduled_step != static_cast<int64_t>(step_id)) return *it;
  }
  DI_CHECK(false, "no preemption victim: every running request is already scheduled");
  return 0;
}

void Scheduler::preempt(SeqId victim, StepState& step) {
  Request& v = requests_.at(victim);
  kv_.free(victim);
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  v.state = RequestState::kPreempted;
  v.n_computed = 0;
  v.n_tokens_cached = 0;
  v.n_hit_boundary = 0;
  v.draft_tokens.clear();
  ++v.n_preemptions;
  ++stats_.n_preemptions;
  waiting_.push_front(victim);  // ahead of requests that arrived later
  step.plan.preempted_ids.push_back(victim);
}

int32_t Scheduler::chunk_tokens(const Request& req, int32_t first, int32_t budget) const {
  const int32_t n_remaining = req.n_tokens() - first;
  int32_t n = std::min(n_remaining, budget);
  if (n_remaining > 1 && config_.max_prefill_chunk > 0) n = std::min(n, config_.max_prefill_chunk);
  if (n_remaining > 1 && req.prompt_logits && config_.max_prompt_logits_chunk > 0) {
    n = std::min(n, config_.max_prompt_logits_chunk);
  }
  return n;
}

void Scheduler::schedule_running(Request& req, StepState& step) {
  int32_t n_real = chunk_tokens(req, req.n_computed, step.budget);
  const int32_t n_drafts = req.n_tokens() - req.n_computed == 1 ? draft_count(req, step.budget) : 0;
  int32_t boundary = 0;
  if (n_drafts == 0) n_real = cut_at_snapshot(req, req.n_computed, n_real, req.n_hit_boundary, &boundary);
  std::optional<std::vector<kv::BlockId>> fresh;
  while (!(fresh = kv_.allocate(req.id, n_real + n_drafts))) {
    const SeqId victim = pick_victim(step.plan.step_id);
    preempt(victim, step);
    if (victim == req.id) return;
  }
  emit(req, step, req.n_computed, n_real, n_drafts, boundary, std::move(*fresh), false, StateInit::kKeep, kv::kNoId);
}

void Scheduler::admit_from_queue(StepState& step) {
  while (!waiting_.empty() && step.budget > 0 && n_running() < config_.max_num_seqs) {
    if (!admit_waiting(requests_.at(waiting_.front()), step)) break;  // FCFS: no overtaking
  }
}

bool Scheduler::admit_waiting(Request& req, StepState& step) {
  // Prompt logprobs need the logits of every prompt row: such a request reads no cached prefix.
  const kv::PrefixMatch m = req.prompt_logits ? kv::PrefixMatch{} : kv_.match_prefix(req.block_hashes, req.n_tokens());
  const int32_t first = m.replay_start;
  int32_t n_real = chunk_tokens(req, first, step.budget);
  // A hit boundary without its own snapshot is a candidate for one once the replay reaches it.
  const bool restored_at_hit = m.snapshot && m.replay_start == m.n_tokens_cached;
  const int32_t n_hit = restored_at_hit ? 0 : m.n_tokens_cached;
  int32_t boundary = 0;
  n_real = cut_at_snapshot(req, first, n_real, n_hit, &boundary);
  if (!kv_.admit(req.id, m, n_real)) return false;

  waiting_.pop_front();
  running_.push_back(req.id);
  req.state = RequestState::kPrefill;
  req.n_computed = first;
  req.n_tokens_cached = m.n_tokens_cached;
  req.n_hit_boundary = n_hit;
  req.admit_order = next_admit_++;
  if (req.n_prompt_cached < 0) req.n_prompt_cached = m.n_tokens_cached;
  ++stats_.n_admissions;
  stats_.n_tokens_prefix_hit += m.n_tokens_cached;
  stats_.n_tokens_replayed += m.n_tokens_cached - first;
  stats_.n_snapshot_restores += m.snapshot ? 1 : 0;
  const std::span<const kv::BlockId> table = kv_.block_table(req.id);
  emit(req, step, first, n_real, 0, boundary, std::vector<kv::BlockId>(table.begin(), table.end()), true,
       m.snapshot ? StateInit::kRestoreSnapshot : StateInit::kReset, m.snapshot.value_or(kv::kNoId));
  return true;
}

void Scheduler::emit(Request& req, StepState& step, int32_t first, int32_t n_real, int32_t n_drafts,
                     int32_t boundary, std::vector<kv::BlockId> new_blocks, bool reset, StateInit init,
                     kv::SnapshotId restore, bool from_device) {
  SeqPlan sp;
  sp.seq_id = req.id;
  sp.state_slot = kv_.state_slot(req.id);
  sp.state_init = init;
  sp.snapshot_restore = restore;
  sp.first_position = first;
  sp.n_tokens_scheduled = n_real + n_drafts;
  sp.n_draft_tokens = n_drafts;
  sp.n_history_cached = req.n_tokens_cached;
  sp.window_floor = kv_.window_floor(req.id);
  sp.n_prompt = req.n_prompt;
  sp.needs_logits = from_device || first + n_real == req.n_tokens();
  // Prompt logprobs: the rows [first, min(first + n_real, n_prompt - 1)), each followed by a prompt token.
  if (req.prompt_logits && !from_device) {
    sp.n_prompt_logit_rows = std::max(0, std::min(first + n_real, req.n_prompt - 1) - first);
  }
  if (from_device) {
    sp.token_ids = {req.tokens.back()};  // a placeholder inside the vocabulary
    sp.token_from_device = true;
  } else {
    const auto begin = req.tokens.begin() + first;
    sp.token_ids.assign(begin, begin + n_real);
  }
  sp.token_ids.insert(sp.token_ids.end(), req.draft_tokens.begin(), req.draft_tokens.begin() + n_drafts);
  if (init == StateInit::kReset && sp.first_position > 0) {
    for (int32_t p = sp.first_position - config_.n_lookback_tokens; p < sp.first_position; ++p) {
      sp.lookback_ids.push_back(p < 0 ? -1 : req.tokens[static_cast<size_t>(p)]);
    }
  }
  sp.block_table_reset = reset;
  sp.n_blocks = static_cast<int32_t>(kv_.block_table(req.id).size());
  sp.new_block_ids = std::move(new_blocks);
  if (boundary > 0) {
    const kv::BlockHash& key = req.block_hashes[static_cast<size_t>(boundary / kv_.block_tokens() - 1)];
    sp.snapshot_take = kv_.reserve_snapshot(req.id, key, boundary).value_or(kv::kNoId);
  }
  step.budget -= sp.n_tokens_scheduled;
  step.plan.n_tokens_scheduled += sp.n_tokens_scheduled;
  req.scheduled_step = static_cast<int64_t>(step.plan.step_id);
  step.plan.seqs.push_back(std::move(sp));
}

}  // namespace deepinfer::sched
