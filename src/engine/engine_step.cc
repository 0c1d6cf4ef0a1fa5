// The engine step (architecture.md §1.3.2): schedule → prepare the batch (runner) → forward →
// sample (+ stop checks) → scheduler update → emit. step() reads top to bottom as that list;
// sampling and the fatal-error path are the helpers below it.
#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>
#include <thread>

#include "base/log.h"
#include "engine/engine_impl.h"

namespace deepinfer::engine {
namespace {

// Seconds since the previous call (or construction): the step's phase times.
class Lap {
 public:
  double operator()() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace

void EngineImpl::step() {
  Lap lap;
  if (!launched_) {
    plan_ = scheduler_->schedule();                                        // 1. schedule
    step_times_.schedule_s += lap();
    if (plan_.empty()) {
      // Work exists but nothing fits this step (should not happen: a lone request always fits).
      log_debug("engine: empty plan with {} waiting", scheduler_->n_waiting());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return;
    }
    plan_in_flight_ = true;
    if (debug_.on_plan) debug_.on_plan(plan_);
    if (Status st = launch(plan_, &launch_slots_[launched_slot_]); !st.is_ok()) return fail_plan(st);  // 2-3.
    launched_ = true;
  }
  // plan_ is queued on the device. Asynchronous scheduling: plan its successor and queue it behind
  // it before waiting for its tokens, so the device never waits for the host's part of a step.
  Launched& cur = launch_slots_[launched_slot_];
  Launched& next = launch_slots_[launched_slot_ ^ 1];
  sched::BatchPlan& ahead = ahead_plan_;  // a member: recover_step() fails it too
  ahead = {};
  Status ahead_status;
  bool sample_after = false;  // the plan ahead's sampling waits for step n's tokens
  if (options_.async_scheduling && can_plan_ahead(plan_)) {
    lap();
    ahead = scheduler_->schedule_ahead(plan_);
    step_times_.schedule_s += lap();
    if (!ahead.empty()) {
      if (debug_.on_plan) debug_.on_plan(ahead);
      // Should a row of it need the host sampler after all, launch() copied its logits back: the
      // host samples them after step n's update, from complete histories, and nothing is planned
      // ahead of it (can_plan_ahead). A grammar row decoding step n's token has its mask only
      // once the host has taken that token in: the forward goes ahead, the sampling after.
      sample_after = sampling_waits_for_tokens(ahead);
      ahead_status = sample_after ? launch_forward(ahead, &next) : launch(ahead, &next);
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.n_steps_ahead;
    }
  }
  finish_step(cur, !ahead.empty());                                        // 4-6.
  launched_ = false;
  if (ahead.empty()) return;
  plan_ = std::exchange(ahead, {});
  plan_in_flight_ = true;
  launched_slot_ ^= 1;
  if (ahead_status.is_ok() && sample_after) ahead_status = launch_sampling(plan_, &next, /*host_has_previous=*/true);
  if (!ahead_status.is_ok()) return fail_plan(ahead_status.with_context("step planned ahead"));
  launched_ = true;
}

Status EngineImpl::launch(const sched::BatchPlan& plan, Launched* l) {
  DI_RETURN_IF_ERROR(launch_forward(plan, l));
  return launch_sampling(plan, l, /*host_has_previous=*/false);
}

Status EngineImpl::launch_forward(const sched::BatchPlan& plan, Launched* l) {
  Lap lap;
  step_launched_ = std::chrono::steady_clock::now();
  auto batch = runner_->prepare(plan, &l->logit_row);                      // 2. plan → ForwardBatch
  step_times_.prepare_s += lap();
  if (!batch.is_ok()) return batch.status();
  l->token_from.assign(plan.seqs.size(), -1);
  l->token_source = batch->token_source;
  if (!batch->token_from.empty()) {
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      l->token_from[i] = batch->token_from[static_cast<size_t>(batch->seqs[i].token_begin)];
    }
  }
  auto result = static_cast<int64_t>(plan.step_id) == debug_.fail_forward_at_step
                    ? Result<model::ForwardResult>(internal_error("injected forward failure"))
                    : runner_->forward(*batch);                                    // 3. forward
  if (!result.is_ok()) return result.status().with_context("forward");
  l->result = std::move(*result);
  DI_RETURN_IF_ERROR(queue_prompt_logprobs(plan, l));
  // The snapshots end the plan's step on the device: a step planned ahead, queued next, moves on
  // the same state slots.
  runner_->take_snapshots(plan);
  step_times_.forward_s += lap();
  return Status::ok();
}

Status EngineImpl::launch_sampling(const sched::BatchPlan& plan, Launched* l, bool host_has_previous) {
  Lap lap;
  // Sampled where the logits are unless a row needs the host sampler (only ids and logprobs come
  // back); the device path's inputs are built while the device runs the step.
  l->on_device = device_sampled(plan, *l, host_has_previous, &l->device_plan);
  // A step planned ahead whose every sampled row ended before it (a stop in the step before)
  // samples nothing for anyone: its logits stay where they are.
  bool live = false;
  for (size_t i = 0; i < plan.seqs.size() && !live; ++i) {
    live = l->logit_row[i] >= 0 && outputs_->find(plan.seqs[i].seq_id) != nullptr;
  }
  // A step whose rows to sample all ended before it needed no host row either (EngineStats: all
  // of its sampled rows — none — were sampled where the logits are); a step of prompt chunks that
  // sample nothing is not a sampling step at all.
  const bool had_rows = std::any_of(l->logit_row.begin(), l->logit_row.end(), [](int32_t r) { return r >= 0; });
  l->device_sampled = l->on_device || (had_rows && !live && !debug_.host_sampling);
  l->argmax = l->on_device && std::all_of(l->device_plan.rows.begin(), l->device_plan.rows.end(),
                                          [](const ops::Ops::SampleRow& r) { return r.temperature == 0.0f; });
  const Status queued = l->on_device ? runner_->launch_sampling(l->result.logits, l->device_plan, &l->ticket)
                        : live       ? runner_->logits_to_host(&l->result)
                                     : Status::ok();
  step_times_.forward_s += lap();
  return queued.with_context("forward");
}

bool EngineImpl::sampling_waits_for_tokens(const sched::BatchPlan& plan) const {
  for (const sched::SeqPlan& sp : plan.seqs) {
    if (!sp.token_from_device) continue;
    const SequenceState* s = outputs_->find(sp.seq_id);
    if (s != nullptr && s->matcher) return true;
  }
  return false;
}

bool EngineImpl::can_plan_ahead(const sched::BatchPlan& plan) const {
  const Launched& l = launch_slots_[launched_slot_];
  if (!model_->model->takes_device_tokens()) return false;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    // A prompt chunk that samples nothing: its next chunk's ids are the prompt's. Else, if the host
    // samples the row, its token is known only once step n is back.
    if (l.logit_row[i] >= 0 && !l.on_device) return false;
  }
  // A grammar's mask follows the tokens, which the host has not seen yet: such a row's sampling
  // waits for them (sampling_waits_for_tokens), its forward does not; the penalties count the
  // unseen token on the device (AdjustRow::pending).
  return true;
}

void EngineImpl::finish_step(Launched& l, bool ahead_in_flight) {
  Lap lap;
  Status sampled = l.on_device ? runner_->collect_sampling(l.ticket, &device_out_) : Status::ok();
  if (sampled.is_ok()) sampled = take_prompt_logprobs(l);
  step_times_.forward_s += lap();
  if (!sampled.is_ok()) return fail_plan(sampled.with_context("forward"));
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.n_steps;
    if (l.device_sampled) ++stats_.n_device_sampled_steps;
    if (l.argmax) ++stats_.n_argmax_steps;
  }
  std::vector<sched::SeqOutput> outputs =
      sample_plan(plan_, l.result, l.logit_row, l.on_device ? &device_out_ : nullptr);  // 4. sample
  step_times_.sample_s += lap();
  if (runner_->drafter() != Drafter::kNone) {  // 4b. rewind rejected drafts, draft the next ones
    const Status spec = speculate(plan_, outputs);
    step_times_.forward_s += lap();
    if (!spec.is_ok()) return fail_plan(spec.with_context("speculative decoding"));
    step_cost_.observe(plan_.n_tokens_scheduled,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - step_launched_).count());
  }
  auto events = scheduler_->update(plan_, outputs);                        // 5. update
  step_times_.update_s += lap();
  if (!events.is_ok()) return fail_plan(events.status().with_context("scheduler update"));
  // Rejected drafts' blocks went back to the pool in update(); drafts for the next step (a
  // request that update() ended has none to take).
  for (const sched::SeqPlan& sp : plan_.seqs) {
    if (sp.n_draft_tokens > 0 && scheduler_->find(sp.seq_id) != nullptr) {
      runner_->rollback_table(sp.seq_id, scheduler_->block_table(sp.seq_id).size());
    }
  }
  for (auto& [seq, drafts] : next_drafts_) (void)scheduler_->set_draft_tokens(seq, drafts);
  next_drafts_.clear();
  queue_released_finals();  // sequences ended while this plan held them: their KV is free now
  plan_in_flight_ = ahead_in_flight;
  emit_step_events(*events);                                               // 6. emit
}

