// Scheduler: construction, request intake, abort/finish, drafts, integrity. The planning pass
// is in scheduler_plan.cc, the result pass in scheduler_update.cc.
#include "sched/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace deepinfer::sched {

Result<Scheduler> Scheduler::create(SchedulerConfig config, kv::KvConfig kv_config) {
  if (config.max_num_seqs <= 0 || config.max_num_batched_tokens <= 0 || config.max_model_len < 0 ||
      config.max_prefill_chunk < 0 || config.max_draft_tokens < 0 || config.max_prompt_logits_chunk < 0) {
    return invalid_argument(
        "scheduler config: need max_num_seqs > 0, max_num_batched_tokens > 0 and non-negative "
        "max_model_len, max_prefill_chunk, max_draft_tokens, max_prompt_logits_chunk "
        "(got {}, {}, {}, {}, {}, {})",
        config.max_num_seqs, config.max_num_batched_tokens, config.max_model_len,
        config.max_prefill_chunk, config.max_draft_tokens, config.max_prompt_logits_chunk);
  }
  DI_ASSIGN_OR_RETURN(kv::Manager kv, kv::Manager::create(std::move(kv_config)));
  return Scheduler(config, std::move(kv));
}

Scheduler::Scheduler(SchedulerConfig config, kv::Manager kv) : config_(config), kv_(std::move(kv)) {
  // A lone sequence can always grow to the whole pool, so it never preempts itself forever.
  const int64_t pool_tokens = int64_t{kv_.config().n_blocks} * kv_.block_tokens();
  const int64_t limit = config_.max_model_len > 0 ? std::min<int64_t>(config_.max_model_len, pool_tokens)
                                                  : pool_tokens;
  max_seq_tokens_ = static_cast<int32_t>(std::min<int64_t>(limit, INT32_MAX));
}

Status Scheduler::add_request(RequestParams params) {
  if (requests_.contains(params.id)) return invalid_argument("request {}: id already in use", params.id);
  if (params.prompt.empty()) return invalid_argument("request {}: empty prompt", params.id);
  if (params.max_new_tokens < 0) {
    return invalid_argument("request {}: max_new_tokens {} < 0", params.id, params.max_new_tokens);
  }
  for (TokenId t : params.prompt) {
    if (t < 0) return invalid_argument("request {}: negative token id {}", params.id, t);
  }
  if (static_cast<int64_t>(params.prompt.size()) >= max_seq_tokens_) {
    return out_of_range("request {}: prompt of {} tokens leaves no room below the maximum sequence "
                        "length {}", params.id, params.prompt.size(), max_seq_tokens_);
  }
  Request req;
  req.id = params.id;
  req.n_prompt = static_cast<int32_t>(params.prompt.size());
  req.tokens = std::move(params.prompt);
  req.max_new_tokens = params.max_new_tokens;
  req.prompt_logits = params.prompt_logits;
  req.hash_root = kv_.hasher().root(params.cache_salt);
  kv_.hasher().extend(req.tokens, req.hash_root, &req.block_hashes);
  req.arrival_order = next_arrival_++;
  waiting_.push_back(req.id);
  requests_.emplace(req.id, std::move(req));
  return Status::ok();
}

const Request* Scheduler::find(SeqId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

void Scheduler::release(SeqId id, FinishReason reason) {
  Request& req = requests_.at(id);
  if (req.is_running()) {
    kv_.free(id);
    running_.erase(std::find(running_.begin(), running_.end(), id));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
  }
  (reason == FinishReason::kAborted ? aborted_since_plan_ : finished_since_plan_).push_back(id);
  requests_.erase(id);
}

Status Scheduler::abort(SeqId id) { return finish(id, FinishReason::kAborted); }

bool Scheduler::is_in_flight(const Request& req) const {
  return in_flight_step_ && req.scheduled_step >= static_cast<int64_t>(*in_flight_step_);
}

Status Scheduler::finish(SeqId id, FinishReason reason) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return not_found("request {}: not found (finished or never added)", id);
  if (reason == FinishReason::kNone) return invalid_argument("request {}: finish without a reason", id);
  if (is_in_flight(it->second)) {
    // Its blocks may be written by the step in flight: free them in update().
    if (it->second.pending_finish == FinishReason::kNone) it->second.pending_finish = reason;
    return Status::ok();
  }
  release(id, reason);
  return Status::ok();
}

Status Scheduler::set_draft_tokens(SeqId id, std::span<const TokenId> drafts) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return not_found("request {}: not found", id);
  for (TokenId t : drafts) {
    if (t < 0) return invalid_argument("request {}: negative draft token id {}", id, t);
  }
  it->second.draft_tokens.assign(drafts.begin(), drafts.end());
  return Status::ok();
}

Status Scheduler::check_integrity() const {
  DI_RETURN_IF_ERROR(kv_.check_integrity());
  if (running_.size() + waiting_.size() != requests_.size()) {
    return internal_error("scheduler: {} running + {} waiting != {} live requests", running_.size(),
                          waiting_.size(), requests_.size());
  }
  if (kv_.n_seqs() != static_cast<int32_t>(running_.size()) ||
      static_cast<int32_t>(running_.size()) > config_.max_num_seqs) {
    return internal_error("scheduler: {} running requests, kv manager tracks {}, max_num_seqs {}",
                          running_.size(), kv_.n_seqs(), config_.max_num_seqs);
  }
  uint64_t last_admit = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    const Request& r = requests_.at(running_[i]);
    if (!r.is_running() || !kv_.contains(r.id) || kv_.n_tokens_computed(r.id) != r.n_computed ||
        r.n_computed >= r.n_tokens() || (i > 0 && r.admit_order <= last_admit)) {
      return internal_error("scheduler: running request {} is inconsistent (state {}, computed {} of {})",
                            r.id, request_state_name(r.state), r.n_computed, r.n_tokens());
    }
    last_admit = r.admit_order;
  }
  for (SeqId id : waiting_) {
    const Request& r = requests_.at(id);
    if (r.is_running() || kv_.contains(id) || r.n_computed != 0) {
      return internal_error("scheduler: waiting request {} holds KV resources or progress", id);
    }
  }
  for (const auto& [id, r] : requests_) {
    if (r.block_hashes.size() != static_cast<size_t>(r.n_tokens() / kv_.block_tokens())) {
      return internal_error("scheduler: request {} has {} block hashes for {} tokens", id,
                            r.block_hashes.size(), r.n_tokens());
    }
  }
  return Status::ok();
}

}  // namespace deepinfer::sched
