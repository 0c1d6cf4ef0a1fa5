// Helpers for engine tests on the `micro` synthetic model (vocab 512, hidden 128, window 16,
// ratios 4/16): small engine options with 16-token blocks so prefix hits and snapshots happen on
// short prompts, request builders, and a collector that runs requests through the event API.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "deepinfer/engine.h"
#include "engine/engine_debug.h"
#include "test_models.h"

namespace deepinfer::testing {

inline EngineOptions micro_options() {
  EngineOptions o;
  o.model = synthetic_model_dir("micro");
  o.block_tokens = 16;
  o.kv_blocks = 96;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 64;
  o.n_snapshot_slots = 8;
  o.replay_mode = "exact";
  return o;
}

inline std::unique_ptr<Engine> open_micro(EngineOptions o = micro_options(), engine::DebugOptions debug = {}) {
  debug.check_integrity_every_step = true;
  auto e = engine::open_engine(o, debug);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

inline std::vector<int32_t> prompt_ids(int64_t n, uint64_t seed, int32_t vocab = 512) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(vocab - 3));
  return ids;
}

inline Request ids_request(std::vector<int32_t> ids, int32_t max_tokens, std::optional<uint64_t> seed,
                           float temperature = 1.0f) {
  Request r;
  r.prompt_ids = std::move(ids);
  r.sampling.max_tokens = max_tokens;
  r.sampling.seed = seed;
  r.sampling.temperature = temperature;
  r.sampling.ignore_eos = true;  // exact lengths, whatever the random model samples
  return r;
}

// Every event of every request, thread-safe; wait() blocks until `n` sequences have finished.
struct EventLog {
  std::mutex mu;
  std::condition_variable cv;
  std::map<RequestId, std::vector<TokenEvent>> events;
  int n_finished = 0;

  EventSink sink() {
    return [this](const TokenEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      events[e.request_id].push_back(e);
      if (e.finish.has_value()) ++n_finished;
      cv.notify_all();
    };
  }
  bool wait(int n, int timeout_s = 120) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(timeout_s), [&] { return n_finished >= n; });
  }
  std::vector<int32_t> tokens(RequestId id, int32_t sample = 0) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<int32_t> out;
    for (const TokenEvent& e : events[id]) {
      if (e.sample_index == sample) out.insert(out.end(), e.token_ids.begin(), e.token_ids.end());
    }
    return out;
  }
  std::optional<FinishReason> finish(RequestId id, int32_t sample = 0) {
    std::lock_guard<std::mutex> lock(mu);
    for (const TokenEvent& e : events[id]) {
      if (e.sample_index == sample && e.finish) return e.finish;
    }
    return std::nullopt;
  }
};

// Tokens of sample 0 of each request, generated with engine->generate.
inline std::vector<std::vector<int32_t>> generate_tokens(Engine& engine, std::vector<Request> requests) {
  auto outs = engine.generate(std::move(requests));
  EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
  std::vector<std::vector<int32_t>> tokens;
  if (!outs.is_ok()) return tokens;
  for (const auto& o : *outs) tokens.push_back(o.sequences.at(0).token_ids);
  return tokens;
}

// Integrity clean and every KV resource back in its pool.
inline void expect_all_free(const Engine& engine) {
  const engine::DebugSnapshot d = engine::debug_snapshot(engine);
  EXPECT_TRUE(d.integrity.is_ok()) << d.integrity.to_string();
  EXPECT_GT(d.n_integrity_checks, 0);
  EXPECT_EQ(d.n_live_requests, 0);
  EXPECT_EQ(d.n_live_sequences, 0);
  EXPECT_EQ(d.n_kv_seqs, 0);
  EXPECT_EQ(d.n_runner_tables, 0);
  EXPECT_EQ(d.n_free_blocks, d.n_blocks);
  EXPECT_EQ(d.n_free_state_slots, d.n_state_slots);
  EXPECT_EQ(d.n_snapshot_pins, 0);
  EXPECT_EQ(d.n_pending_snapshots, 0);
}

// A batch's outputs and the engine's counters after it.
struct Outcome {
  std::vector<GenerateOutput> outputs;
  EngineStats stats;
};

// `requests` through a fresh engine (integrity checked after every step), every resource free after.
inline Outcome generate_all(std::vector<Request> requests, const EngineOptions& o, engine::DebugOptions debug = {}) {
  auto engine = open_micro(o, std::move(debug));
  EXPECT_NE(engine, nullptr);
  if (engine == nullptr) return {};
  auto outs = engine->generate(std::move(requests));
  EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
  expect_all_free(*engine);
  return {outs.is_ok() ? std::move(outs).value() : std::vector<GenerateOutput>{}, engine->stats()};
}

// Two runs' outputs equal token for token: ids, text, finish, error and logprobs.
inline void expect_same_outputs(const std::vector<GenerateOutput>& a, const std::vector<GenerateOutput>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].sequences.size(), b[i].sequences.size()) << "request " << i;
    for (size_t j = 0; j < a[i].sequences.size(); ++j) {
      const GenerateOutput::Sequence &x = a[i].sequences[j], &y = b[i].sequences[j];
      EXPECT_EQ(x.token_ids, y.token_ids) << "request " << i << " sample " << j;
      EXPECT_EQ(x.text, y.text) << "request " << i << " sample " << j;
      EXPECT_EQ(x.finish, y.finish) << "request " << i << " sample " << j;
      EXPECT_EQ(x.error, y.error);
      ASSERT_EQ(x.logprobs.size(), y.logprobs.size()) << "request " << i << " sample " << j;
      for (size_t k = 0; k < x.logprobs.size(); ++k) {
        EXPECT_EQ(x.logprobs[k].token, y.logprobs[k].token);
        EXPECT_EQ(x.logprobs[k].logprob, y.logprobs[k].logprob);
        EXPECT_EQ(x.logprobs[k].top, y.logprobs[k].top);
      }
    }
  }
}

// Speculative decoding under a grammar (tiny-v4f's real vocabulary): "The answer is" then lowercase
// words ending in a period, at most 14 tokens, one request per (seed, temperature).
inline std::vector<Request> sentence_requests(const std::vector<std::pair<uint64_t, float>>& rows) {
  std::vector<Request> requests;
  for (const auto& [seed, temperature] : rows) {
    Request r;
    r.prompt = "The answer is";
    r.sampling.max_tokens = 14;
    r.sampling.seed = seed;
    r.sampling.temperature = temperature;
    r.structured_output = StructuredOutput{StructuredOutput::Kind::kRegex, "[a-z]+( [a-z]+)*\\.", false};
    requests.push_back(r);
  }
  return requests;
}

// A drafts hook making every second draft the digit "7", which sentence_requests' grammar forbids:
// the grammar cuts each row's drafts after the first. Empty options (and a test failure) if the
// tokenizer does not give "7" one token.
inline engine::DebugOptions digit_second_drafts(const Engine& engine) {
  const std::vector<int32_t> digit = engine.tokenizer()->encode("7", false);
  EXPECT_EQ(digit.size(), 1u);
  engine::DebugOptions cut;
  if (digit.size() != 1) return cut;
  cut.on_drafts = [d = digit[0]](RequestId, int32_t, int32_t, std::vector<int32_t>* drafts) {
    if (drafts->size() < 2) drafts->resize(2, d);
    (*drafts)[1] = d;
  };
  return cut;
}

}  // namespace deepinfer::testing