bool EngineImpl::device_sampled(const sched::BatchPlan& plan, const Launched& l, bool host_has_previous,
                                DeviceSamplePlan* device) {
  const std::vector<int32_t>& logit_row = l.logit_row;
  device->clear();
  if (debug_.host_sampling) return false;
  bool any = false;
  size_t n_rows = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    if (logit_row[i] < 0) continue;
    const auto row = static_cast<size_t>(logit_row[i]);
    const int32_t k = plan.seqs[i].n_draft_tokens;
    n_rows = std::max(n_rows, row + static_cast<size_t>(k) + 1);
    SequenceState* s = outputs_->find(plan.seqs[i].seq_id);
    if (s == nullptr) continue;  // ended while in flight: its output is dropped whatever it is (a greedy row)
    if (!sample::is_device_sampleable(*s->params)) return false;
    if (k > 0) {
      // Drafts: each of the k + 1 rows sampled as if the drafts before it were accepted (only
      // those rows are read: verify_drafts) — unless a row's input follows the accepted tokens
      // beyond a count (penalties, a grammar's mask), or the row is sampled and verified by
      // rejection sampling against the drafter's law (kept on the host): then the host verifies
      // row after row.
      if (sample::penalties_active(*s->params) || s->matcher) return false;
      if (verifies_by_rejection(*s->params)) return false;
      for (int32_t j = 0; j <= k; ++j) {
        Result<sample::RowInput> in = outputs_->row_input(
            *s, int64_t{plan.seqs[i].first_position} + plan.seqs[i].n_tokens_scheduled - k + j);
        if (!in.is_ok() || !sampler_->check_row(*in, i).is_ok()) return false;
        in->n_generated += j;
        device->add(row + static_cast<size_t>(j), *in, sampler_->config(), -1);
      }
      any = true;
      continue;
    }
    // The sampled token occupies the position after the step's last token (the noise key).
    Result<sample::RowInput> in =
        outputs_->row_input(*s, plan.seqs[i].first_position + plan.seqs[i].n_tokens_scheduled);
    if (!in.is_ok() || !sampler_->check_row(*in, i).is_ok()) return false;
    // Planned ahead: the token of the step before counts too (min_tokens; the penalties count it
    // where it is: AdjustRow::pending), unless the host has taken it in already.
    int32_t pending = -1;
    if (plan.seqs[i].token_from_device && !host_has_previous) {
      ++in->n_generated;
      pending = l.token_from.at(i);
      device->pending_ids = l.token_source;
    }
    device->add(row, *in, sampler_->config(), pending);
    any = true;
  }
  device->finish(n_rows);
  return any;
}

