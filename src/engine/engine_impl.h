// EngineImpl: the Engine of include/deepinfer/engine.h on one background step loop. Callers'
// threads only validate requests (request_intake) and post them, or abort ids, to an inbox under
// mu_; the loop thread owns everything else — scheduler, runner, sampler, output processor — so
// none of those needs a lock. Stats and debug snapshots are copied out under stats_mu_ before a
// step's events are emitted, so a caller that saw a final event also sees its resources freed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "deepinfer/engine.h"
#include "engine/draft_budget.h"
#include "engine/engine_config.h"
#include "engine/engine_debug.h"
#include "engine/loaded_model.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/request_intake.h"
#include "sample/sampler.h"
#include "sched/scheduler.h"

namespace deepinfer::engine {

class EngineImpl final : public Engine {
 public:
  static Result<std::unique_ptr<EngineImpl>> create(const EngineOptions& options, const DebugOptions& debug);
  // On a model already loaded (the engine benchmark's synthetic device model); options.model is
  // then only its name in logs and the prefix-cache fingerprint.
  static Result<std::unique_ptr<EngineImpl>> create(const EngineOptions& options, const DebugOptions& debug,
                                                    std::unique_ptr<LoadedModel> model);
  ~EngineImpl() override;

  Result<RequestId> submit(Request request, EventSink sink) override;
  void abort(RequestId id) override;
  Result<std::vector<GenerateOutput>> generate(std::vector<Request> requests,
                                               std::function<void(size_t, size_t)> on_progress) override;
  std::shared_ptr<const Tokenizer> tokenizer() const override { return tokenizer_; }
  EngineStats stats() const override;
  const EngineOptions& options() const override { return options_; }
  std::string model_dir() const override { return model_->dir; }
  std::string model_family() const override;
  int32_t max_model_len() const override { return config_.max_model_len; }
  int64_t vocab_size() const { return model_->config.vocab_size; }  // the model's (not the tokenizer's)
  void shutdown(bool drain) override;

  DebugSnapshot debug_snapshot() const;

 private:
  struct RequestRecord {
    EventSink sink;
    std::vector<kv::SeqId> live;  // sequences not finished yet
    std::string label;
  };
  struct Emission {
    EventSink* sink;
    TokenEvent event;
  };

