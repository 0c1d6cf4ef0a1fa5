// Prometheus text rendering and histograms (see metrics.h). Names follow Prometheus conventions
// (base units, _total for counters) with the deepinfer_ prefix; bucket bounds follow vLLM's so
// existing dashboards translate directly.
#include "metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace deepinfer::server {
namespace {

const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                         0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kTpotBounds = {0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                         0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0};
const std::vector<double> kE2eBounds = {0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
                                        20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
const std::vector<double> kTokenBounds = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000,
                                          10000, 20000, 50000, 100000, 200000, 500000, 1000000};

std::string number(double v) { return fmt::format("{}", v); }

// Appends piecewise: g++ 12 warns (-Wrestrict, a false positive) on "literal" + std::string here.
void header(std::string* out, const std::string& name, const char* type, const std::string& help) {
  out->append("# HELP ").append(name).append(" ").append(help).append("\n# TYPE ");
  out->append(name).append(" ").append(type).append("\n");
}

void sample(std::string* out, const std::string& name, double value, const std::string& labels = {}) {
  out->append(name);
  if (!labels.empty()) out->append("{").append(labels).append("}");
  out->append(" ").append(number(value)).append("\n");
}

}  // namespace

const char* finish_text(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "error";
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++n_;
}

uint64_t Histogram::count() const {
  std::lock_guard lock(mu_);
  return n_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string* out) const {
  header(out, name, "histogram", help);
  std::lock_guard lock(mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    sample(out, name + "_bucket", static_cast<double>(cumulative), fmt::format("le=\"{}\"", number(bounds_[i])));
  }
  sample(out, name + "_bucket", static_cast<double>(n_), "le=\"+Inf\"");
  sample(out, name + "_sum", sum_);
  sample(out, name + "_count", static_cast<double>(n_));
}

Metrics::Metrics()
    : ttft_(kTtftBounds), tpot_(kTpotBounds), e2e_(kE2eBounds), prompt_tokens_(kTokenBounds),
      generation_tokens_(kTokenBounds) {}

void Metrics::on_http_response(const std::string& endpoint, int status) {
  std::lock_guard lock(mu_);
  ++http_responses_[{endpoint, status}];
}

void Metrics::on_rejected(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++rejected_[reason];
}

void Metrics::on_client_disconnect() {
  std::lock_guard lock(mu_);
  ++n_client_disconnects_;
}

uint64_t Metrics::n_client_disconnects() const {
  std::lock_guard lock(mu_);
  return n_client_disconnects_;
}

void Metrics::on_request_done(int n_prompt_tokens, int n_cached_tokens, int64_t n_generated_tokens,
                              double ttft_s, double e2e_s, const std::vector<FinishReason>& finishes) {
  {
    std::lock_guard lock(mu_);
    n_prompt_tokens_ += static_cast<uint64_t>(n_prompt_tokens);
    n_cached_tokens_ += static_cast<uint64_t>(n_cached_tokens);
    n_generated_tokens_ += static_cast<uint64_t>(n_generated_tokens);
    for (FinishReason f : finishes) ++finished_[finish_text(f)];
  }
  prompt_tokens_.observe(n_prompt_tokens);
  generation_tokens_.observe(static_cast<double>(n_generated_tokens));
  e2e_.observe(e2e_s);
  if (n_generated_tokens > 0) {
    ttft_.observe(ttft_s);
    // Mean time per output token after the first, per sequence (all n sequences decode together).
    int64_t per_seq = n_generated_tokens / std::max<int64_t>(1, static_cast<int64_t>(finishes.size()));
    if (per_seq > 1) tpot_.observe((e2e_s - ttft_s) / static_cast<double>(per_seq - 1));
  }
}

