// kv::Manager scenarios with block_tokens = 4: admission, growth, commit, chained-hash sharing
// across sequences, LRU eviction after frees, snapshot restore vs replay start in both modes,
// speculative rollback, no-room results. check_integrity() after every mutation.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/manager.h"

namespace deepinfer::kv {
namespace {

using Ids = std::vector<BlockId>;
constexpr int32_t kBt = 4;

KvConfig small_config(int32_t n_blocks, int32_t n_slots = 4, int32_t n_snapshots = 0) {
  KvConfig c;
  c.block_tokens = kBt;
  c.n_blocks = n_blocks;
  c.n_state_slots = n_slots;
  c.n_snapshot_slots = n_snapshots;
  c.replay = ReplayConfig{.mode = ReplayMode::kBounded, .window = 2};
  return c;
}

std::vector<TokenId> iota_tokens(int32_t n, TokenId start) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

class ManagerTest : public ::testing::Test {
 protected:
  void make(KvConfig c) {
    Result<Manager> m = Manager::create(std::move(c));
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    kv_.emplace(std::move(m).value());
  }
  std::vector<BlockHash> hashes(const std::vector<TokenId>& tokens) const {
    std::vector<BlockHash> out;
    kv_->hasher().extend(tokens, kv_->hasher().root(0), &out);
    return out;
  }
  // Admits `seq` with its prefix match and runs it to `n_computed` tokens in one go.
  PrefixMatch run(SeqId seq, const std::vector<TokenId>& tokens, int32_t n_computed) {
    const std::vector<BlockHash> h = hashes(tokens);
    PrefixMatch m = kv_->match_prefix(h, static_cast<int32_t>(tokens.size()));
    EXPECT_TRUE(kv_->admit(seq, m, n_computed - m.replay_start).has_value());
    kv_->commit(seq, h, n_computed);
    kv_->end_step(seq);
    EXPECT_TRUE(kv_->check_integrity().is_ok()) << kv_->check_integrity().to_string();
    return m;
  }
  Ids table(SeqId seq) const { return Ids(kv_->block_table(seq).begin(), kv_->block_table(seq).end()); }
  void expect_ok() { EXPECT_TRUE(kv_->check_integrity().is_ok()) << kv_->check_integrity().to_string(); }

