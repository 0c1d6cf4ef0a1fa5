// Server metrics in the Prometheus text format (GET /metrics): request counts by endpoint and
// status, token counters, admission/queue gauges, latency histograms (TTFT, TPOT, end to end),
// per-request token histograms, and the engine's own counters (KV usage, prefix-cache hit rate,
// preemptions) read from EngineStats at scrape time. Thread-safe; observations take one short lock.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer::server {

// "stop", "length", "abort", "error" (engine.h's finish_reason_name, kept here so the server
// library links against the Engine interface only).
const char* finish_text(FinishReason reason);

// Cumulative histogram with fixed upper bounds (seconds or counts).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines of `name`.
  void render(const std::string& name, const std::string& help, std::string* out) const;
  uint64_t count() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

// The gauges the server itself knows at scrape time.
struct ServerGauges {
  int64_t n_in_flight = 0;      // admitted requests not yet answered
  int64_t max_in_flight = 0;    // admission bound
  int64_t n_connections = 0;
  bool shutting_down = false;
};

class Metrics {
 public:
  Metrics();

  void on_http_response(const std::string& endpoint, int status);
  void on_rejected(const std::string& reason);
  void on_client_disconnect();
  // One finished engine request: per-sequence finish reasons, token counts and timings.
  void on_request_done(int n_prompt_tokens, int n_cached_tokens, int64_t n_generated_tokens,
                       double ttft_s, double e2e_s, const std::vector<FinishReason>& finishes);

  std::string render(const EngineStats& engine, const ServerGauges& gauges) const;

  uint64_t n_client_disconnects() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> http_responses_;
  std::map<std::string, uint64_t> rejected_;
  std::map<std::string, uint64_t> finished_;
  uint64_t n_client_disconnects_ = 0;
  uint64_t n_prompt_tokens_ = 0, n_cached_tokens_ = 0, n_generated_tokens_ = 0;
  Histogram ttft_, tpot_, e2e_, prompt_tokens_, generation_tokens_;
};

}  // namespace deepinfer::server
