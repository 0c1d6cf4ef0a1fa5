// The idle engine gives the steps' host memory back (the CPU backend unmaps its workspace, the
// C library trims its arenas; docs/engine.md "Host memory after a burst"), and the steps after
// it compute exactly what a fresh engine computes.
#include <chrono>
#include <thread>

#include "engine_test_util.h"

namespace deepinfer {
namespace {

using testing::ids_request;
using testing::prompt_ids;

// Waits up to `timeout` for the idle loop's n-th release.
bool wait_for_releases(const Engine& engine, int64_t n, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (engine::debug_snapshot(engine).n_idle_memory_releases < n) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(EngineIdleTest, StepsAfterAnIdleReleaseComputeWhatAFreshEngineDoes) {
  std::vector<Request> second;
  second.push_back(ids_request(prompt_ids(40, 7), 12, 11));        // seeded sampling
  second.push_back(ids_request(prompt_ids(25, 8), 9, 3, 0.0f));    // greedy
  auto fresh = testing::open_micro();
  ASSERT_NE(fresh, nullptr);
  const auto expected = testing::generate_tokens(*fresh, second);
  ASSERT_EQ(expected.size(), 2u);

  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  std::vector<Request> first;
  first.push_back(ids_request(prompt_ids(60, 1), 16, 5));
  first.push_back(ids_request(prompt_ids(30, 2), 16, 6));
  testing::generate_tokens(*engine, first);
  ASSERT_TRUE(wait_for_releases(*engine, 1, std::chrono::seconds(10)))
      << "the engine did not release its host memory after going idle";
  EXPECT_EQ(testing::generate_tokens(*engine, second), expected);
  // Each busy spell is followed by one release, and an idle engine does not release again.
  ASSERT_TRUE(wait_for_releases(*engine, 2, std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(engine::debug_snapshot(*engine).n_idle_memory_releases, 2);
  testing::expect_all_free(*engine);
}

}  // namespace
}  // namespace deepinfer
