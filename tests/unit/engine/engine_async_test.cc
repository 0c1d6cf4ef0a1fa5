// Asynchronous scheduling (EngineOptions::async_scheduling): the engine plans and queues
// step n + 1 before step n's tokens are back, its input tokens read where step n sampled them. On
// the micro model (the CPU backend runs the same plans, only without the overlap): every output —
// tokens, logprobs, finishes, also stops that end a request while a step ahead holds it — equals
// the synchronous loop's, steps are planned ahead where the sampler allows it, never for rows whose
// inputs follow the tokens (penalties), and every resource is back in its pool.
#include <atomic>
#include <functional>
#include <thread>

#include "engine_test_util.h"

namespace deepinfer {
namespace {

using testing::ids_request;
using testing::prompt_ids;

using testing::Outcome;

Outcome run(std::vector<Request> requests, bool async, int32_t max_num_seqs = 8,
            EngineOptions o = testing::micro_options()) {
  o.async_scheduling = async;
  o.max_num_seqs = max_num_seqs;
  return testing::generate_all(std::move(requests), o);
}

void expect_same(const std::vector<GenerateOutput>& a, const std::vector<GenerateOutput>& b) {
  testing::expect_same_outputs(a, b);
}

std::vector<Request> mixed_requests(int32_t stop_id) {
  std::vector<Request> v;
  v.push_back(ids_request(prompt_ids(21, 1), 12, std::nullopt, 0.0f));  // greedy
  Request topp = ids_request(prompt_ids(40, 2), 9, 77, 0.8f);
  topp.sampling.top_p = 0.9f;
  topp.sampling.logprobs = 3;
  v.push_back(topp);
  Request topk = ids_request(prompt_ids(7, 3), 15, 78, 1.1f);
  topk.sampling.top_k = 20;
  topk.sampling.n = 2;
  v.push_back(topk);
  // Ends on a stop id the greedy run emits mid-way (found by the caller): the step planned ahead
  // of that token's update still ran for it.
  Request stops = ids_request(prompt_ids(21, 1), 12, std::nullopt, 0.0f);
  stops.sampling.ignore_eos = false;
  stops.sampling.stop_token_ids = {stop_id};
  v.push_back(stops);
  Request min_tokens = ids_request(prompt_ids(33, 4), 6, 79, 0.7f);
  min_tokens.sampling.min_tokens = 4;
  min_tokens.sampling.ignore_eos = false;
  v.push_back(min_tokens);
  return v;
}

TEST(EngineAsyncTest, GeneratesWhatTheSynchronousLoopGenerates) {
  // The greedy request's 5th token becomes the stop id of its twin.
  const Outcome probe = run({ids_request(prompt_ids(21, 1), 12, std::nullopt, 0.0f)}, false);
  ASSERT_EQ(probe.outputs.size(), 1u);
  const std::vector<int32_t>& greedy = probe.outputs[0].sequences.at(0).token_ids;
  ASSERT_EQ(greedy.size(), 12u);
  const int32_t stop_id = greedy[4];
  for (int32_t max_seqs : {8, 2}) {  // 2: requests queue, so steps ahead stop and start again
    const Outcome sync_run = run(mixed_requests(stop_id), false, max_seqs);
    const Outcome async_run = run(mixed_requests(stop_id), true, max_seqs);
    expect_same(async_run.outputs, sync_run.outputs);
    EXPECT_EQ(sync_run.stats.n_steps_ahead, 0);
    EXPECT_GT(async_run.stats.n_steps_ahead, 0) << "max_num_seqs " << max_seqs;
    ASSERT_EQ(async_run.outputs.size(), 5u);
    const auto& stopped = async_run.outputs[3].sequences.at(0);
    EXPECT_EQ(stopped.finish, FinishReason::kStop);
    EXPECT_LE(stopped.token_ids.size(), 5u);
    EXPECT_EQ(stopped.token_ids.back(), stop_id);
  }
}

// Request `a` beside a 60-token request on an engine that plans ahead; `on_event(engine, a's id,
// event)` runs in a's sink (the loop thread) before the event is logged. a must end with `want`,
// and the debug snapshot taken as its final event is delivered must show only the other request's
// KV (the engine's promise: a caller that saw a final event sees its resources freed).
void expect_freed_at_final_event(Request a, FinishReason want,
                                 const std::function<void(Engine&, RequestId, const TokenEvent&)>& on_event) {
  EngineOptions o = testing::micro_options();
  o.async_scheduling = true;
  auto engine = testing::open_micro(o);
  ASSERT_NE(engine, nullptr);
  Engine* e = engine.get();
  testing::EventLog log;
  engine::DebugSnapshot at_final;
  std::atomic<bool> seen{false};
  std::atomic<RequestId> a_id{0};
  auto id = engine->submit(std::move(a), [&, inner = log.sink()](const TokenEvent& ev) {
    on_event(*e, a_id.load(), ev);
    if (ev.finish.has_value()) {
      at_final = engine::debug_snapshot(*e);  // on the loop thread, as the event is delivered
      seen = true;
    }
    inner(ev);
  });
  ASSERT_TRUE(id.is_ok());
  a_id = *id;
  auto b = engine->submit(ids_request(prompt_ids(30, 2), 60, 5), log.sink());
  ASSERT_TRUE(b.is_ok());
  ASSERT_TRUE(log.wait(2));
  ASSERT_TRUE(seen.load());
  EXPECT_EQ(log.finish(*id), want);
  EXPECT_EQ(log.tokens(*b).size(), 60u);
  EXPECT_EQ(at_final.n_kv_seqs, 1);  // request b only
  EXPECT_EQ(at_final.n_live_sequences, 1);
  EXPECT_TRUE(at_final.integrity.is_ok()) << at_final.integrity.to_string();
  EXPECT_GT(engine->stats().n_steps_ahead, 0);
  engine->shutdown(/*drain=*/true);
  testing::expect_all_free(*engine);
}

// A request that stops while the step planned ahead of its last one runs is released with that
// step's update: when its final event arrives, its KV sequence is gone, while the other request
// decodes on.
TEST(EngineAsyncTest, StoppedRequestIsFreedWhenItsFinalEventArrives) {
  const Outcome probe = run({ids_request(prompt_ids(21, 1), 12, std::nullopt, 0.0f)}, false);
  ASSERT_EQ(probe.outputs.size(), 1u);
  Request stops = ids_request(prompt_ids(21, 1), 12, std::nullopt, 0.0f);
  stops.sampling.ignore_eos = false;
  stops.sampling.stop_token_ids = {probe.outputs[0].sequences.at(0).token_ids.at(4)};
  expect_freed_at_final_event(stops, FinishReason::kStop, [](Engine&, RequestId, const TokenEvent&) {});
}

// An abort while the steps in flight hold the request (its KV is freed at their update): its final
// event waits for that, so a caller that sees it sees the resources freed, as for a stop.
TEST(EngineAsyncTest, AbortedRequestIsFreedWhenItsFinalEventArrives) {
  int n_tokens = 0;  // the loop thread's only
  bool aborted = false;
  expect_freed_at_final_event(ids_request(prompt_ids(21, 1), 40, 3), FinishReason::kAbort,
                              [&](Engine& e, RequestId id, const TokenEvent& ev) {
                                n_tokens += static_cast<int>(ev.token_ids.size());
                                if (n_tokens >= 3 && !aborted) {
                                  aborted = true;
                                  e.abort(id);  // from the engine thread, mid-decode
                                }
                              });
}

// Prompts longer than the step's token budget run in chunks beside the others' decodes: those steps
// are planned ahead too (a chunk's ids are the prompt's; one ending at a prompt's snapshot boundary
// takes its snapshot ahead as well), and every output is the synchronous loop's.
TEST(EngineAsyncTest, PromptChunksArePlannedAhead) {
  auto requests = [] {
    std::vector<Request> v;
    v.push_back(ids_request(prompt_ids(5, 1), 30, std::nullopt, 0.0f));  // decodes while the others prefill
    Request a = ids_request(prompt_ids(150, 2), 8, 91, 0.8f);
    a.sampling.logprobs = 2;
    v.push_back(a);
    v.push_back(ids_request(prompt_ids(97, 3), 8, 92, 1.0f));
    v.push_back(ids_request(prompt_ids(150, 2), 6, 93, 0.7f));  // request 1's prompt again
    return v;
  };
  EngineOptions o = testing::micro_options();
  o.max_num_batched_tokens = 24;  // 150 tokens: seven chunks or more
  const Outcome sync_run = run(requests(), false, 8, o);
  const Outcome async_run = run(requests(), true, 8, o);
  expect_same(async_run.outputs, sync_run.outputs);
  // All but the first few (measured: 29 of 30; 18 when only decodes and last chunks went ahead).
  EXPECT_GT(async_run.stats.n_steps, 20);
  EXPECT_GE(async_run.stats.n_steps_ahead, async_run.stats.n_steps - 3);
}

// Snapshots every block and chunks of a block: every prompt chunk takes a snapshot, so the chunk
// planned ahead takes the next one while the step in flight's is pending (two per sequence), and
// decodes crossing a boundary take theirs too; every output is the synchronous loop's, the same
// prompt again restores the deepest snapshot alike.
TEST(EngineAsyncTest, SnapshotsAtIntervalsArePlannedAheadToo) {
  auto requests = [] {
    std::vector<Request> v;
    v.push_back(ids_request(prompt_ids(100, 21), 40, 31, 0.8f));  // decodes across 112 and 128
    v.push_back(ids_request(prompt_ids(70, 22), 12, std::nullopt, 0.0f));
    return v;
  };
  EngineOptions o = testing::micro_options();
  o.max_num_batched_tokens = 16;
  o.snapshot_interval_tokens = 16;
  const Outcome sync_run = run(requests(), false, 8, o);
  const Outcome async_run = run(requests(), true, 8, o);
  expect_same(async_run.outputs, sync_run.outputs);
  // Measured: 42 of 46 steps ahead (37 when a second pending snapshot was refused): all but the
  // first and those after a decode that reaches a boundary (its key hashes the unknown token).
  EXPECT_GT(async_run.stats.n_steps, 40);
  EXPECT_GE(async_run.stats.n_steps_ahead, async_run.stats.n_steps - 4);
}

// A pool too small for every request at once, prompts longer than a step and repeated (prefix hits,
// snapshot restores): steps planned ahead decline where the pool would need a preemption, the
// synchronous steps between them preempt, and every output still equals the synchronous loop's.
TEST(EngineAsyncTest, PreemptionAndPrefixHitsBetweenStepsPlannedAhead) {
  auto requests = [] {
    std::vector<Request> v;
    for (int i = 0; i < 6; ++i) {
      // Requests 3-5 repeat the prompts of 0-2 with other seeds: prefix hits once those are cached.
      v.push_back(ids_request(prompt_ids(40 + 7 * (i % 3), 900 + i % 3), 20, 70 + i, i % 2 ? 0.8f : 0.0f));
    }
    return v;
  };
  EngineOptions o = testing::micro_options();
  o.kv_blocks = 10;  // 6 requests of up to 74 tokens (5 blocks of 16): preemptions
  o.max_num_batched_tokens = 24;
  const Outcome sync_run = run(requests(), false, 8, o);
  const Outcome async_run = run(requests(), true, 8, o);
  expect_same(async_run.outputs, sync_run.outputs);
  EXPECT_GT(async_run.stats.n_preemptions, 0);
  EXPECT_GT(async_run.stats.n_prefix_hit_tokens, 0);
  EXPECT_GT(async_run.stats.n_steps_ahead, async_run.stats.n_steps / 2);
}


// Penalties read the tokens generated so far: a step planned ahead counts the token the step before
// sampled where it is (AdjustRow::pending), so such rows are planned ahead too, and the outputs —
// repetition, frequency and presence penalties, with a logit bias on tokens the rows emit — are the
// synchronous loop's.
TEST(EngineAsyncTest, PenaltiesArePlannedAheadToo) {
  auto requests = [] {
    std::vector<Request> v;
    for (int i = 0; i < 4; ++i) {
      // The greedy rows favour one token by a bias and penalise it as it repeats, so that a count
      // off by one (the token the step before sampled) changes what they emit: row 0 takes token
      // 200 once (a repetition penalty of 50 then forbids it), row 2 takes token 100 until its
      // frequency and presence penalties outweigh the bias.
      Request r = ids_request(prompt_ids(15 + i, 10 + i), 20, 100 + i, i % 2 ? 0.9f : 0.0f);
      if (i == 0 || i == 3) r.sampling.repetition_penalty = i == 0 ? 50.0f : 0.7f;
      if (i >= 1) r.sampling.frequency_penalty = 2.0f;
      if (i == 0) r.sampling.logit_bias = {{200, 20.0f}};
      if (i == 2) r.sampling.logit_bias = {{100, 9.0f}};
      if (i == 2) r.sampling.presence_penalty = 2.0f;
      if (i == 3) r.sampling.logit_bias = {{prompt_ids(15, 1)[0], 3.0f}};
      v.push_back(r);
    }
    return v;
  };
  const Outcome sync_run = run(requests(), false);
  const Outcome async_run = run(requests(), true);
  expect_same(async_run.outputs, sync_run.outputs);
  EXPECT_GT(async_run.stats.n_steps_ahead, 5);  // 0 before the device counted the pending token
  ASSERT_EQ(sync_run.outputs.size(), 4u);
  const std::vector<int32_t>& row0 = sync_run.outputs[0].sequences.at(0).token_ids;
  const std::vector<int32_t>& row2 = sync_run.outputs[2].sequences.at(0).token_ids;
  EXPECT_EQ(std::count(row0.begin(), row0.end(), 200), 1);
  EXPECT_GE(std::count(row2.begin(), row2.end(), 100), 2);
}

// Aborts while a step and the one planned ahead of it hold the sequence: every resource is freed
// and the other requests finish as they would have.
TEST(EngineAsyncTest, AbortWhileTwoStepsAreInFlight) {
  EngineOptions o = testing::micro_options();
  o.async_scheduling = true;
  auto engine = testing::open_micro(o);
  ASSERT_NE(engine, nullptr);
  testing::EventLog log;
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = engine->submit(ids_request(prompt_ids(12 + i, 200 + i), 40, 300 + i), log.sink());
    ASSERT_TRUE(id.is_ok()) << id.status().to_string();
    ids.push_back(*id);
  }
  // Abort two requests once they have streamed a few tokens (the loop is mid-decode by then).
  for (int ms = 0; ms < 60000 && log.tokens(ids[1]).size() < 3; ++ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  engine->abort(ids[1]);
  engine->abort(ids[3]);
  ASSERT_TRUE(log.wait(4));
  EXPECT_EQ(log.finish(ids[0]), FinishReason::kLength);
  EXPECT_EQ(log.finish(ids[2]), FinishReason::kLength);
  EXPECT_EQ(log.tokens(ids[0]).size(), 40u);
  EXPECT_EQ(log.tokens(ids[2]).size(), 40u);
  engine->shutdown(/*drain=*/true);
  testing::expect_all_free(*engine);
  EXPECT_GT(engine->stats().n_steps_ahead, 0);
}

}  // namespace
}  // namespace deepinfer