  EngineImpl() = default;
  void run_loop();
  // The engine step: schedule → prepare → forward → sample → update → emit (engine_step.cc).
  // With asynchronous scheduling, a step whose tokens are sampled on the device stays queued
  // there (launched_) while the next one is planned ahead and queued behind it; then its tokens
  // are taken in, and the step planned ahead becomes the launched one.
  void step();
  // One step queued on the device: its logit rows, and either its device sampling (on_device:
  // `ticket`, the copy of the ids) or its logits on the host (`result`).
  struct Launched {
    std::vector<int32_t> logit_row;
    model::ForwardResult result;
    bool on_device = false;
    // Set when the sampling is launched, counted when the step is taken in (EngineStats): every
    // sampled row sampled where the logits are (none needed the host: also a step that samples
    // nothing, its rows having ended before it), and all of them greedy.
    bool device_sampled = false, argmax = false;
    DeviceSamplePlan device_plan;  // memory reused across steps
    ModelRunner::SampleTicket ticket;
    // Per plan row: where its input token lies in token_source (ForwardBatch::token_from of its
    // first token: a row decoding the token the step before sampled), else -1.
    std::vector<int32_t> token_from;
    tensor::TensorView token_source;
    // Prompt logprobs: the sequences whose prompt rows the step reduced (in the runner's row order)
    // and the copy of the results (engine_prompt_logprobs.cc).
    struct PromptRows {
      kv::SeqId seq = 0;
      int32_t first_position = 0, n = 0;
    };
    std::vector<PromptRows> prompt_rows;
    ModelRunner::PromptTicket prompt_ticket;
  };
  // prepare → forward → sampling queued (or the logits copied to the host) for `plan`.
  Status launch(const sched::BatchPlan& plan, Launched* l);
  // The two halves of launch(): the forward (prepare, forward, snapshot copies), and the sampling.
  // host_has_previous: the host has taken in the tokens the step before sampled (a step planned
  // ahead whose sampling waited for them: a grammar's mask follows them).
  Status launch_forward(const sched::BatchPlan& plan, Launched* l);
  Status launch_sampling(const sched::BatchPlan& plan, Launched* l, bool host_has_previous);
  // Prompt logprobs (engine_prompt_logprobs.cc): after the forward, queue the reduction of the
  // step's prompt rows (the next prompt token of each, from the sequence's PromptLogprobs) and
  // leave l->result.logits with the sampled rows alone; when the step is taken in, record the
  // results in the sequences (before sampling: the first token's event carries them).
  Status queue_prompt_logprobs(const sched::BatchPlan& plan, Launched* l);
  Status take_prompt_logprobs(const Launched& l);
  // Whether a step planned ahead must launch its sampling only once the host has taken in the
  // step before: a row decoding that step's token has a grammar (its mask follows the token).
  bool sampling_waits_for_tokens(const sched::BatchPlan& plan) const;
  // Takes in the launched step plan_: its tokens, stop checks, scheduler update, events.
  void finish_step(Launched& l, bool ahead_in_flight);
  // Whether plan_ (launched) may have its successor planned before its tokens are back: the model
  // reads device tokens and every row of plan_ that samples was sampled on the device.
  bool can_plan_ahead(const sched::BatchPlan& plan) const;
  Launched launch_slots_[2];  // the launched step's and the one planned ahead of it
  int launched_slot_ = 0;
  bool launched_ = false;     // launch_slots_[launched_slot_] holds plan_, not yet taken in
  sched::BatchPlan ahead_plan_;  // scheduled ahead of plan_'s update, until it becomes plan_
  // Whether every logit row of the plan is sampled whole on the model's device
  // (sample::is_device_sampleable) — unless DebugOptions::host_sampling — and there is one:
  // *device then holds each logit row's inputs (DeviceSamplePlan). A row whose sampler input
  // fails (a grammar's bitmask) sends the step to the host sampler, which reports it. device (in
  // sample_plan): what the device sampled per logit row (such steps; `result`'s logits not read).
  bool device_sampled(const sched::BatchPlan& plan, const Launched& l, bool host_has_previous,
                      DeviceSamplePlan* device);
  ModelRunner::DeviceSampled device_out_;      // what the device sampled
  std::vector<sched::SeqOutput> sample_plan(const sched::BatchPlan& plan, const model::ForwardResult& result,
                                            const std::vector<int32_t>& logit_row,
                                            const ModelRunner::DeviceSampled* device);
  // Speculative decoding (engine_spec.cc). verify_drafts: the row's k + 1 logit rows in order, each
  // with the input a step without drafts would give it (row inputs from the sequence's state,
  // accept_token after each), stopping at the first rejected draft — by the argmax rule (greedy),
  // rejection sampling against the sequence's DraftLaw or the coupled rule (spec_verification).
  // speculate: the rewind of rejected drafts and the next drafts (next_drafts_, given to the
  // scheduler after update(); their laws on the sequences).
  // device: the step's rows were sampled where the logits are (each verify row as if the drafts
  // before it were accepted: device_sampled), else the host samples them from result's logits.
  Result<sched::SeqOutput> verify_drafts(const sched::SeqPlan& sp, const model::ForwardResult& result,
                                         int32_t logit_row, SequenceState& s,
                                         const ModelRunner::DeviceSampled* device);
  Status speculate(const sched::BatchPlan& plan, const std::vector<sched::SeqOutput>& outputs);
  std::vector<std::pair<kv::SeqId, std::vector<int32_t>>> next_drafts_;
  std::vector<float> verify_probs_;  // [n_vocab] scratch: a verify row's target distribution
  // Whether a request's drafts are judged by rejection sampling against the drafter's law (kept on
  // the host, so its drafting and verification run there): sampled rows under the default rule.
  bool verifies_by_rejection(const SamplingParams& p) const {
    return options_.spec_verification == "rejection" && !p.is_greedy();
  }
  // Confidence-scheduled verification: a step's time (launch to drafts) against its tokens.
  StepCostModel step_cost_;
  std::chrono::steady_clock::time_point step_launched_;
  // Fatal step error: ends every request of the in-flight plan with kError and logs the plan.
  void fail_plan(const Status& status);
  // After an exception inside step(): fails plan_ and the plan scheduled ahead of it, if any, so
  // the scheduler holds no plan in flight and the loop can go on.
  void recover_step(const Status& status);
  void emit_step_events(const std::vector<sched::SeqEvent>& events);
  // Loop-thread intake (engine_requests.cc).
  void admit(std::vector<AcceptedRequest> requests);
  // Ends every live sequence of the given requests with `reason` (kAbort or kError).
  void apply_aborts(const std::vector<RequestId>& ids, FinishReason reason, const std::string& message);
  // Ends one sequence outside update(): scheduler abort (deferred if in flight), final event —
  // held back while a plan in flight keeps the sequence's KV (deferred_finals_), so that a caller
  // that sees the final event sees its resources freed.
  void end_sequence(kv::SeqId seq, FinishReason reason, const std::string& message);
  // Queues the held-back final events of sequences the scheduler has released (after an update).
  void queue_released_finals();
  // Forgets a sequence that has had its final event queued.
  void release_sequence(kv::SeqId seq, FinishReason reason);
  void queue_event(kv::SeqId seq, TokenEvent event);
  // Delivers queued events to the sinks (after record_step) and drops finished request records.
  void flush_events();
  // Copies stats (and the debug snapshot, running the integrity checks if asked) out for callers.
  void record_step(const sched::BatchPlan* plan);
  Status check_integrity() const;

  EngineOptions options_;
  DebugOptions debug_;
  EngineConfig config_;
  std::unique_ptr<LoadedModel> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<StructuredOutputCompiler> grammar_compiler_;
  IntakeLimits limits_;

  // Engine thread only.
  std::optional<sched::Scheduler> scheduler_;
  std::optional<sample::Sampler> sampler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<OutputProcessor> outputs_;
  std::map<RequestId, RequestRecord> requests_;  // live requests
  std::unordered_map<kv::SeqId, RequestId> seq_owner_;
  kv::SeqId next_seq_id_ = 1;
  std::vector<std::pair<RequestId, TokenEvent>> pending_events_;  // in emission order
  struct DeferredFinal {
    kv::SeqId seq;
    RequestId owner;
    TokenEvent event;
  };
  std::vector<DeferredFinal> deferred_finals_;  // ended while a plan in flight holds them
  sched::BatchPlan plan_;         // the current step's plan (a member so the fatal path can see it)
  bool plan_in_flight_ = false;   // between schedule() and a successful update()
  // A step ran since the loop last gave freed heap memory back (release_free_heap_memory).
  bool heap_used_since_release_ = false;
  // The current step's phase times (loop thread), added to stats_.step_times by record_step.
  EngineStats::StepTimes step_times_;

  // Shared with callers (mu_).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<AcceptedRequest> inbox_;
  std::vector<RequestId> abort_inbox_;
  bool accepting_ = true;
  bool stop_ = false;
  bool abort_all_ = false;
  std::atomic<RequestId> next_request_id_{1};
  std::thread loop_;

  mutable std::mutex stats_mu_;
  EngineStats stats_;
  DebugSnapshot debug_state_;
};

}  // namespace deepinfer::engine