std::vector<sched::SeqOutput> EngineImpl::sample_plan(const sched::BatchPlan& plan,
                                                      const model::ForwardResult& result,
                                                      const std::vector<int32_t>& logit_row,
                                                      const ModelRunner::DeviceSampled* device) {
  const size_t n = plan.seqs.size();
  std::vector<sched::SeqOutput> outputs(n);
  std::vector<sample::RowOutput> sampled(n);
  std::vector<Status> status(n);
  // Host rows: their inputs gathered in plan order (grammar masks are filled per sequence), then
  // sampled together across threads (Sampler::sample_rows; a row's token depends on its inputs
  // only), then accepted in plan order below.
  std::vector<size_t> host;
  std::vector<sample::RowInput> inputs;
  std::vector<const float*> rows;
  for (size_t i = 0; i < n; ++i) {
    const sched::SeqPlan& sp = plan.seqs[i];
    outputs[i].seq_id = sp.seq_id;
    if (logit_row[i] < 0) continue;
    SequenceState* s = outputs_->find(sp.seq_id);
    if (s == nullptr) continue;  // ended while in flight: the scheduler drops its output
    if (sp.n_draft_tokens > 0) continue;  // verified on its own, after the batch below (engine_spec.cc)
    if (device != nullptr) {  // the device's choice (logits not read)
      sampled[i] = device->row_output(static_cast<size_t>(logit_row[i]), s->params->logprobs);
      continue;
    }
    // The sampled token occupies the position after the step's last token (the noise key).
    Result<sample::RowInput> row = outputs_->row_input(*s, sp.first_position + sp.n_tokens_scheduled);
    status[i] = row.is_ok() ? sampler_->check_row(*row, i) : row.status();
    if (!status[i].is_ok()) continue;
    host.push_back(i);
    inputs.push_back(*row);
    rows.push_back(result.logits.as<const float>() + static_cast<int64_t>(logit_row[i]) * result.logits.stride[0]);
  }
  std::vector<sample::RowOutput> host_out(host.size());
  sampler_->sample_rows(rows, inputs, host_out);
  for (size_t k = 0; k < host.size(); ++k) sampled[host[k]] = std::move(host_out[k]);
  for (size_t i = 0; i < n; ++i) {
    if (logit_row[i] < 0) continue;
    SequenceState* s = outputs_->find(plan.seqs[i].seq_id);
    if (s == nullptr) continue;
    if (plan.seqs[i].n_draft_tokens > 0) {
      Result<sched::SeqOutput> verified = verify_drafts(plan.seqs[i], result, logit_row[i], *s, device);
      if (!verified.is_ok()) {
        end_sequence(plan.seqs[i].seq_id, FinishReason::kError, verified.status().message());
        continue;
      }
      outputs[i] = std::move(*verified);
      continue;
    }
    Status ok = status[i];
    const sample::RowOutput& out = sampled[i];
    if (ok.is_ok() && out.token == sample::kNoToken) {
      ok = invalid_argument("every token is excluded (allowed_token_ids, logit_bias, grammar): nothing to sample");
    }
    Result<sched::FinishReason> finish = ok.is_ok() ? outputs_->accept_token(*s, out) : Result<sched::FinishReason>(ok);
    if (!finish.is_ok()) {
      end_sequence(plan.seqs[i].seq_id, FinishReason::kError, finish.status().message());  // deferred by the scheduler
      continue;
    }
    outputs[i].tokens.push_back(out.token);
    outputs[i].finish = *finish;
  }
  return outputs;
}