  std::optional<Manager> kv_;
};

TEST_F(ManagerTest, AdmitAllocateCommitFree) {
  make(small_config(8));
  const std::vector<TokenId> tokens = iota_tokens(10, 1);
  const PrefixMatch m = kv_->match_prefix(hashes(tokens), 10);
  EXPECT_EQ(m.n_tokens_cached, 0);
  EXPECT_EQ(kv_->admit(7, m, 6), 0) << "lowest state slot";
  EXPECT_EQ(table(7), (Ids{0, 1}));
  expect_ok();
  kv_->commit(7, hashes(tokens), 6);
  EXPECT_TRUE(kv_->block_pool().hash(0).has_value());
  EXPECT_FALSE(kv_->block_pool().hash(1).has_value()) << "block 1 holds only 2 computed positions";
  EXPECT_EQ(*kv_->allocate(7, 4), (Ids{2}));
  EXPECT_EQ(*kv_->allocate(7, 2), Ids{}) << "already covered";
  kv_->commit(7, hashes(tokens), 7);
  EXPECT_FALSE(kv_->block_pool().hash(1).has_value()) << "3 of 4 positions: still being written";
  kv_->commit(7, hashes(tokens), 10);
  EXPECT_TRUE(kv_->block_pool().hash(1).has_value());
  EXPECT_EQ(kv_->n_tokens_computed(7), 10);
  expect_ok();
  kv_->free(7);
  // Uncached block 2 first (reused at once), cached 1 then 0 at the tail (tail of prefix first).
  EXPECT_EQ(kv_->block_pool().free_list(), (Ids{2, 3, 4, 5, 6, 7, 1, 0}));
  EXPECT_EQ(kv_->n_free_state_slots(), 4);
  expect_ok();
}

TEST_F(ManagerTest, ChainedHashesShareOnlyIdenticalPrefixes) {
  make(small_config(12));
  const std::vector<TokenId> a = iota_tokens(13, 1);  // blocks [1..4] [5..8] [9..12] + 13
  run(1, a, 13);
  EXPECT_EQ(table(1), (Ids{0, 1, 2, 3}));

  std::vector<TokenId> b(a.begin(), a.begin() + 8);  // same first two blocks, then new tokens
  for (TokenId t : iota_tokens(6, 100)) b.push_back(t);
  const PrefixMatch mb = run(2, b, 14);
  EXPECT_EQ(mb.n_tokens_cached, 8);
  EXPECT_EQ(mb.blocks, (Ids{0, 1}));
  EXPECT_EQ(table(2), (Ids{0, 1, 4, 5}));
  EXPECT_EQ(kv_->block_pool().ref_count(0), 2);
  EXPECT_EQ(kv_->block_pool().ref_count(1), 2);
  EXPECT_EQ(kv_->block_pool().ref_count(2), 1);

  std::vector<TokenId> c = a;
  c[0] = 999;  // block 0 differs: blocks 1 and 2 have equal tokens but different parents
  const PrefixMatch mc = kv_->match_prefix(hashes(c), 13);
  EXPECT_EQ(mc.n_tokens_cached, 0);
  EXPECT_TRUE(mc.blocks.empty());
}

TEST_F(ManagerTest, MatchNeverCoversTheLastToken) {
  make(small_config(8));
  const std::vector<TokenId> a = iota_tokens(9, 1);
  run(1, a, 9);
  kv_->free(1);
  const std::vector<TokenId> same8(a.begin(), a.begin() + 8);
  EXPECT_EQ(kv_->match_prefix(hashes(same8), 8).n_tokens_cached, 4) << "8 tokens: one must run";
  EXPECT_EQ(kv_->match_prefix(hashes(a), 9).n_tokens_cached, 8);
  EXPECT_EQ(kv_->match_prefix(hashes(a), 1).n_tokens_cached, 0);
  EXPECT_EQ(kv_->match_prefix(std::span<const TokenId>(a), 0).n_tokens_cached, 8) << "token overload";
  EXPECT_EQ(kv_->match_prefix(std::span<const TokenId>(a), 5).n_tokens_cached, 0) << "another salt";
}

TEST_F(ManagerTest, FreedCachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  make(small_config(6));
  const std::vector<TokenId> a = iota_tokens(9, 1);   // blocks 0 1 (+2 partial)
  const std::vector<TokenId> b = iota_tokens(9, 50);  // blocks 3 4 (+5 partial)
  run(1, a, 9);
  run(2, b, 9);
  kv_->free(1);
  kv_->free(2);
  EXPECT_EQ(kv_->block_pool().free_list(), (Ids{5, 2, 1, 0, 4, 3}));
  // A new sequence needing three blocks takes the two uncached ones, then evicts a's tail (1).
  const std::vector<TokenId> c = iota_tokens(12, 200);
  run(3, c, 12);
  EXPECT_EQ(table(3), (Ids{5, 2, 1}));
  EXPECT_EQ(kv_->block_pool().n_evictions(), 1);
  EXPECT_EQ(kv_->match_prefix(hashes(a), 9).n_tokens_cached, 4) << "a keeps only block 0";
  EXPECT_EQ(kv_->match_prefix(hashes(b), 9).n_tokens_cached, 8);
  // A hit takes 3 and 4 off the free list (its third block evicts a's block 0); on free they
  // return to the tail as the most recently used.
  const PrefixMatch mb = run(4, b, 9);
  EXPECT_EQ(mb.blocks, (Ids{3, 4}));
  EXPECT_EQ(table(4), (Ids{3, 4, 0}));
  EXPECT_EQ(kv_->block_pool().n_evictions(), 2);
  kv_->free(4);
  EXPECT_EQ(kv_->block_pool().free_list(), (Ids{0, 4, 3}));
  expect_ok();
}

TEST_F(ManagerTest, AdmitCountsMatchedFreeBlocksAsUnavailable) {
  make(small_config(4));
  const std::vector<TokenId> a = iota_tokens(9, 1);
  run(1, a, 9);  // blocks 0 1 cached, 2 partial
  kv_->free(1);
  // Same 8-token prefix + 8 more: shares 0 and 1, which are free and cached; 4 free, 2 usable.
  std::vector<TokenId> b(a.begin(), a.begin() + 8);
  for (TokenId t : iota_tokens(8, 100)) b.push_back(t);
  const PrefixMatch m = kv_->match_prefix(hashes(b), 16);
  ASSERT_EQ(m.blocks, (Ids{0, 1}));
  ASSERT_EQ(m.replay_start, 6);
  EXPECT_FALSE(kv_->admit(2, m, 14).has_value()) << "20 positions: 3 new blocks, 2 usable";
  EXPECT_FALSE(kv_->contains(2));
  EXPECT_EQ(kv_->n_free_blocks(), 4);
  EXPECT_EQ(kv_->n_free_state_slots(), 4);
  expect_ok();
  EXPECT_TRUE(kv_->admit(2, m, 10).has_value()) << "16 positions: 2 shared + 2 new blocks";
  EXPECT_EQ(table(2), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(kv_->n_free_blocks(), 0);
  expect_ok();
}

TEST_F(ManagerTest, NoStateSlotMeansNoAdmission) {
  make(small_config(8, /*n_slots=*/1));
  EXPECT_EQ(kv_->admit(1, PrefixMatch{}, 4), 0);
  EXPECT_FALSE(kv_->admit(2, PrefixMatch{}, 4).has_value());
  EXPECT_EQ(kv_->n_free_blocks(), 7);
  kv_->free(1);
  EXPECT_EQ(kv_->admit(2, PrefixMatch{}, 4), 0);
  expect_ok();
}

TEST_F(ManagerTest, ReplayStartWithoutSnapshotBoundedAndExact) {
  KvConfig c = small_config(16);
  c.replay = ReplayConfig{.mode = ReplayMode::kBounded, .window = 3};
  make(c);
  const std::vector<TokenId> a = iota_tokens(17, 1);
  run(1, a, 17);
  const PrefixMatch bounded = kv_->match_prefix(hashes(a), 17);
  EXPECT_EQ(bounded.n_tokens_cached, 16);
  EXPECT_EQ(bounded.replay_start, 13);
  EXPECT_EQ(bounded.window_floor, 13);
  EXPECT_FALSE(bounded.snapshot.has_value());
  ASSERT_TRUE(kv_->admit(2, bounded, 4).has_value()) << "replays 13..16, then the last token";
  EXPECT_EQ(kv_->n_tokens_computed(2), 13);
  EXPECT_EQ(kv_->n_tokens_cached(2), 16);
  EXPECT_EQ(table(2).size(), 5u);
  expect_ok();

  c.replay = ReplayConfig{.mode = ReplayMode::kExact, .window = 3, .n_layers = 2, .max_overlap = 1};
  make(c);  // n_replay = 2·2 + 1 = 5
  run(1, a, 17);
  EXPECT_EQ(kv_->match_prefix(hashes(a), 17).replay_start, 11);
  EXPECT_EQ(kv_->match_prefix(hashes(std::vector<TokenId>(a.begin(), a.begin() + 5)), 5).replay_start, 0)
      << "H = 4 < 5: replay from the start, still sharing block 0";
}

TEST_F(ManagerTest, SnapshotRestoreBeatsReplayOnlyWhenNoMoreWork) {
  KvConfig c = small_config(16, 4, /*n_snapshots=*/2);
  c.replay = ReplayConfig{.mode = ReplayMode::kExact, .window = 3, .n_layers = 2, .max_overlap = 1};
  make(c);  // n_replay = 5
  const std::vector<TokenId> a = iota_tokens(17, 1);
  const std::vector<BlockHash> h = hashes(a);
  ASSERT_TRUE(kv_->admit(1, PrefixMatch{}, 8).has_value());
  EXPECT_EQ(kv_->reserve_snapshot(1, h[1], 8), 0);
  kv_->commit(1, h, 8);
  kv_->end_step(1);
  EXPECT_EQ(kv_->snapshot_pool().lookup(h[1]), 0) << "published: the step ended at the boundary";
  ASSERT_TRUE(kv_->allocate(1, 9).has_value());
  kv_->commit(1, h, 17);
  expect_ok();

  // Hit H = 16, R = 11 > 8: replaying 5 tokens is cheaper than restoring at 8 and running 8.
  PrefixMatch m = kv_->match_prefix(h, 17);
  EXPECT_EQ(m.replay_start, 11);
  EXPECT_FALSE(m.snapshot.has_value());
  // Hit H = 12 (a 13-token prefix), R = 7 ≤ 8: restore at 8 and run 4 exact tokens instead.
  m = kv_->match_prefix(h, 13);
  EXPECT_EQ(m.n_tokens_cached, 12);
  EXPECT_EQ(m.snapshot, 0);
  EXPECT_EQ(m.replay_start, 8);
  EXPECT_EQ(m.window_floor, 0) << "the snapshot's rings were built from position 0";
  ASSERT_TRUE(kv_->admit(2, m, 5).has_value());
  EXPECT_EQ(kv_->snapshot_pool().n_pins(0), 1);
  expect_ok();
  kv_->end_step(2);
  EXPECT_EQ(kv_->snapshot_pool().n_pins(0), 0);
  expect_ok();
}

TEST_F(ManagerTest, SnapshotIsCancelledWhenTheStepMissesItsBoundary) {
  make(small_config(8, 2, 1));
  const std::vector<BlockHash> h = hashes(iota_tokens(9, 1));
  ASSERT_TRUE(kv_->admit(1, PrefixMatch{}, 8).has_value());
  ASSERT_EQ(kv_->reserve_snapshot(1, h[1], 8), 0);
  EXPECT_FALSE(kv_->reserve_snapshot(1, h[0], 4).has_value()) << "a later step's boundary lies past the pending one's";
  kv_->commit(1, h, 6);
  kv_->end_step(1);
  EXPECT_EQ(kv_->snapshot_pool().state(0), SnapshotPool::SlotState::kFree);
  ASSERT_EQ(kv_->reserve_snapshot(1, h[1], 8), 0);
  kv_->free(1);
  EXPECT_EQ(kv_->snapshot_pool().state(0), SnapshotPool::SlotState::kFree) << "free cancels it";
  expect_ok();
}

// Asynchronous scheduling reserves a snapshot for a step planned ahead while the step before it is
// still to be updated: that update (keep_pending: it reserved none) leaves the snapshot pending, and
// the step that reserved it publishes it at its boundary.
TEST_F(ManagerTest, SnapshotOfAStepAheadSurvivesTheUpdateBefore) {
  make(small_config(8, 2, 1));
  const std::vector<BlockHash> h = hashes(iota_tokens(9, 1));
  ASSERT_TRUE(kv_->admit(1, PrefixMatch{}, 4).has_value());  // step n: [0, 4)
  ASSERT_TRUE(kv_->allocate(1, 8).has_value());              // the step ahead: [4, 8)
  ASSERT_EQ(kv_->reserve_snapshot(1, h[1], 8), 0);
  kv_->commit(1, h, 4);
  kv_->end_step(1, /*keep_pending=*/true);  // step n's update
  EXPECT_EQ(kv_->snapshot_pool().state(0), SnapshotPool::SlotState::kPending);
  expect_ok();
  kv_->commit(1, h, 8);
  kv_->end_step(1);  // the step ahead's update
  EXPECT_EQ(kv_->snapshot_pool().state(0), SnapshotPool::SlotState::kValid);
  EXPECT_EQ(kv_->snapshot_pool().lookup(h[1]), 0);
  expect_ok();
}

// A request whose step in flight takes a snapshot and whose step planned ahead takes the next
// (asynchronous scheduling over snapshot intervals): two pending, settled oldest first — each by
// its own step's update, the first one's update leaving the second pending — and no third.
TEST_F(ManagerTest, TwoPendingSnapshotsAreSettledInStepOrder) {
  make(small_config(8, 2, 4));
  const std::vector<BlockHash> h = hashes(iota_tokens(13, 1));
  ASSERT_TRUE(kv_->admit(1, PrefixMatch{}, 4).has_value());  // step n: [0, 4)
  ASSERT_TRUE(kv_->allocate(1, 8).has_value());              // the step ahead: [4, 8)
  ASSERT_EQ(kv_->reserve_snapshot(1, h[0], 4), 0);           // step n's
  ASSERT_EQ(kv_->reserve_snapshot(1, h[1], 8), 1);           // the step ahead's
  expect_ok();
  EXPECT_FALSE(kv_->reserve_snapshot(1, h[2], 12).has_value()) << "two pending at most";
  kv_->commit(1, h, 4);
  kv_->end_step(1);  // step n's update: its own published, the step ahead's still pending
  EXPECT_EQ(kv_->snapshot_pool().state(0), SnapshotPool::SlotState::kValid);
  EXPECT_EQ(kv_->snapshot_pool().state(1), SnapshotPool::SlotState::kPending);
  expect_ok();
  kv_->commit(1, h, 8);
  kv_->end_step(1);  // the step ahead's update
  EXPECT_EQ(kv_->snapshot_pool().state(1), SnapshotPool::SlotState::kValid);
  EXPECT_EQ(kv_->snapshot_pool().lookup(h[1]), 1);
  expect_ok();
  // A step that misses its boundary cancels its own only; free cancels the rest.
  ASSERT_TRUE(kv_->allocate(1, 8).has_value());  // [8, 16)
  ASSERT_EQ(kv_->reserve_snapshot(1, h[2], 12), 2);
  ASSERT_TRUE(kv_->reserve_snapshot(1, BlockHash{}, 16).has_value());
  kv_->commit(1, h, 11);
  kv_->end_step(1);
  EXPECT_EQ(kv_->snapshot_pool().state(2), SnapshotPool::SlotState::kFree);
  EXPECT_EQ(kv_->snapshot_pool().state(3), SnapshotPool::SlotState::kPending);
  expect_ok();
  kv_->free(1);
  EXPECT_EQ(kv_->snapshot_pool().state(3), SnapshotPool::SlotState::kFree);
  expect_ok();
}

TEST_F(ManagerTest, RollbackReleasesLookaheadBlocks) {
  make(small_config(8));
  const std::vector<TokenId> t = iota_tokens(7, 1);
  ASSERT_TRUE(kv_->admit(1, PrefixMatch{}, 6).has_value());
  kv_->commit(1, hashes(t), 6);
  // Decode with 4 draft tokens: positions 6..10 need blocks up to index 2.
  EXPECT_EQ(*kv_->allocate(1, 5), (Ids{2}));
  kv_->commit(1, hashes(t), 7);  // every draft rejected: positions 7..10 are invalid
  kv_->rollback(1, 7);
  EXPECT_EQ(table(1), (Ids{0, 1}));
  EXPECT_EQ(kv_->block_pool().free_list().front(), 2) << "an uncached released block is reused first";
  EXPECT_EQ(kv_->n_tokens_computed(1), 7);
  expect_ok();
}

TEST_F(ManagerTest, DisabledPrefixCachingNeverMatchesOrHashes) {
  KvConfig c = small_config(8, 2, 2);
  c.enable_prefix_caching = false;
  make(c);
  const std::vector<TokenId> a = iota_tokens(9, 1);
  run(1, a, 9);
  EXPECT_EQ(kv_->block_pool().n_cached(), 0);
  EXPECT_FALSE(kv_->reserve_snapshot(1, hashes(a)[1], 12).has_value());
  kv_->free(1);
  EXPECT_EQ(kv_->match_prefix(hashes(a), 9).n_tokens_cached, 0);
}

}  // namespace
}  // namespace deepinfer::kv
