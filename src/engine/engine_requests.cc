// Loop-thread request handling: turning accepted requests into scheduler sequences (n > 1 →
// n sequences with derived seeds), aborts and errors outside a step, event delivery, and the
// stats/integrity snapshot taken before each delivery.
#include "base/log.h"
#include "engine/bad_words.h"
#include "engine/engine_impl.h"
#include "engine/reasoning_gate.h"

namespace deepinfer::engine {

void EngineImpl::admit(std::vector<AcceptedRequest> requests) {
  for (AcceptedRequest& r : requests) {
    RequestRecord& record = requests_[r.id];
    record.sink = std::move(r.sink);
    record.label = r.label;
    const auto n_prompt = static_cast<int32_t>(r.prompt_ids.size());
    for (int32_t i = 0; i < r.sampling->n; ++i) {
      const kv::SeqId seq = next_seq_id_++;
      SequenceState state(r.id, i, r.sampling, r.seeds[static_cast<size_t>(i)], r.prompt_ids, tokenizer_,
                          outputs_->eos_ids(), scheduler_->max_seq_tokens() - n_prompt);
      // Prompt logprobs are the prompt's, computed once: by sample 0, which reads no cached prefix.
      const bool prompt_logits = i == 0 && r.sampling->prompt_logprobs.has_value();
      if (prompt_logits) {
        state.prompt_logprobs = std::make_unique<PromptLogprobs>(r.prompt_ids, *r.sampling->prompt_logprobs);
      }
      if (r.grammar) state.matcher = grammar_compiler_->make_matcher(r.grammar);
      if (r.grammar && r.reasoning_end >= 0) {
        state.matcher = std::make_unique<ReasoningGatedMatcher>(std::move(state.matcher), r.reasoning_end,
                                                                outputs_->eos_ids(), outputs_->n_vocab());
      }
      if (!r.bad_words.empty()) {  // outermost: the bans cover the reasoning too, as vLLM's
        state.matcher = std::make_unique<BadWordsMatcher>(std::move(state.matcher), r.bad_words, outputs_->n_vocab());
      }
      outputs_->add(seq, std::move(state));
      if (r.images) runner_->set_images(seq, r.images);
      seq_owner_[seq] = r.id;
      record.live.push_back(seq);
      const Status added = scheduler_->add_request(
          sched::RequestParams{seq, r.prompt_ids, r.sampling->max_tokens.value_or(0), r.cache_salt, prompt_logits});
      if (!added.is_ok()) {
        end_sequence(seq, FinishReason::kError, added.message());
        continue;
      }
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_.n_prompt_tokens_total += n_prompt;
    }
  }
}

void EngineImpl::apply_aborts(const std::vector<RequestId>& ids, FinishReason reason, const std::string& message) {
  for (RequestId id : ids) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;  // finished already: the race with completion is normal
    const std::vector<kv::SeqId> live = it->second.live;
    for (kv::SeqId seq : live) end_sequence(seq, reason, message);
  }
}

void EngineImpl::end_sequence(kv::SeqId seq, FinishReason reason, const std::string& message) {
  SequenceState* s = outputs_->find(seq);
  if (s == nullptr) return;
  if (scheduler_->find(seq) != nullptr) {
    const Status st = scheduler_->abort(seq);
    if (!st.is_ok()) log_error("engine: aborting sequence {}: {}", seq, st.to_string());
  }
  if (reason == FinishReason::kError) {
    log_error("engine: request {} sample {} failed: {}", s->request_id, s->sample_index, message);
  }
  TokenEvent final_event = outputs_->final_event(*s, reason, message);
  if (scheduler_->find(seq) != nullptr) {
    // In a plan in flight: the scheduler frees its KV at that plan's update; the final event waits
    // for it. Nothing more is sampled or emitted for the sequence meanwhile (released here).
    deferred_finals_.push_back(DeferredFinal{seq, seq_owner_.at(seq), std::move(final_event)});
  } else {
    queue_event(seq, std::move(final_event));
  }
  release_sequence(seq, reason);
}

void EngineImpl::queue_released_finals() {
  std::erase_if(deferred_finals_, [&](DeferredFinal& d) {
    if (scheduler_->find(d.seq) != nullptr) return false;
    pending_events_.emplace_back(d.owner, std::move(d.event));
    return true;
  });
}

void EngineImpl::release_sequence(kv::SeqId seq, FinishReason reason) {
  auto owner = seq_owner_.find(seq);
  if (owner == seq_owner_.end()) return;
  RequestRecord& record = requests_.at(owner->second);
  std::erase(record.live, seq);
  if (record.live.empty()) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    (reason == FinishReason::kAbort ? stats_.n_requests_aborted : stats_.n_requests_finished) += 1;
  }
  seq_owner_.erase(owner);
  outputs_->erase(seq);
  runner_->drop(seq);
  runner_->forget_images(seq);
}

