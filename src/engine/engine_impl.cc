// EngineImpl construction, the caller-facing methods (submit, abort, stats, shutdown) and the
// loop thread's outer loop. The step itself is in engine_step.cc, loop-thread request handling in
// engine_requests.cc, batch generate in engine_generate.cc.
#include "engine/engine_impl.h"

#include <chrono>
#include <cstdlib>

#include "base/file.h"
#include "base/heap.h"
#include "base/log.h"
#include "deepinfer/model.h"
#include "engine/request_intake.h"

namespace deepinfer {

Result<std::unique_ptr<Engine>> Engine::open(const EngineOptions& options) {
  return engine::open_engine(options, engine::DebugOptions{});
}

namespace engine {
namespace {

// How long the loop stays idle before it gives freed heap memory back (run_loop).
constexpr std::chrono::milliseconds kHeapReleaseAfter{200};

// Loaded tokenizers are immutable and shareable: engines opened in one process (tests, several
// LLM objects) reuse one per file instead of parsing a 4 MB tokenizer.json each time.
Result<std::shared_ptr<const Tokenizer>> load_tokenizer(const EngineOptions& options, const std::string& dir) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const Tokenizer>> cache;
  std::string path = options.tokenizer;
  if (path.empty() && file_exists(dir + "/tokenizer.json")) path = dir + "/tokenizer.json";
  const char* env = std::getenv("DEEPINFER_TOKENIZER");
  const std::string key = !path.empty() ? path : std::string("<default>") + (env != nullptr ? env : "");
  std::lock_guard<std::mutex> lock(mu);
  if (auto cached = cache[key].lock()) return cached;
  auto tok = path.empty() ? Tokenizer::load_default() : Tokenizer::load(path);
  if (tok.is_ok()) cache[key] = *tok;
  return tok;
}

uint64_t model_fingerprint(const LoadedModel& m, const EngineOptions& options) {
  return cache_salt_hash(loader::model_config_to_json(m.config) + "|" + m.dir + "|" + options.numerics);
}

}  // namespace

Result<std::unique_ptr<Engine>> open_engine(const EngineOptions& options, const DebugOptions& debug) {
  DI_ASSIGN_OR_RETURN(std::unique_ptr<EngineImpl> impl, EngineImpl::create(options, debug));
  return std::unique_ptr<Engine>(std::move(impl));
}

DebugSnapshot debug_snapshot(const Engine& engine) {
  return static_cast<const EngineImpl&>(engine).debug_snapshot();
}

Result<std::unique_ptr<EngineImpl>> EngineImpl::create(const EngineOptions& options, const DebugOptions& debug) {
  DI_RETURN_IF_ERROR(options.validate());
  if (LogLevel level; !options.log_level.empty() && parse_log_level(options.log_level, &level)) set_log_level(level);
  DI_ASSIGN_OR_RETURN(const std::string dir, resolve_model_dir(options.model));
  DI_ASSIGN_OR_RETURN(const model::Numerics numerics, parse_numerics(options.numerics));
  LoadOptions load{numerics, options.device};
  // V4.1 CED prefill truncation (DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE: compact | none = exact).
  load.prefill_mode = options.yoco_prefill_mode == "compact" ? model::PrefillMode::kCompact : model::PrefillMode::kExact;
  load.keep_tokens = options.yoco_keep_tokens;
  DI_ASSIGN_OR_RETURN(std::unique_ptr<LoadedModel> model, load_model(dir, load));
  return create(options, debug, std::move(model));
}

Result<std::unique_ptr<EngineImpl>> EngineImpl::create(const EngineOptions& options, const DebugOptions& debug,
                                                       std::unique_ptr<LoadedModel> model) {
  DI_RETURN_IF_ERROR(options.validate());
  DI_CHECK(model != nullptr && model->model != nullptr, "EngineImpl::create without a model");
  if (LogLevel level; !options.log_level.empty() && parse_log_level(options.log_level, &level)) set_log_level(level);
  std::unique_ptr<EngineImpl> e(new EngineImpl());
  e->options_ = options;
  if (!model->device.empty()) e->options_.device = model->device;  // "auto" resolved
  e->debug_ = debug;
  const std::string dir = model->dir;
  e->model_ = std::move(model);
  auto tok = load_tokenizer(options, dir);
  if (!tok.is_ok()) return tok.status().with_context("engine tokenizer");
  e->tokenizer_ = std::move(tok).value();
  const loader::ModelConfig& mc = e->model_->config;
  DI_ASSIGN_OR_RETURN(e->config_, make_engine_config(options, mc, e->model_->model->act_dtype(),
                                                     model_fingerprint(*e->model_, options)));
  DI_ASSIGN_OR_RETURN(sched::Scheduler s, sched::Scheduler::create(e->config_.sched, e->config_.kv));
  e->scheduler_.emplace(std::move(s));
  const auto n_vocab = static_cast<int32_t>(mc.vocab_size);
  std::vector<int32_t> eos = {static_cast<int32_t>(mc.eos_token_id)};
  DI_ASSIGN_OR_RETURN(sample::Sampler sampler, sample::Sampler::create(sample::SamplerConfig{n_vocab, eos}));
  e->sampler_.emplace(std::move(sampler));
  e->runner_ = std::make_unique<ModelRunner>(e->model_.get(), e->config_.state, e->config_.n_state_slots,
                                             e->config_.drafter);
  e->outputs_ = std::make_unique<OutputProcessor>(e->tokenizer_, eos, n_vocab);
  auto compiler = StructuredOutputCompiler::create(e->tokenizer_, n_vocab);
  if (compiler.is_ok()) {
    e->grammar_compiler_ = std::move(compiler).value();
  } else {
    log_debug("structured outputs unavailable: {}", compiler.status().message());
  }
  e->limits_ = IntakeLimits{n_vocab, e->config_.max_model_len, options.seed, {}};
  e->limits_.image_token_id = static_cast<int32_t>(mc.image_token_id);
  e->limits_.image_encoder = e->debug_.image_encoder ? e->debug_.image_encoder.get() : e->model_->image_encoder.get();
  const model::ModelOptions& mo = e->model_->model->options();
  if (mc.family == loader::ModelFamily::kV41 && mo.prefill_mode == model::PrefillMode::kCompact) {
    // The decoder layers skip a prompt's early rows: they have no logits to report.
    e->limits_.no_prompt_logprobs = fmt::format(
        "V4.1's compact prefill (yoco_prefill_mode = compact) runs the decoder layers on a prompt's last {} "
        "rows only; open the engine with yoco_prefill_mode = none for prompt logprobs", mo.keep_tokens);
  }
  e->record_step(nullptr);
  log_info("engine: model {} ({} layers, vocab {}) on {}, {} history blocks of {} tokens, {} state slots, "
           "max_model_len {}", dir, mc.num_hidden_layers, n_vocab, e->options_.device, e->config_.kv.n_blocks,
           e->config_.kv.block_tokens, e->config_.n_state_slots, e->config_.max_model_len);
  e->loop_ = std::thread([raw = e.get()] { raw->run_loop(); });
  return e;
}

EngineImpl::~EngineImpl() { shutdown(/*drain=*/false); }

std::string EngineImpl::model_family() const {
  return model_->config.family == loader::ModelFamily::kV41 ? "deepseek_v41" : "deepseek_v4";
}

Result<RequestId> EngineImpl::submit(Request request, EventSink sink) {
  const RequestId id = next_request_id_.fetch_add(1);
  auto accepted = accept_request(std::move(request), id, std::move(sink), *tokenizer_, limits_,
                                 grammar_compiler_.get());
  if (!accepted.is_ok()) return accepted.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) return failed_precondition("engine is shut down; request not accepted");
    inbox_.push_back(std::move(accepted).value());
  }
  cv_.notify_one();
  return id;
}

