// run_engine_benchmark (include/deepinfer/bench.h): the engine's offline throughput end to end, as
// vLLM's benchmark_throughput measures it — `concurrency` requests of random prompt ids submitted
// at once, each generating exactly output_len tokens — on the same synthetic full-width model as
// `deepinfer bench` (or a checkpoint). Where `deepinfer bench` times the model's step alone, this
// times everything a user waits for: scheduling, the runner's batch, the forward, sampling, the
// scheduler's update, detokenising and the events; EngineStats::step_times splits a step into
// those phases, so the per-step host overhead the device waits through is a measured figure.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "deepinfer/bench.h"
#include "engine/bench_model.h"
#include "engine/engine_impl.h"
#ifdef DI_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace deepinfer {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string device_name(const std::string& device) {
#ifdef DI_HAVE_CUDA
  cudaDeviceProp prop{};
  if (device == "cuda" && cudaGetDeviceProperties(&prop, 0) == cudaSuccess) return prop.name;
#endif
  return device;
}

// One request's timeline: seconds from the row's submission to its first and last token.
struct RequestTimes {
  double first_s = -1, last_s = -1;
  int32_t n_tokens = 0;
  std::string error;  // a final event other than kLength
};

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// Submits `n` requests at once and waits for their final events. Each generates output_len tokens
// (ignore_eos), or fewer under a regex that ends (a grammar's own stop).
Result<std::vector<RequestTimes>> run_requests(engine::EngineImpl& e, const EngineBenchOptions& o, int32_t n,
                                               int32_t vocab, uint64_t seed, double* wall_s) {
  std::mt19937_64 rng(seed);
  // Ids away from both ends of the vocabulary (BOS/EOS at the bottom, the added special tokens at
  // the top; any id is valid input, this keeps the prompts ordinary text).
  const int32_t margin = std::min(1000, vocab / 4);
  std::uniform_int_distribution<int32_t> id(margin, vocab - 1 - margin);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RequestTimes> times(static_cast<size_t>(n));
  int32_t n_done = 0;
  const auto t0 = Clock::now();
  for (int32_t i = 0; i < n; ++i) {
    Request r;
    r.prompt_ids.resize(static_cast<size_t>(o.input_len));
    for (int32_t& t : r.prompt_ids) t = id(rng);
    r.sampling.temperature = static_cast<float>(o.temperature);
    r.sampling.top_p = static_cast<float>(o.top_p);
    r.sampling.top_k = o.top_k;
    r.sampling.repetition_penalty = static_cast<float>(o.repetition_penalty);
    r.sampling.frequency_penalty = static_cast<float>(o.frequency_penalty);
    if (o.logprobs >= 0) r.sampling.logprobs = o.logprobs;
    if (!o.regex.empty()) r.structured_output = StructuredOutput{StructuredOutput::Kind::kRegex, o.regex};
    r.sampling.max_tokens = o.output_len;
    r.sampling.ignore_eos = true;
    r.sampling.seed = seed + static_cast<uint64_t>(i);
    r.request_label = "bench-" + std::to_string(i);
    auto sink = [&, i](const TokenEvent& ev) {
      const double at = std::chrono::duration<double>(Clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(mu);
      RequestTimes& t = times[static_cast<size_t>(i)];
      if (!ev.token_ids.empty()) {
        if (t.first_s < 0) t.first_s = at;
        t.last_s = at;
        t.n_tokens += static_cast<int32_t>(ev.token_ids.size());
      }
      if (ev.finish.has_value()) {
        const bool grammar_end = !o.regex.empty() && *ev.finish == FinishReason::kStop;
        if (*ev.finish != FinishReason::kLength && !grammar_end) {
          t.error = std::string(finish_reason_name(*ev.finish)) + (ev.error.empty() ? "" : ": " + ev.error);
        }
        ++n_done;
        cv.notify_all();
      }
    };
    auto id_or = e.submit(std::move(r), sink);
    if (!id_or.is_ok()) {
      // The submitted ones still run to their end: wait for them before `times` goes away.
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return n_done == i; });
      return id_or.status().with_context(fmt::format("bench-engine request {}", i));
    }
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return n_done == n; });
  *wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int32_t i = 0; i < n; ++i) {
    const RequestTimes& t = times[static_cast<size_t>(i)];
    if (!t.error.empty()) return internal_error("bench-engine request {} ended with {}", i, t.error);
    // Exactly output_len tokens; under a regex 1 to output_len (it may end the request).
    const bool full = t.n_tokens == o.output_len;
    const bool cut = !o.regex.empty() && t.n_tokens >= 1 && t.n_tokens < o.output_len;
    if (!full && !cut) {
      return internal_error("bench-engine request {} generated {} tokens, not {}", i, t.n_tokens, o.output_len);
    }
  }
  return times;
}

