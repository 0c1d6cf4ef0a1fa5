// The step-graph cache policy (src/ops/graph_cache.h) without a GPU: record on the second sight,
// replay after, failed recordings stay eager, least recently used graphs are evicted and handed
// back, and eviction-driven recordings are throttled when shapes cycle through a full cache.
#include "ops/graph_cache.h"

#include <gtest/gtest.h>

namespace deepinfer::ops {
namespace {

using D = GraphCache::Decision;

void* handle(uintptr_t i) { return reinterpret_cast<void*>(i); }

TEST(GraphCacheTest, RecordsOnTheSecondSightAndReplaysAfter) {
  GraphCache cache({});
  void* g = nullptr;
  EXPECT_EQ(cache.decide(7, &g), D::kEager);
  EXPECT_EQ(cache.decide(7, &g), D::kRecord);
  EXPECT_EQ(cache.store(7, handle(70)), nullptr);
  EXPECT_EQ(cache.decide(7, &g), D::kReplay);
  EXPECT_EQ(g, handle(70));
  EXPECT_EQ(cache.decide(8, &g), D::kEager);  // another signature starts over
}

TEST(GraphCacheTest, AFailedRecordingStaysEager) {
  GraphCache cache({});
  void* g = nullptr;
  cache.decide(1, &g);
  ASSERT_EQ(cache.decide(1, &g), D::kRecord);
  cache.store(1, nullptr);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(cache.decide(1, &g), D::kEager);
}

TEST(GraphCacheTest, EvictsTheLeastRecentlyUsedAndHandsItBack) {
  GraphCache cache({.max_graphs = 2, .evict_interval = 1});
  void* g = nullptr;
  for (uint64_t s : {1, 2}) {
    cache.decide(s, &g);
    ASSERT_EQ(cache.decide(s, &g), D::kRecord);
    cache.store(s, handle(s * 10));
  }
  ASSERT_EQ(cache.decide(1, &g), D::kReplay);  // 2 is now the least recently used
  cache.decide(3, &g);
  ASSERT_EQ(cache.decide(3, &g), D::kRecord);
  EXPECT_EQ(cache.store(3, handle(30)), handle(20));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.decide(1, &g), D::kReplay);
  EXPECT_EQ(cache.decide(3, &g), D::kReplay);
  EXPECT_NE(cache.decide(2, &g), D::kReplay);
}

TEST(GraphCacheTest, ThrottlesRecordingsWhenShapesCycleThroughAFullCache) {
  GraphCache cache({.max_graphs = 2, .evict_interval = 64});
  void* g = nullptr;
  int recorded = 0, steps = 0;
  for (int round = 0; round < 100; ++round) {
    for (uint64_t s = 1; s <= 5; ++s) {  // five shapes, room for two
      ++steps;
      if (cache.decide(s, &g) == D::kRecord) {
        ++recorded;
        cache.store(s, handle(s));
      }
    }
  }
  // Two recordings fill the cache; after that at most one per 64 steps.
  EXPECT_LE(recorded, 2 + steps / 64 + 1);
  EXPECT_GE(recorded, 3);  // recordings still happen, just rarely
}

TEST(GraphCacheTest, ClearHandsBackEveryGraph) {
  GraphCache cache({});
  void* g = nullptr;
  for (uint64_t s : {1, 2, 3}) {
    cache.decide(s, &g);
    cache.decide(s, &g);
    cache.store(s, s == 2 ? nullptr : handle(s));
  }
  auto all = cache.clear();
  EXPECT_EQ(all.size(), 2u);  // the failed recording holds no graph
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.decide(1, &g), D::kRecord);  // seen before: recorded again at once
}

}  // namespace
}  // namespace deepinfer::ops
