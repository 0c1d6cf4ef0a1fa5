// Cancellation and failure paths of the engine on the micro model: abort mid-prefill, mid-decode
// and while waiting ends with exactly one kAbort event and frees everything (integrity checked
// after every step); shutdown with and without drain; a failing forward ends the affected
// requests with kError and the engine keeps serving.
#include <atomic>

#include "engine_test_util.h"

namespace deepinfer {
namespace {

using testing::EventLog;
using testing::ids_request;
using testing::prompt_ids;

int count_final(EventLog& log, RequestId id) {
  std::lock_guard<std::mutex> lock(log.mu);
  int n = 0;
  for (const TokenEvent& e : log.events[id]) n += e.finish.has_value() ? 1 : 0;
  return n;
}

TEST(EngineAbortTest, AbortMidPrefillEndsWithAbortAndFreesEverything) {
  EngineOptions o = testing::micro_options();
  o.max_num_batched_tokens = 16;  // a 150-token prompt takes 10 steps
  std::atomic<Engine*> self{nullptr};
  std::atomic<RequestId> victim{0};
  std::atomic<bool> aborted_in_prefill{false};
  engine::DebugOptions debug;
  debug.on_plan = [&](const sched::BatchPlan& plan) {
    for (const sched::SeqPlan& sp : plan.seqs) {
      if (sp.first_position >= 48 && !sp.needs_logits && !aborted_in_prefill.exchange(true)) {
        self.load()->abort(victim.load());
      }
    }
  };
  auto engine = testing::open_micro(o, debug);
  ASSERT_NE(engine, nullptr);
  self = engine.get();
  EventLog log;
  auto id = engine->submit(ids_request(prompt_ids(150, 1), 5, 1), log.sink());
  ASSERT_TRUE(id.is_ok());
  victim = *id;
  ASSERT_TRUE(log.wait(1));
  EXPECT_TRUE(aborted_in_prefill.load());
  EXPECT_EQ(log.finish(*id), FinishReason::kAbort);
  EXPECT_TRUE(log.tokens(*id).empty());
  EXPECT_EQ(count_final(log, *id), 1);
  EXPECT_EQ(engine->stats().n_requests_aborted, 1);
  testing::expect_all_free(*engine);
}

TEST(EngineAbortTest, AbortMidDecodeKeepsTheTokensSoFar) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  EventLog log;
  Engine* e = engine.get();
  std::atomic<RequestId> victim{0};
  std::atomic<int> seen{0};
  auto sink = [&, inner = log.sink()](const TokenEvent& ev) {
    inner(ev);
    if (!ev.token_ids.empty() && ++seen == 3) e->abort(victim.load());  // from the engine thread
  };
  Request other = ids_request(prompt_ids(20, 3), 30, 2);
  auto other_id = engine->submit(other, log.sink());
  auto id = engine->submit(ids_request(prompt_ids(20, 2), 100, 1), sink);
  ASSERT_TRUE(id.is_ok() && other_id.is_ok());
  victim = *id;
  ASSERT_TRUE(log.wait(2));
  EXPECT_EQ(log.finish(*id), FinishReason::kAbort);
  const auto got = log.tokens(*id);
  EXPECT_GE(got.size(), 3u);
  EXPECT_LT(got.size(), 100u);
  EXPECT_EQ(count_final(log, *id), 1);
  EXPECT_EQ(log.finish(*other_id), FinishReason::kLength);  // the neighbour is untouched
  EXPECT_EQ(log.tokens(*other_id).size(), 30u);
  testing::expect_all_free(*engine);
}

TEST(EngineAbortTest, AbortWhileWaitingAndUnknownIds) {
  EngineOptions o = testing::micro_options();
  o.max_num_seqs = 1;
  auto engine = testing::open_micro(o);
  ASSERT_NE(engine, nullptr);
  EventLog log;
  auto first = engine->submit(ids_request(prompt_ids(30, 5), 40, 1), log.sink());
  auto second = engine->submit(ids_request(prompt_ids(30, 6), 40, 2), log.sink());
  ASSERT_TRUE(first.is_ok() && second.is_ok());
  engine->abort(*second);
  engine->abort(987654);  // unknown: not an error
  ASSERT_TRUE(log.wait(2));
  EXPECT_EQ(log.finish(*second), FinishReason::kAbort);
  EXPECT_TRUE(log.tokens(*second).empty());
  EXPECT_EQ(log.finish(*first), FinishReason::kLength);
  engine->abort(*first);  // finished already: ignored
  testing::expect_all_free(*engine);
}

TEST(EngineAbortTest, AbortOfNSamplesEndsEverySample) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  EventLog log;
  Request r = ids_request(prompt_ids(300, 8), 50, 4);
  r.sampling.n = 3;
  auto id = engine->submit(r, log.sink());
  ASSERT_TRUE(id.is_ok());
  engine->abort(*id);
  ASSERT_TRUE(log.wait(3));
  for (int32_t s = 0; s < 3; ++s) EXPECT_EQ(log.finish(*id, s), FinishReason::kAbort);
  EXPECT_EQ(count_final(log, *id), 3);
  testing::expect_all_free(*engine);
}

TEST(EngineAbortTest, ShutdownWithoutDrainAbortsAndRejectsNewRequests) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  EventLog log;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->submit(ids_request(prompt_ids(40, i), 200, i), log.sink()).is_ok());
  engine->shutdown(/*drain=*/false);
  EXPECT_EQ(log.n_finished, 3);
  for (auto& [id, evs] : log.events) EXPECT_EQ(evs.back().finish, FinishReason::kAbort);
  auto late = engine->submit(ids_request(prompt_ids(5, 1), 2, 1), log.sink());
  ASSERT_FALSE(late.is_ok());
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition);
  testing::expect_all_free(*engine);
}

TEST(EngineAbortTest, ShutdownWithDrainFinishesEverything) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  EventLog log;
  std::vector<RequestId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(*engine->submit(ids_request(prompt_ids(40, i), 6, i), log.sink()));
  engine->shutdown(/*drain=*/true);
  EXPECT_EQ(log.n_finished, 3);
  for (RequestId id : ids) EXPECT_EQ(log.tokens(id).size(), 6u);
  testing::expect_all_free(*engine);
}

TEST(EngineAbortTest, FailedForwardFailsTheStepsRequestsAndTheEngineRecovers) {
  engine::DebugOptions debug;
  debug.fail_forward_at_step = 2;
  auto engine = testing::open_micro(testing::micro_options(), debug);
  ASSERT_NE(engine, nullptr);
  auto outs = engine->generate({ids_request(prompt_ids(30, 1), 8, 1), ids_request(prompt_ids(31, 2), 8, 2)});
  ASSERT_TRUE(outs.is_ok());
  for (const GenerateOutput& o : *outs) {
    EXPECT_EQ(o.sequences[0].finish, FinishReason::kError);
    EXPECT_NE(o.sequences[0].error.find("injected forward failure"), std::string::npos) << o.sequences[0].error;
  }
  testing::expect_all_free(*engine);
  auto again = testing::generate_tokens(*engine, {ids_request(prompt_ids(30, 1), 8, 1)});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].size(), 8u);
  testing::expect_all_free(*engine);
}

}  // namespace
}  // namespace deepinfer