// One row: a warm-up run (CUDA graphs recorded for the row's shapes, other prompts so that the
// prefix cache does not serve the timed run), then the timed run with the engine's step phases.
Result<json> run_row(engine::EngineImpl& e, const EngineBenchOptions& o, int32_t concurrency, int32_t vocab,
                     uint64_t seed) {
  double wall = 0;
  DI_RETURN_IF_ERROR(run_requests(e, o, concurrency, vocab, seed, &wall).status());
  const EngineStats before = e.stats();
  DI_ASSIGN_OR_RETURN(const std::vector<RequestTimes> times,
                      run_requests(e, o, concurrency, vocab, seed + 1'000'003, &wall));
  const EngineStats after = e.stats();
  std::vector<double> ttft, tpot;
  for (const RequestTimes& t : times) {
    ttft.push_back(t.first_s);
    if (t.n_tokens > 1) tpot.push_back((t.last_s - t.first_s) / (t.n_tokens - 1));
  }
  const double steps = static_cast<double>(after.n_steps - before.n_steps);
  const EngineStats::StepTimes& a = after.step_times;
  const EngineStats::StepTimes& b = before.step_times;
  const double total = a.total_s() - b.total_s(), forward = a.forward_s - b.forward_s;
  auto per_step_ms = [&](double s) { return steps > 0 ? s / steps * 1e3 : 0.0; };
  double out_tokens = 0;  // concurrency x output_len, unless a regex ended some requests early
  for (const RequestTimes& t : times) out_tokens += t.n_tokens;
  json row = {{"concurrency", concurrency},
              {"input_len", o.input_len},
              {"output_len", o.output_len},
              {"temperature", o.temperature},
              {"top_p", o.top_p},
              {"top_k", o.top_k},
              {"repetition_penalty", o.repetition_penalty},
              {"frequency_penalty", o.frequency_penalty},
              {"logprobs", o.logprobs},
              {"regex", o.regex},
              {"host_sampling", o.host_sampling},
              {"async_scheduling", o.async_scheduling},
              {"nextn_decode", o.nextn_decode},
              {"mtp_varlen", o.mtp_varlen},
              {"spec_verification", o.spec_verification},
              {"wall_s", wall},
              {"output_tokens_per_s", out_tokens / wall},
              {"output_tokens", out_tokens},
              {"total_tokens_per_s", (out_tokens + static_cast<double>(concurrency) * o.input_len) / wall},
              {"ttft_ms_mean", mean(ttft) * 1e3},
              {"ttft_ms_p50", percentile(ttft, 0.5) * 1e3},
              {"ttft_ms_max", percentile(ttft, 1.0) * 1e3},
              {"tpot_ms_mean", mean(tpot) * 1e3},
              {"tpot_ms_p50", percentile(tpot, 0.5) * 1e3},
              {"steps", after.n_steps - before.n_steps},
              {"argmax_steps", after.n_argmax_steps - before.n_argmax_steps},
              {"device_sampled_steps", after.n_device_sampled_steps - before.n_device_sampled_steps},
              {"steps_ahead", after.n_steps_ahead - before.n_steps_ahead},
              // Speculative decoding: rows that verified drafts, drafts verified and accepted.
              {"draft_rows", after.n_draft_rows - before.n_draft_rows},
              {"draft_tokens", after.n_draft_tokens - before.n_draft_tokens},
              {"accepted_draft_tokens", after.n_accepted_draft_tokens - before.n_accepted_draft_tokens},
              {"step_ms", per_step_ms(total)},
              // The engine's own per-step time (all but the forward), and its share of the steps.
              {"host_ms_per_step", per_step_ms(total - forward)},
              {"host_share", total > 0 ? (total - forward) / total : 0.0},
              // The rest of the wall time: the loop thread between steps (intake, waiting).
              {"step_time_share", wall > 0 ? total / wall : 0.0}};
  row["phase_ms_per_step"] = {{"schedule", per_step_ms(a.schedule_s - b.schedule_s)},
                              {"prepare", per_step_ms(a.prepare_s - b.prepare_s)},
                              {"forward", per_step_ms(forward)},
                              {"sample", per_step_ms(a.sample_s - b.sample_s)},
                              {"update", per_step_ms(a.update_s - b.update_s)},
                              {"emit", per_step_ms(a.emit_s - b.emit_s)}};
  return row;
}

