// SnapshotPool life cycle and LRU eviction; ReplayPolicy start positions in both modes;
// SnapshotPolicy boundaries; KvConfig validation messages.
#include <gtest/gtest.h>

#include "kv/kv_config.h"
#include "kv/policies.h"
#include "kv/snapshot_pool.h"

namespace deepinfer::kv {
namespace {

BlockHash key(uint64_t v) { return BlockHash{v, v}; }
SnapshotInfo info(uint64_t v, int32_t n_tokens) { return SnapshotInfo{key(v), n_tokens, 0}; }

TEST(SnapshotPool, PendingIsInvisibleUntilPublished) {
  SnapshotPool pool(2);
  const std::optional<SnapshotId> s = pool.reserve(info(1, 256));
  ASSERT_EQ(s, 0);
  EXPECT_FALSE(pool.lookup(key(1)).has_value());
  EXPECT_FALSE(pool.reserve(info(1, 256)).has_value()) << "one slot per key, pending included";
  pool.publish(0);
  EXPECT_EQ(pool.lookup(key(1)), 0);
  EXPECT_EQ(pool.info(0).n_tokens, 256);
  EXPECT_EQ(pool.reserve(info(2, 512)), 1);
  pool.cancel(1);
  EXPECT_EQ(pool.state(1), SnapshotPool::SlotState::kFree);
  EXPECT_TRUE(pool.check_integrity({0, 0}).is_ok());
}

TEST(SnapshotPool, EvictsLeastRecentlyUsedUnpinnedValidSlot) {
  SnapshotPool pool(3);
  for (uint64_t k = 1; k <= 3; ++k) {
    ASSERT_TRUE(pool.reserve(info(k, 0)).has_value());
    pool.publish(static_cast<SnapshotId>(k - 1));
  }
  pool.pin(0);  // slot 0 (key 1) is being restored: most recently used, and not evictable
  EXPECT_EQ(pool.reserve(info(4, 0)), 1) << "slot 1 (key 2) is the LRU one";
  EXPECT_FALSE(pool.lookup(key(2)).has_value());
  EXPECT_EQ(pool.n_evictions(), 1);
  EXPECT_EQ(pool.reserve(info(5, 0)), 2) << "slot 1 is pending, slot 0 pinned: slot 2 goes";
  EXPECT_FALSE(pool.can_reserve(key(6))) << "pinned + two pending: nothing reclaimable";
  EXPECT_FALSE(pool.reserve(info(6, 0)).has_value());
  EXPECT_TRUE(pool.check_integrity({1, 0, 0}).is_ok());
  const Status bad = pool.check_integrity({0, 0, 0});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("slot 0 has 1 pins"), std::string::npos) << bad.to_string();
  pool.unpin(0);
  pool.publish(1);
  pool.publish(2);
  EXPECT_EQ(pool.reserve(info(6, 0)), 0) << "unpinned now, and least recently used";
}

TEST(ReplayPolicy, BoundedReplaysOneWindow) {
  ReplayPolicy p(ReplayConfig{.mode = ReplayMode::kBounded, .window = 128});
  EXPECT_EQ(p.n_replay_tokens(), 128);
  EXPECT_EQ(p.replay_start(0), 0);
  EXPECT_EQ(p.replay_start(100), 0);
  EXPECT_EQ(p.replay_start(256), 128);
  EXPECT_EQ(p.replay_start(4096), 3968);
  ReplayPolicy v41(ReplayConfig{.mode = ReplayMode::kBounded, .window = 128, .n_extra_tokens = 12});
  EXPECT_EQ(v41.replay_start(1024), 1024 - 140);
}

TEST(ReplayPolicy, ExactReplaysTheReceptiveField) {
  // V4-Flash: 43 layers + 1 MTP layer, W = 128, overlapped ratio-4 compressor.
  ReplayPolicy p(ReplayConfig{.mode = ReplayMode::kExact, .window = 128, .n_layers = 44, .max_overlap = 4});
  EXPECT_EQ(p.n_replay_tokens(), 44 * 127 + 4);
  EXPECT_EQ(p.replay_start(5000), 0);
  EXPECT_EQ(p.replay_start(8192), 8192 - 5592);
  ReplayPolicy aligned(ReplayConfig{.mode = ReplayMode::kExact, .window = 8, .n_layers = 3,
                                    .max_overlap = 4, .align_tokens = 4});
  EXPECT_EQ(aligned.n_replay_tokens(), 25);
  EXPECT_EQ(aligned.replay_start(64), 36) << "39 rounded down to a multiple of 4";
}

TEST(SnapshotPolicy, NextBoundaryPicksTheFirstWantedBoundaryInRange) {
  SnapshotPolicy p(SnapshotConfig{.at_prompt_end = true, .at_hit_boundary = true, .interval_tokens = 0}, 256);
  // Prompt of 1000 tokens: the deepest same-prompt hit is 768.
  EXPECT_EQ(p.next_boundary(0, 1000, 1000, 0), 768);
  EXPECT_EQ(p.next_boundary(0, 700, 1000, 0), 0) << "outside this chunk";
  EXPECT_EQ(p.next_boundary(768, 1000, 1000, 0), 0) << "already passed";
  EXPECT_EQ(p.next_boundary(384, 1000, 1000, 512), 512) << "hit boundary comes first";
  EXPECT_EQ(p.next_boundary(0, 256, 256, 0), 0) << "a one-block prompt has no inner boundary";
  SnapshotPolicy interval(SnapshotConfig{.at_prompt_end = false, .at_hit_boundary = false, .interval_tokens = 512}, 256);
  EXPECT_EQ(interval.next_boundary(511, 512, 100, 0), 512);
  EXPECT_EQ(interval.next_boundary(512, 1023, 100, 0), 0);
  EXPECT_EQ(interval.next_boundary(600, 2000, 100, 0), 1024);
}

TEST(KvConfig, ValidationNamesTheField) {
  KvConfig c{.block_tokens = 256, .n_blocks = 8, .n_state_slots = 2, .compress_ratios = {0, 0, 4, 128}};
  EXPECT_TRUE(validate_kv_config(c).is_ok());
  c.compress_ratios.push_back(3);
  const Status s = validate_kv_config(c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("compress_ratios[4] = 3"), std::string::npos) << s.to_string();
  c.compress_ratios.pop_back();
  c.snapshot.interval_tokens = 300;
  EXPECT_NE(validate_kv_config(c).message().find("interval_tokens"), std::string::npos);
  c.snapshot.interval_tokens = 0;
  c.n_state_slots = 0;
  EXPECT_NE(validate_kv_config(c).message().find("n_state_slots"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::kv