void EngineImpl::emit_step_events(const std::vector<sched::SeqEvent>& events) {
  Lap lap;
  for (const sched::SeqEvent& ev : events) {
    SequenceState* s = outputs_->find(ev.seq_id);
    if (s == nullptr) continue;
    const bool first = !s->first_event_sent;
    TokenEvent event = outputs_->take_event(*s, ev);
    if (first) {
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_.n_prefix_query_tokens += s->n_prompt;
      stats_.n_prefix_hit_tokens += ev.n_prompt_cached;
    }
    const std::optional<FinishReason> event_reason = event.finish;
    const bool done = event_reason.has_value();
    queue_event(ev.seq_id, std::move(event));
    if (done) release_sequence(ev.seq_id, *event_reason);  // the scheduler released it in update()
  }
  step_times_.emit_s += lap();  // the events' delivery (flush_events) is the sinks' time, not counted
  record_step(&plan_);
  flush_events();
}

void EngineImpl::recover_step(const Status& status) {
  // Whatever the step got to, the plans the scheduler holds in flight are plan_ (unless its update
  // ran) and then the one planned ahead, if any: fail them in that order.
  fail_plan(status);
  if (!ahead_plan_.empty()) {
    plan_ = std::exchange(ahead_plan_, {});
    plan_in_flight_ = true;
    fail_plan(status);
  }
  launched_ = false;
}

void EngineImpl::fail_plan(const Status& status) {
  log_error("engine step {} failed: {}\n{}", plan_.step_id, status.to_string(), sched::describe(plan_));
  std::vector<RequestId> affected;
  for (const sched::SeqPlan& sp : plan_.seqs) {
    auto it = seq_owner_.find(sp.seq_id);
    if (it != seq_owner_.end()) affected.push_back(it->second);
  }
  // Every sequence of the affected requests ends with kError; the in-flight ones are released by
  // the update below (the scheduler defers aborts of planned sequences to it).
  apply_aborts(affected, FinishReason::kError, fmt::format("engine step failed: {}", status.to_string()));
  if (plan_in_flight_) {
    std::vector<sched::SeqOutput> outputs;
    for (const sched::SeqPlan& sp : plan_.seqs) outputs.push_back(sched::SeqOutput{sp.seq_id, {}, {}});
    auto released = scheduler_->update(plan_, outputs);
    if (!released.is_ok()) log_error("engine: releasing failed step {}: {}", plan_.step_id, released.status().to_string());
    plan_in_flight_ = false;
    queue_released_finals();
  }
  record_step(&plan_);
  flush_events();
}

}  // namespace deepinfer::engine