Status check_options(const EngineBenchOptions& o) {
  if (o.concurrency.empty()) return invalid_argument("bench-engine: no --concurrency given");
  for (int32_t c : o.concurrency) {
    if (c < 1) return invalid_argument("bench-engine: --concurrency {} (must be >= 1)", c);
  }
  if (o.input_len < 1) return invalid_argument("bench-engine: --input-len {} (must be >= 1)", o.input_len);
  if (o.output_len < 1) return invalid_argument("bench-engine: --output-len {} (must be >= 1)", o.output_len);
  if (o.temperature < 0) return invalid_argument("bench-engine: --temperature {} (must be >= 0)", o.temperature);
  if (!(o.top_p > 0 && o.top_p <= 1)) return invalid_argument("bench-engine: --top-p {} (must be in (0, 1])", o.top_p);
  if (!(o.repetition_penalty > 0 && o.repetition_penalty <= 2)) {
    return invalid_argument("bench-engine: --repetition-penalty {} (must be in (0, 2])", o.repetition_penalty);
  }
  if (!(std::fabs(o.frequency_penalty) <= 2)) {
    return invalid_argument("bench-engine: --frequency-penalty {} (must be in [-2, 2])", o.frequency_penalty);
  }
  if (o.logprobs > 20) return invalid_argument("bench-engine: --logprobs {} (at most 20)", o.logprobs);
  if (o.nextn_decode < 0) return invalid_argument("bench-engine: --nextn-decode {} (must be >= 0)", o.nextn_decode);
  if (o.model.empty() && o.layers < 1) return invalid_argument("bench-engine: --layers {} (must be >= 1)", o.layers);
  return Status::ok();
}

}  // namespace

Result<std::string> run_engine_benchmark(const EngineBenchOptions& o) {
  DI_RETURN_IF_ERROR(check_options(o));
  const int32_t max_c = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  EngineOptions eo;
  eo.device = o.device;
  eo.numerics = o.numerics;
  eo.max_num_seqs = max_c;
  eo.max_num_batched_tokens = o.max_num_batched_tokens;
  eo.async_scheduling = o.async_scheduling;
  eo.nextn_decode = o.nextn_decode;
  eo.mtp_varlen = o.mtp_varlen;
  eo.spec_verification = o.spec_verification;
  eo.max_model_len = o.input_len + o.output_len;
  // Every sequence's history fits at once (no preemption), whatever the default KV budget.
  eo.kv_blocks = max_c * ((eo.max_model_len + eo.block_tokens - 1) / eo.block_tokens + 1);
  engine::DebugOptions debug;
  debug.host_sampling = o.host_sampling;
  std::unique_ptr<engine::EngineImpl> e;
  if (o.model.empty()) {
    DI_ASSIGN_OR_RETURN(const model::Numerics numerics, engine::parse_numerics(o.numerics));
    const bool mtp = o.nextn_decode > 0 || o.mtp_varlen;
    DI_ASSIGN_OR_RETURN(auto loaded, engine::synthetic_loaded_model(o.layers, o.device, numerics, 7, mtp));
    eo.model = loaded->dir;
    DI_ASSIGN_OR_RETURN(e, engine::EngineImpl::create(eo, debug, std::move(loaded)));
  } else {
    eo.model = o.model;
    DI_ASSIGN_OR_RETURN(e, engine::EngineImpl::create(eo, debug));
  }
  json result;
  result["command"] = o.command;
  result["commit"] = o.commit;
  result["date"] = engine::utc_timestamp();
  result["device"] = device_name(o.device);
  result["model"] = e->model_dir();
  result["numerics"] = o.numerics;
  result["max_num_batched_tokens"] = o.max_num_batched_tokens;
  result["rows"] = json::array();
  uint64_t seed = o.seed;
  for (int32_t c : o.concurrency) {
    auto row = run_row(*e, o, c, static_cast<int32_t>(e->vocab_size()), seed);
    seed += 2'000'029;
    if (!row.is_ok()) {
      e->shutdown(/*drain=*/false);
      return row.status().with_context(fmt::format("bench-engine concurrency {}", c));
    }
    log_info("bench-engine: concurrency {}: {:.1f} output tok/s, {:.3f} ms per step ({:.1f}% host)", c,
             (*row)["output_tokens_per_s"].get<double>(), (*row)["step_ms"].get<double>(),
             100.0 * (*row)["host_share"].get<double>());
    result["rows"].push_back(std::move(row).value());
  }
  e->shutdown(/*drain=*/true);
  return result.dump(1);
}

}  // namespace deepinfer