std::string Metrics::render(const EngineStats& engine, const ServerGauges& gauges) const {
  std::string out;
  {
    std::lock_guard lock(mu_);
    header(&out, "deepinfer_http_requests_total", "counter", "HTTP responses by endpoint and status code.");
    for (const auto& [key, n] : http_responses_) {
      sample(&out, "deepinfer_http_requests_total", static_cast<double>(n),
             "endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"");
    }
    header(&out, "deepinfer_requests_rejected_total", "counter", "Requests refused before reaching the engine, by reason.");
    for (const auto& [reason, n] : rejected_) {
      sample(&out, "deepinfer_requests_rejected_total", static_cast<double>(n), "reason=\"" + reason + "\"");
    }
    header(&out, "deepinfer_request_success_total", "counter", "Finished sequences by finish reason.");
    for (const auto& [reason, n] : finished_) {
      sample(&out, "deepinfer_request_success_total", static_cast<double>(n), "finished_reason=\"" + reason + "\"");
    }
    header(&out, "deepinfer_client_disconnects_total", "counter", "Requests aborted because the client went away.");
    sample(&out, "deepinfer_client_disconnects_total", static_cast<double>(n_client_disconnects_));
    header(&out, "deepinfer_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
    sample(&out, "deepinfer_prompt_tokens_total", static_cast<double>(n_prompt_tokens_));
    header(&out, "deepinfer_prompt_tokens_cached_total", "counter", "Prompt tokens served from the prefix cache.");
    sample(&out, "deepinfer_prompt_tokens_cached_total", static_cast<double>(n_cached_tokens_));
    header(&out, "deepinfer_generation_tokens_total", "counter", "Generated tokens of finished requests.");
    sample(&out, "deepinfer_generation_tokens_total", static_cast<double>(n_generated_tokens_));
  }
  header(&out, "deepinfer_requests_in_flight", "gauge", "Requests admitted by the server and not yet answered.");
  sample(&out, "deepinfer_requests_in_flight", static_cast<double>(gauges.n_in_flight));
  header(&out, "deepinfer_requests_in_flight_limit", "gauge", "Admission bound (beyond it: 429).");
  sample(&out, "deepinfer_requests_in_flight_limit", static_cast<double>(gauges.max_in_flight));
  header(&out, "deepinfer_http_connections", "gauge", "Open client connections.");
  sample(&out, "deepinfer_http_connections", static_cast<double>(gauges.n_connections));
  header(&out, "deepinfer_num_requests_running", "gauge", "Sequences in the engine's running batch.");
  sample(&out, "deepinfer_num_requests_running", static_cast<double>(engine.n_running));
  header(&out, "deepinfer_num_requests_waiting", "gauge", "Sequences queued in the engine.");
  sample(&out, "deepinfer_num_requests_waiting", static_cast<double>(engine.n_waiting));
  header(&out, "deepinfer_kv_cache_usage_ratio", "gauge", "Fraction of KV history blocks in use.");
  sample(&out, "deepinfer_kv_cache_usage_ratio", engine.kv_usage);
  header(&out, "deepinfer_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.");
  sample(&out, "deepinfer_prefix_cache_queries_total", static_cast<double>(engine.n_prefix_query_tokens));
  header(&out, "deepinfer_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.");
  sample(&out, "deepinfer_prefix_cache_hits_total", static_cast<double>(engine.n_prefix_hit_tokens));
  header(&out, "deepinfer_prefix_cache_hit_rate", "gauge", "Prefix-cache hits / queries since start (0 before any query).");
  sample(&out, "deepinfer_prefix_cache_hit_rate",
         engine.n_prefix_query_tokens > 0
             ? static_cast<double>(engine.n_prefix_hit_tokens) / static_cast<double>(engine.n_prefix_query_tokens)
             : 0.0);
  header(&out, "deepinfer_num_preemptions_total", "counter", "Sequences preempted by the scheduler.");
  sample(&out, "deepinfer_num_preemptions_total", static_cast<double>(engine.n_preemptions));
  header(&out, "deepinfer_spec_decode_num_drafts_total", "counter",
         "Speculative decoding: requests' steps that verified drafts.");
  sample(&out, "deepinfer_spec_decode_num_drafts_total", static_cast<double>(engine.n_draft_rows));
  header(&out, "deepinfer_spec_decode_num_draft_tokens_total", "counter", "Speculative decoding: draft tokens verified.");
  sample(&out, "deepinfer_spec_decode_num_draft_tokens_total", static_cast<double>(engine.n_draft_tokens));
  header(&out, "deepinfer_spec_decode_num_accepted_tokens_total", "counter",
         "Speculative decoding: draft tokens accepted.");
  sample(&out, "deepinfer_spec_decode_num_accepted_tokens_total", static_cast<double>(engine.n_accepted_draft_tokens));
  header(&out, "deepinfer_engine_steps_total", "counter", "Engine steps run.");
  sample(&out, "deepinfer_engine_steps_total", static_cast<double>(engine.n_steps));
  header(&out, "deepinfer_engine_step_seconds_total", "counter",
         "Wall time of the engine's steps by phase; all but forward is host time the device waits through.");
  const EngineStats::StepTimes& st = engine.step_times;
  for (const auto& [phase, seconds] : {std::pair<const char*, double>{"schedule", st.schedule_s},
                                       {"prepare", st.prepare_s}, {"forward", st.forward_s},
                                       {"sample", st.sample_s}, {"update", st.update_s}, {"emit", st.emit_s}}) {
    sample(&out, "deepinfer_engine_step_seconds_total", seconds, std::string("phase=\"") + phase + "\"");
  }
  header(&out, "deepinfer_engine_generation_tokens_total", "counter", "Tokens generated by the engine (all requests).");
  sample(&out, "deepinfer_engine_generation_tokens_total", static_cast<double>(engine.n_generated_tokens_total));
  header(&out, "deepinfer_server_shutting_down", "gauge", "1 while draining for shutdown.");
  sample(&out, "deepinfer_server_shutting_down", gauges.shutting_down ? 1 : 0);
  ttft_.render("deepinfer_time_to_first_token_seconds", "Time from request arrival to the first generated token.", &out);
  tpot_.render("deepinfer_time_per_output_token_seconds", "Mean time per output token after the first, per request.", &out);
  e2e_.render("deepinfer_e2e_request_latency_seconds", "Time from request arrival to its last token.", &out);
  prompt_tokens_.render("deepinfer_request_prompt_tokens", "Prompt tokens per request.", &out);
  generation_tokens_.render("deepinfer_request_generation_tokens", "Generated tokens per request (all sequences).", &out);
  return out;
}

}  // namespace deepinfer::server
