// FakeEngine (see fake_engine.h).
#include "fake_engine.h"

#include <chrono>

namespace deepinfer::server::testing {

FakeEngine::FakeEngine(std::shared_ptr<const Tokenizer> tokenizer, Options options, Script script)
    : tokenizer_(std::move(tokenizer)), options_(std::move(options)), script_(std::move(script)) {
  engine_options_.model = options_.model_dir;
  engine_options_.max_model_len = options_.max_model_len;
  thread_ = std::thread([this] { run(); });
}

FakeEngine::~FakeEngine() { shutdown(false); }

Result<RequestId> FakeEngine::submit(Request request, EventSink sink) {
  if (request.prompt_ids.empty() && !request.prompt.empty()) {
    request.prompt_ids = tokenizer_->encode(request.prompt, true);
  }
  if (request.prompt_ids.empty()) return Status(StatusCode::kInvalidArgument, "prompt: empty");
  if (static_cast<int32_t>(request.prompt_ids.size()) >= options_.max_model_len) {
    return Status(StatusCode::kOutOfRange, "prompt of " + std::to_string(request.prompt_ids.size()) +
                                               " tokens does not fit max_model_len " + std::to_string(options_.max_model_len));
  }
  if (Status s = request.sampling.validate(); !s.is_ok()) return s;
  Live live;
  live.sink = std::move(sink);
  int n = std::max(1, request.sampling.n);
  for (int i = 0; i < n; ++i) {  // outside the lock: scripts may tokenize
    Sequence s;
    s.script = script_(request, i);
    s.detok = std::make_shared<IncrementalDetokenizer>(tokenizer_, request.sampling.skip_special_tokens);
    live.seqs.push_back(std::move(s));
  }
  std::lock_guard lock(mu_);
  if (!accepting_) return Status(StatusCode::kUnavailable, "engine is shutting down");
  RequestId id = next_id_++;
  n_prompt_total_ += static_cast<int64_t>(request.prompt_ids.size());
  last_request_ = request;
  live.request = std::move(request);
  live_.emplace(id, std::move(live));
  return id;
}

void FakeEngine::abort(RequestId id) {
  std::lock_guard lock(mu_);
  auto it = live_.find(id);
  if (it != live_.end()) it->second.aborted = true;
}

Result<std::vector<GenerateOutput>> FakeEngine::generate(std::vector<Request> requests,
                                                         std::function<void(size_t, size_t)> on_progress) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    size_t n_done = 0;
    std::vector<GenerateOutput> outputs;
  };
  auto shared = std::make_shared<Shared>();
  shared->outputs.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    int n = std::max(1, requests[i].sampling.n);
    shared->outputs[i].sequences.resize(static_cast<size_t>(n));
    shared->outputs[i].prompt_ids = requests[i].prompt_ids;
    auto remaining = std::make_shared<int>(n);
    auto id = submit(std::move(requests[i]), [shared, i, remaining](const TokenEvent& e) {
      std::lock_guard lock(shared->mu);
      auto& seq = shared->outputs[i].sequences[static_cast<size_t>(e.sample_index)];
      seq.token_ids.insert(seq.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
      seq.text += e.text;
      if (e.finish) {
        seq.finish = *e.finish;
        if (--*remaining == 0) {
          ++shared->n_done;
          shared->cv.notify_all();
        }
      }
    });
    if (!id.is_ok()) return id.status();
    shared->outputs[i].request_id = *id;
  }
  std::unique_lock lock(shared->mu);
  size_t reported = 0;
  while (shared->n_done < shared->outputs.size()) {
    shared->cv.wait(lock);
    for (; reported < shared->n_done; ++reported) {
      if (on_progress) on_progress(reported + 1, shared->outputs.size());
    }
  }
  return std::move(shared->outputs);
}

EngineStats FakeEngine::stats() const {
  std::lock_guard lock(mu_);
  EngineStats s;
  (paused_ ? s.n_waiting : s.n_running) = static_cast<int64_t>(live_.size());
  s.n_prompt_tokens_total = n_prompt_total_;
  s.n_generated_tokens_total = n_generated_total_;
  s.n_requests_finished = n_finished_;
  s.n_requests_aborted = n_aborted_;
  int64_t blocks = 0;
  for (const auto& [id, live] : live_) blocks += blocks_of(live);
  s.kv_usage = static_cast<double>(blocks) / static_cast<double>(options_.kv_blocks);
  s.n_steps = n_steps_;
  return s;
}

void FakeEngine::shutdown(bool drain) {
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    if (!drain) {
      for (auto& [id, live] : live_) live.aborted = true;
    }
    paused_ = false;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FakeEngine::set_paused(bool paused) {
  {
    std::lock_guard lock(mu_);
    paused_ = paused;
  }
  cv_.notify_all();
}

int64_t FakeEngine::blocks_of(const Live& live) const {
  int64_t blocks = 0;
  for (const Sequence& s : live.seqs) {
    blocks += (static_cast<int64_t>(live.request.prompt_ids.size()) + s.n_generated + 15) / 16;
  }
  return blocks;
}

int64_t FakeEngine::n_blocks_in_use() const {
  std::lock_guard lock(mu_);
  int64_t blocks = 0;
  for (const auto& [id, live] : live_) blocks += blocks_of(live);
  return blocks;
}

int64_t FakeEngine::n_live_requests() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(live_.size());
}

int64_t FakeEngine::n_aborted() const {
  std::lock_guard lock(mu_);
  return n_aborted_;
}