void EngineImpl::abort(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    abort_inbox_.push_back(id);
  }
  cv_.notify_one();
}

EngineStats EngineImpl::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

DebugSnapshot EngineImpl::debug_snapshot() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return debug_state_;
}

void EngineImpl::shutdown(bool drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    stop_ = true;
    if (!drain) abort_all_ = true;
  }
  cv_.notify_one();
  if (loop_.joinable() && loop_.get_id() != std::this_thread::get_id()) loop_.join();
}

void EngineImpl::run_loop() {
  for (;;) {
    std::vector<AcceptedRequest> arrivals;
    std::vector<RequestId> aborts;
    bool stopping = false, abort_all = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // A step planned ahead past the last request's end (a stop the host saw only after
      // queuing it) is still taken in before the loop idles: its device work is done, its rows
      // sample nothing, and the step is counted as every other (it stayed in flight until the
      // next arrival before).
      if (!scheduler_->has_unfinished() && !launched_) {
        const auto woken = [&] { return stop_ || !inbox_.empty() || !abort_inbox_.empty(); };
        // Idle for kHeapReleaseAfter after a busy spell: the host memory the steps used (the CPU
        // backend's workspace, what the loop freed into the C library's arenas) goes back to the
        // OS, so that a burst does not leave its high-water mark resident. Not between
        // back-to-back requests: the next step would fault the same pages in again.
        if (heap_used_since_release_ && !cv_.wait_for(lock, kHeapReleaseAfter, woken)) {
          lock.unlock();
          model_->ops->release_workspace_memory();
          release_free_heap_memory();
          {
            std::lock_guard<std::mutex> stats_lock(stats_mu_);
            ++debug_state_.n_idle_memory_releases;
          }
          lock.lock();
          heap_used_since_release_ = false;
        }
        cv_.wait(lock, woken);
      }
      arrivals.swap(inbox_);
      aborts.swap(abort_inbox_);
      stopping = stop_;
      abort_all = abort_all_;
    }
    admit(std::move(arrivals));
    if (abort_all) {
      for (const auto& [id, record] : requests_) aborts.push_back(id);
    }
    apply_aborts(aborts, FinishReason::kAbort, "");
    if (!pending_events_.empty()) {
      record_step(nullptr);
      flush_events();
    }
    if (stopping && !scheduler_->has_unfinished() && !launched_) return;
    if (scheduler_->has_unfinished() || launched_) {
      heap_used_since_release_ = true;
      try {
        step();
      } catch (const std::exception& e) {
        // An exception is a bug below the engine; the process survives, the step's requests fail.
        recover_step(internal_error("exception in the step loop: {}", e.what()));
      }
    }
  }
}

}  // namespace engine
}  // namespace deepinfer
