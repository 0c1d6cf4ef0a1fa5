// FakeEngine: an Engine for server tests that needs no model. Each request's sequences emit the
// token ids a script chooses (one token per event every `step_ms`, like a decode step), with the
// engine's contract: events on the engine thread in order, max_tokens -> kLength, EOS or a stop
// string -> kStop (text without them), abort -> a final kAbort event, nothing after the final
// event; prompt logprobs (made up) with sample 0's first token. It keeps a fake KV ledger (one block per 16 positions of every live sequence) so tests
// can check that every block is returned. Thread-safe like the real Engine.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer::server::testing {

class FakeEngine : public Engine {
 public:
  // Output ids of sequence `sample` of `request` (include the EOS id to stop there).
  using Script = std::function<std::vector<int32_t>(const Request& request, int sample)>;

  struct Options {
    int32_t max_model_len = 4096;
    int step_ms = 1;
    int64_t kv_blocks = 100000;
    std::string model_dir = "/models/fake-v4";
    std::string family = "deepseek_v4";
    int32_t cached_tokens = 0;  // prompt tokens every request reports served from the prefix cache
    bool last_sample_first = false;  // each step emits the last sample's event first (the engine may)
  };

  FakeEngine(std::shared_ptr<const Tokenizer> tokenizer, Options options, Script script);
  ~FakeEngine() override;

  Result<RequestId> submit(Request request, EventSink sink) override;
  void abort(RequestId id) override;
  Result<std::vector<GenerateOutput>> generate(std::vector<Request> requests,
                                               std::function<void(size_t, size_t)> on_progress) override;
  std::shared_ptr<const Tokenizer> tokenizer() const override { return tokenizer_; }
  EngineStats stats() const override;
  const EngineOptions& options() const override { return engine_options_; }
  std::string model_dir() const override { return options_.model_dir; }
  std::string model_family() const override { return options_.family; }
  int32_t max_model_len() const override { return options_.max_model_len; }
  void shutdown(bool drain) override;

  // Stops (true) or resumes stepping: requests stay queued, as in a long prefill.
  void set_paused(bool paused);
  int64_t n_blocks_in_use() const;
  int64_t n_live_requests() const;
  int64_t n_aborted() const;
  // The last request submitted (copy), for tests that check what the server sent.
  Request last_request() const;

 private:
  struct Sequence {
    std::vector<int32_t> script;
    size_t next = 0;
    std::string text;    // decoded so far
    size_t emitted = 0;  // bytes of `text` sent (the rest is held back for stop strings)
    std::shared_ptr<IncrementalDetokenizer> detok;
    int32_t n_generated = 0;
    bool done = false;
  };
  struct Live {
    Request request;
    EventSink sink;
    std::vector<Sequence> seqs;
    bool aborted = false;
  };

  void run();
  std::vector<TokenEvent> step(RequestId id, Live& live);
  TokenEvent next_event(RequestId id, Live& live, int index);
  int64_t blocks_of(const Live& live) const;

  std::shared_ptr<const Tokenizer> tokenizer_;
  Options options_;
  Script script_;
  EngineOptions engine_options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<RequestId, Live> live_;
  RequestId next_id_ = 1;
  bool paused_ = false;
  bool stopping_ = false;
  bool accepting_ = true;
  int64_t n_finished_ = 0, n_aborted_ = 0, n_generated_total_ = 0, n_prompt_total_ = 0, n_steps_ = 0;
  Request last_request_;
  std::thread thread_;
};

}  // namespace deepinfer::server::testing