Request FakeEngine::last_request() const {
  std::lock_guard lock(mu_);
  return last_request_;
}

// One decode step: every live request (or, while paused, only the aborted ones) emits one event
// per unfinished sequence; finished requests leave the ledger before their final event is sent.
void FakeEngine::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.step_ms));
    if (stopping_ && live_.empty()) return;
    std::vector<std::pair<EventSink, std::vector<TokenEvent>>> out;
    for (auto it = live_.begin(); it != live_.end();) {
      Live& live = it->second;
      if (paused_ && !live.aborted) {
        ++it;
        continue;
      }
      std::vector<TokenEvent> events = step(it->first, live);
      bool finished = true;
      for (const Sequence& s : live.seqs) finished = finished && s.done;
      if (finished) {
        ++(live.aborted ? n_aborted_ : n_finished_);
        out.emplace_back(std::move(live.sink), std::move(events));
        it = live_.erase(it);
      } else {
        out.emplace_back(live.sink, std::move(events));
        ++it;
      }
    }
    if (!out.empty()) ++n_steps_;
    lock.unlock();
    for (auto& [sink, events] : out) {
      for (const TokenEvent& e : events) sink(e);
    }
    lock.lock();
  }
}

std::vector<TokenEvent> FakeEngine::step(RequestId id, Live& live) {
  std::vector<TokenEvent> events;
  const int n = static_cast<int>(live.seqs.size());
  for (int k = 0; k < n; ++k) {
    const int i = options_.last_sample_first ? n - 1 - k : k;
    if (!live.seqs[static_cast<size_t>(i)].done) events.push_back(next_event(id, live, i));
  }
  return events;
}

TokenEvent FakeEngine::next_event(RequestId id, Live& live, int index) {
  Sequence& s = live.seqs[static_cast<size_t>(index)];
  const SamplingParams& sp = live.request.sampling;
  TokenEvent e;
  e.request_id = id;
  e.sample_index = index;
  e.n_prompt_tokens = static_cast<int32_t>(live.request.prompt_ids.size());
  e.n_cached_tokens = std::min(options_.cached_tokens, e.n_prompt_tokens);
  auto rest = [&s] {
    s.text += s.detok->flush();
    std::string out = s.text.substr(s.emitted);
    s.emitted = s.text.size();
    return out;
  };
  if (live.aborted || s.next >= s.script.size()) {
    e.finish = live.aborted ? FinishReason::kAbort : FinishReason::kStop;
    if (!live.aborted) e.text = rest();
    s.done = true;
    e.n_generated_tokens = s.n_generated;
    return e;
  }
  int32_t token = s.script[s.next++];
  e.token_ids = {token};
  if (index == 0 && s.next == 1 && sp.prompt_logprobs) {
    // The engine's contract: with sample 0's first token, prompt token i's entry (i >= 1): here
    // logprob -0.5 i, rank i + 1, and "a", "b", ... as the alternatives (-0.125 (k + 1)).
    const std::vector<int32_t>& prompt = live.request.prompt_ids;
    for (size_t i = 1; i < prompt.size(); ++i) {
      TokenLogprobs lp{prompt[i], -0.5f * static_cast<float>(i), {}, static_cast<int32_t>(i) + 1};
      for (int k = 0; k < *sp.prompt_logprobs; ++k) lp.top.push_back({1000 + 'a' + k, -0.125f * static_cast<float>(k + 1)});
      e.prompt_logprobs.push_back(std::move(lp));
    }
  }
  ++s.n_generated;
  ++n_generated_total_;
  if (sp.logprobs) {
    TokenLogprobs lp{token, -0.25f, {}};
    for (int k = 0; k < *sp.logprobs; ++k) lp.top.push_back({token + k, -0.25f - static_cast<float>(k)});
    e.logprobs.push_back(std::move(lp));
  }
  bool stop_token = (token == tokenizer_->eos_id() && !sp.ignore_eos) ||
                    std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), token) != sp.stop_token_ids.end();
  int32_t limit = sp.max_tokens.value_or(options_.max_model_len - e.n_prompt_tokens);
  if (stop_token) {
    e.finish = FinishReason::kStop;
    e.text = rest();
  } else {
    s.text += s.detok->push(token);
    size_t hold = 0, first = std::string::npos, first_len = 0;
    for (const std::string& stop : sp.stop) {
      hold = std::max(hold, stop.size() - 1);
      size_t at = s.text.find(stop);
      if (at < first) {
        first = at;
        first_len = stop.size();
      }
    }
    if (first != std::string::npos) {
      size_t end = sp.include_stop_str_in_output ? first + first_len : first;
      e.text = end > s.emitted ? s.text.substr(s.emitted, end - s.emitted) : "";
      e.finish = FinishReason::kStop;
    } else if (s.n_generated >= limit) {
      e.finish = FinishReason::kLength;
      e.text = rest();
    } else if (s.text.size() > s.emitted + hold) {
      size_t upto = s.text.size() - hold;
      while (upto > s.emitted && (static_cast<unsigned char>(s.text[upto]) & 0xC0) == 0x80) --upto;
      e.text = s.text.substr(s.emitted, upto - s.emitted);
      s.emitted = upto;
    }
  }
  if (!e.finish && s.n_generated >= limit) {
    e.finish = FinishReason::kLength;
    e.text += rest();
  }
  if (e.finish) s.done = true;
  e.n_generated_tokens = s.n_generated;
  return e;
}

}  // namespace deepinfer::server::testing
