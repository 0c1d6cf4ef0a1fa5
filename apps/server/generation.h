// One engine request seen from the server. The engine calls the sink on its own thread; the sink
// only queues the event and schedules a drain on an io thread, so the engine's step loop never
// waits for JSON, parsing or sockets (engine.h: sinks must return quickly). Drains of one
// generation never overlap and deliver events in order. Records TTFT/TPOT/E2E and token counts
// in the metrics once every sequence has finished, and stays registered in the ServerContext
// until then so shutdown can abort it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "deepinfer/engine.h"
#include "server_context.h"

namespace deepinfer::server {

class Generation : public std::enable_shared_from_this<Generation> {
 public:
  using EventFn = std::function<void(const TokenEvent& event)>;

  // Submits `request` (its sampling.n sequences). `on_event` runs on io threads, one call at a
  // time, in event order, possibly before start() returns; it is released after the final event.
  static Result<std::shared_ptr<Generation>> start(ServerContext& ctx, Request request, EventFn on_event,
                                                   std::chrono::steady_clock::time_point arrival);
  Generation(ServerContext& ctx, int n_sequences, EventFn on_event,
             std::chrono::steady_clock::time_point arrival);

  // Thread-safe; idempotent; a no-op once finished. Every sequence then ends with kAbort.
  void abort();
  bool is_done() const;

 private:
  void push(const TokenEvent& event);  // engine thread
  void drain();                        // io thread
  void account(const TokenEvent& event);
  void finish();

  ServerContext& ctx_;
  const int n_sequences_;
  const std::chrono::steady_clock::time_point arrival_;

  mutable std::mutex mu_;
  EventFn on_event_;
  std::deque<TokenEvent> queue_;
  bool scheduled_ = false;
  bool abort_requested_ = false;
  bool done_ = false;
  std::optional<RequestId> id_;

  // Touched by drains only (which never overlap).
  int n_finished_ = 0;
  int n_prompt_tokens_ = 0, n_cached_tokens_ = 0;
  int64_t n_generated_ = 0;
  std::optional<std::chrono::steady_clock::time_point> first_token_;
  std::vector<FinishReason> finishes_;
};

}  // namespace deepinfer::server