void EngineImpl::queue_event(kv::SeqId seq, TokenEvent event) {
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.n_generated_tokens_total += static_cast<int64_t>(event.token_ids.size());
  }
  pending_events_.emplace_back(seq_owner_.at(seq), std::move(event));
}

void EngineImpl::flush_events() {
  std::vector<std::pair<RequestId, TokenEvent>> events;
  events.swap(pending_events_);
  for (const auto& [id, event] : events) {
    auto it = requests_.find(id);
    if (it == requests_.end() || !it->second.sink) continue;
    try {
      it->second.sink(event);
    } catch (const std::exception& e) {  // a throwing sink must not take the engine down
      log_error("engine: the event sink of request {} threw: {}", id, e.what());
    }
  }
  for (const auto& [id, event] : events) {
    auto it = requests_.find(id);
    if (it != requests_.end() && it->second.live.empty()) requests_.erase(it);
  }
}

Status EngineImpl::check_integrity() const {
  DI_RETURN_IF_ERROR(scheduler_->check_integrity());
  for (kv::SeqId id : scheduler_->running()) {
    // Aborted while in flight: the runner forgot its table at the final event, the scheduler frees
    // the blocks at the plan's update.
    if (scheduler_->find(id)->pending_finish != sched::FinishReason::kNone) continue;
    const auto mine = runner_->block_table(id);
    const auto truth = scheduler_->block_table(id);
    if (!std::equal(mine.begin(), mine.end(), truth.begin(), truth.end())) {
      return internal_error("runner block table of sequence {} ({} blocks) differs from the manager's ({} blocks)",
                            id, mine.size(), truth.size());
    }
  }
  const size_t n_sched = scheduler_->running().size() + scheduler_->waiting().size();
  if (!plan_in_flight_ && outputs_->size() != n_sched) {
    return internal_error("{} sequences have output state but the scheduler knows {}", outputs_->size(), n_sched);
  }
  return Status::ok();
}

void EngineImpl::record_step(const sched::BatchPlan* plan) {
  const kv::Manager& kv = scheduler_->kv();
  DebugSnapshot d;
  if (debug_.check_integrity_every_step) d.integrity = check_integrity();
  for (const auto& [id, record] : requests_) d.n_live_requests += record.live.empty() ? 0 : 1;
  d.n_live_sequences = scheduler_->n_running() + scheduler_->n_waiting();
  d.n_kv_seqs = kv.n_seqs();
  d.n_runner_tables = runner_->n_tables();
  d.n_blocks = kv.config().n_blocks;
  d.n_free_blocks = kv.n_free_blocks();
  d.n_state_slots = kv.config().n_state_slots;
  d.n_free_state_slots = kv.n_free_state_slots();
  for (kv::SnapshotId i = 0; i < kv.snapshot_pool().n_slots(); ++i) {
    d.n_snapshot_pins += kv.snapshot_pool().n_pins(i);
    d.n_pending_snapshots += kv.snapshot_pool().state(i) == kv::SnapshotPool::SlotState::kPending ? 1 : 0;
  }
  d.n_tokens_prefix_hit = scheduler_->stats().n_tokens_prefix_hit;
  d.n_tokens_replayed = scheduler_->stats().n_tokens_replayed;
  d.n_snapshot_restores = scheduler_->stats().n_snapshot_restores;
  std::lock_guard<std::mutex> lock(stats_mu_);
  if (!d.integrity.is_ok() && plan != nullptr) {
    log_error("engine integrity check failed after step {}: {}\n{}", plan->step_id, d.integrity.to_string(),
              sched::describe(*plan));
  }
  d.n_integrity_checks = debug_state_.n_integrity_checks + (debug_.check_integrity_every_step ? 1 : 0);
  if (!debug_state_.integrity.is_ok()) d.integrity = debug_state_.integrity;  // keep the first failure
  d.n_idle_memory_releases = debug_state_.n_idle_memory_releases;
  debug_state_ = d;
  stats_.n_running = scheduler_->n_running();
  stats_.n_waiting = scheduler_->n_waiting();
  stats_.n_preemptions = scheduler_->stats().n_preemptions;
  EngineStats::StepTimes& t = stats_.step_times;
  t.schedule_s += step_times_.schedule_s, t.prepare_s += step_times_.prepare_s, t.forward_s += step_times_.forward_s;
  t.sample_s += step_times_.sample_s, t.update_s += step_times_.update_s, t.emit_s += step_times_.emit_s;
  step_times_ = {};
  stats_.kv_usage = d.n_blocks > 0 ? 1.0 - static_cast<double>(d.n_free_blocks) / d.n_blocks : 0.0;
}

}  // namespace deepinfer::engine
