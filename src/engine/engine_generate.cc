// Engine::generate: offline batch generation as submit-many-and-wait. Sinks (engine thread)
// append into per-request outputs under a local mutex; the calling thread waits, reports
// progress after each completed request, and returns the outputs in input order.
#include <condition_variable>
#include <mutex>

#include "engine/engine_impl.h"

namespace deepinfer::engine {
namespace {

struct BatchCollector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<GenerateOutput> outputs;
  std::vector<int32_t> n_open;  // sequences of request i without a final event
  size_t n_done = 0;

  void on_event(size_t index, const TokenEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    GenerateOutput& out = outputs[index];
    if (e.sample_index == 0 && !e.token_ids.empty() && out.sequences[0].token_ids.empty()) {
      out.n_cached_tokens = e.n_cached_tokens;
    }
    if (!e.prompt_logprobs.empty()) out.prompt_logprobs = e.prompt_logprobs;  // sample 0's first tokens
    GenerateOutput::Sequence& seq = out.sequences[static_cast<size_t>(e.sample_index)];
    seq.token_ids.insert(seq.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
    seq.text += e.text;
    seq.logprobs.insert(seq.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    if (!e.finish.has_value()) return;
    seq.finish = *e.finish;
    seq.error = e.error;
    seq.stop_string = e.stop_string;
    seq.stop_token_id = e.stop_token_id;
    if (--n_open[index] == 0) {
      ++n_done;
      cv.notify_all();
    }
  }
};

}  // namespace

Result<std::vector<GenerateOutput>> EngineImpl::generate(std::vector<Request> requests,
                                                         std::function<void(size_t, size_t)> on_progress) {
  auto collector = std::make_shared<BatchCollector>();
  const size_t n = requests.size();
  collector->outputs.resize(n);
  collector->n_open.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t n_seqs = std::max(requests[i].sampling.n, 1);
    collector->outputs[i].sequences.resize(static_cast<size_t>(n_seqs));
    collector->n_open[i] = n_seqs;
  }
  std::vector<RequestId> submitted;
  for (size_t i = 0; i < n; ++i) {
    // Tokenize here so the output can carry the prompt ids the engine ran.
    auto ids = tokenize_prompt(requests[i], *tokenizer_);
    if (ids.is_ok()) {
      requests[i].prompt_ids = std::move(ids).value();
      requests[i].prompt.clear();
      collector->outputs[i].prompt_ids = requests[i].prompt_ids;
    }
    Result<RequestId> id = submit(std::move(requests[i]), [collector, i](const TokenEvent& e) { collector->on_event(i, e); });
    if (!id.is_ok()) {
      for (RequestId s : submitted) abort(s);
      return id.status().with_context(fmt::format("requests[{}]", i));
    }
    submitted.push_back(*id);
    collector->outputs[i].request_id = *id;
  }
  std::unique_lock<std::mutex> lock(collector->mu);
  size_t reported = 0;
  while (reported < n) {
    collector->cv.wait(lock, [&] { return collector->n_done > reported; });
    const size_t done = collector->n_done;
    lock.unlock();
    for (; reported < done; ++reported) {
      if (on_progress) on_progress(reported + 1, n);
    }
    lock.lock();
  }
  return std::move(collector->outputs);
}

}  // namespace deepinfer::engine
