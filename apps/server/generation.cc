// Generation: engine sink -> queue -> ordered drains on io threads (see generation.h).
#include "generation.h"

namespace deepinfer::server {

Generation::Generation(ServerContext& ctx, int n_sequences, EventFn on_event,
                       std::chrono::steady_clock::time_point arrival)
    : ctx_(ctx), n_sequences_(n_sequences), arrival_(arrival), on_event_(std::move(on_event)) {}

Result<std::shared_ptr<Generation>> Generation::start(ServerContext& ctx, Request request, EventFn on_event,
                                                      std::chrono::steady_clock::time_point arrival) {
  int n = std::max(1, request.sampling.n);
  auto g = std::make_shared<Generation>(ctx, n, std::move(on_event), arrival);
  ctx.add_generation(g);
  // The sink owns a reference until the engine drops it after the final event.
  Result<RequestId> id = ctx.engine.submit(std::move(request), [g](const TokenEvent& e) { g->push(e); });
  if (!id.is_ok()) {
    ctx.remove_generation(g.get());
    std::lock_guard lock(g->mu_);
    g->on_event_ = nullptr;
    g->done_ = true;
    return id.status();
  }
  bool abort_now = false;
  {
    std::lock_guard lock(g->mu_);
    g->id_ = *id;
    abort_now = g->abort_requested_ && !g->done_;
  }
  if (abort_now) ctx.engine.abort(*id);
  return g;
}

void Generation::abort() {
  std::optional<RequestId> id;
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    abort_requested_ = true;
    id = id_;
  }
  if (id) ctx_.engine.abort(*id);  // before submit() returned: start() aborts it
}

bool Generation::is_done() const {
  std::lock_guard lock(mu_);
  return done_;
}

void Generation::push(const TokenEvent& event) {
  bool schedule = false;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(event);
    if (!scheduled_) schedule = scheduled_ = true;
  }
  if (schedule) ctx_.post([self = shared_from_this()] { self->drain(); });
}

void Generation::drain() {
  for (;;) {
    std::deque<TokenEvent> batch;
    EventFn fn;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty()) {
        scheduled_ = false;
        return;
      }
      batch.swap(queue_);
      fn = on_event_;
    }
    for (const TokenEvent& e : batch) {
      account(e);
      if (fn) fn(e);
      if (e.finish && n_finished_ == n_sequences_) finish();
    }
  }
}

void Generation::account(const TokenEvent& e) {
  n_prompt_tokens_ = std::max(n_prompt_tokens_, e.n_prompt_tokens);
  n_cached_tokens_ = std::max(n_cached_tokens_, e.n_cached_tokens);
  n_generated_ += static_cast<int64_t>(e.token_ids.size());
  if (!first_token_ && !e.token_ids.empty()) first_token_ = std::chrono::steady_clock::now();
  if (e.finish) {
    ++n_finished_;
    finishes_.push_back(*e.finish);
  }
}

void Generation::finish() {
  auto now = std::chrono::steady_clock::now();
  double e2e = std::chrono::duration<double>(now - arrival_).count();
  double ttft = first_token_ ? std::chrono::duration<double>(*first_token_ - arrival_).count() : e2e;
  ctx_.metrics.on_request_done(n_prompt_tokens_, n_cached_tokens_, n_generated_, ttft, e2e, finishes_);
  {
    std::lock_guard lock(mu_);
    done_ = true;
    on_event_ = nullptr;  // breaks the session <-> generation cycle
  }
  ctx_.remove_generation(this);
}

}  // namespace deepinfer::server
