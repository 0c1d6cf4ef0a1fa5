// BlockPool, FreeBlockList and BlockHasher: exact ids, ref counts, free-list (eviction) order,
// write-once hashes, and the chained hash's prefix sensitivity.
#include <gtest/gtest.h>

#include <vector>

#include "kv/block_hasher.h"
#include "kv/block_pool.h"

namespace deepinfer::kv {
namespace {

using Ids = std::vector<BlockId>;

BlockHash h(uint64_t v) { return BlockHash{v, ~v}; }

Status check(const BlockPool& pool, const std::vector<int32_t>& refs) { return pool.check_integrity(refs); }

TEST(FreeBlockList, PushPopRemoveKeepOrder) {
  FreeBlockList list(5);
  list.push_back(2);
  list.push_back(4);
  list.push_front(0);
  list.push_back(1);
  EXPECT_EQ(list.to_vector(), (Ids{0, 2, 4, 1}));
  list.remove(4);
  EXPECT_EQ(list.to_vector(), (Ids{0, 2, 1}));
  EXPECT_EQ(list.pop_front(), 0);
  EXPECT_EQ(list.front(), 2);
  EXPECT_EQ(list.size(), 2);
  EXPECT_TRUE(list.contains(1));
  EXPECT_FALSE(list.contains(4));
  EXPECT_TRUE(list.links_consistent());
}

TEST(BlockPool, FreshPoolAllocatesAscendingIds) {
  BlockPool pool(6);
  EXPECT_EQ(pool.n_free(), 6);
  EXPECT_EQ(*pool.allocate(3), (Ids{0, 1, 2}));
  EXPECT_EQ(pool.free_list(), (Ids{3, 4, 5}));
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_TRUE(check(pool, {1, 1, 1, 0, 0, 0}).is_ok());
  EXPECT_FALSE(pool.allocate(4).has_value()) << "only 3 free";
  EXPECT_EQ(pool.n_free(), 3) << "a failed allocation changes nothing";
}

TEST(BlockPool, UncachedFreesGoToHeadCachedToTailInReleaseOrder) {
  BlockPool pool(6);
  ASSERT_TRUE(pool.allocate(4).has_value());  // 0 1 2 3
  EXPECT_TRUE(pool.register_hash(0, h(10)));
  EXPECT_TRUE(pool.register_hash(1, h(11)));
  // Released last block first, as the Manager does.
  for (BlockId b : {3, 2, 1, 0}) pool.release(b);
  // Uncached 2, 3 are reused first (in table order); cached 1 before 0 (tail of a prefix goes first).
  EXPECT_EQ(pool.free_list(), (Ids{2, 3, 4, 5, 1, 0}));
  EXPECT_TRUE(check(pool, {0, 0, 0, 0, 0, 0}).is_ok());
  EXPECT_EQ(pool.n_cached(), 2);
}

TEST(BlockPool, AllocationEvictsLeastRecentlyUsedCachedBlock) {
  BlockPool pool(3);
  ASSERT_TRUE(pool.allocate(3).has_value());
  for (BlockId b : {0, 1, 2}) EXPECT_TRUE(pool.register_hash(b, h(100 + b)));
  pool.release(1);
  pool.release(0);
  pool.release(2);
  EXPECT_EQ(pool.free_list(), (Ids{1, 0, 2}));
  EXPECT_EQ(*pool.allocate(1), (Ids{1}));
  EXPECT_FALSE(pool.lookup(h(101)).has_value()) << "block 1 was evicted with its hash";
  EXPECT_FALSE(pool.hash(1).has_value());
  EXPECT_EQ(pool.n_evictions(), 1);
  EXPECT_EQ(*pool.lookup(h(100)), 0);
  EXPECT_TRUE(check(pool, {0, 1, 0}).is_ok());
}

TEST(BlockPool, ShareTakesCachedBlockOutOfTheMiddleOfTheFreeList) {
  BlockPool pool(4);
  ASSERT_TRUE(pool.allocate(3).has_value());
  for (BlockId b : {0, 1, 2}) EXPECT_TRUE(pool.register_hash(b, h(b)));
  for (BlockId b : {2, 1, 0}) pool.release(b);
  EXPECT_EQ(pool.free_list(), (Ids{3, 2, 1, 0}));
  pool.share(*pool.lookup(h(1)));
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.free_list(), (Ids{3, 2, 0}));
  pool.share(1);
  EXPECT_EQ(pool.ref_count(1), 2);
  pool.release(1);
  EXPECT_EQ(pool.free_list(), (Ids{3, 2, 0})) << "still referenced once";
  pool.release(1);
  EXPECT_EQ(pool.free_list(), (Ids{3, 2, 0, 1})) << "most recently used goes to the tail";
  EXPECT_TRUE(check(pool, {0, 0, 0, 0}).is_ok());
}

TEST(BlockPool, HashesAreWriteOnceAndUnique) {
  BlockPool pool(3);
  ASSERT_TRUE(pool.allocate(2).has_value());
  EXPECT_TRUE(pool.register_hash(0, h(7)));
  EXPECT_TRUE(pool.register_hash(0, h(7))) << "re-registering the same hash is a no-op";
  EXPECT_FALSE(pool.register_hash(1, h(7))) << "a duplicate prefix stays uncached";
  EXPECT_FALSE(pool.hash(1).has_value());
  EXPECT_EQ(*pool.lookup(h(7)), 0);
  pool.release(1);
  EXPECT_EQ(pool.free_list(), (Ids{1, 2}));
}

TEST(BlockPool, IntegrityNamesTheBlockWhoseRefCountDisagrees) {
  BlockPool pool(3);
  ASSERT_TRUE(pool.allocate(2).has_value());
  const Status s = check(pool, {1, 2, 0});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("block 1 has ref count 1 but 2"), std::string::npos) << s.to_string();
  EXPECT_FALSE(check(pool, {1, 1}).is_ok());
}

TEST(BlockHasher, ChainDependsOnTheWholePrefixSaltAndSeed) {
  const BlockHasher hasher(4, 42);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<TokenId> b = {0, 2, 3, 4, 5, 6, 7, 8};  // differs only in block 0
  std::vector<BlockHash> ha, hb;
  hasher.extend(a, hasher.root(0), &ha);
  hasher.extend(b, hasher.root(0), &hb);
  ASSERT_EQ(ha.size(), 2u) << "only full blocks are hashed";
  ASSERT_EQ(hb.size(), 2u);
  EXPECT_NE(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]) << "same block-1 tokens, different parent";
  EXPECT_EQ(ha[1], hasher.chain(ha[0], std::span(a).subspan(4, 4)));

  std::vector<BlockHash> incremental;
  hasher.extend(std::span(a).first(5), hasher.root(0), &incremental);
  EXPECT_EQ(incremental.size(), 1u);
  hasher.extend(a, hasher.root(0), &incremental);
  EXPECT_EQ(incremental, ha) << "extending block by block equals hashing at once";

  std::vector<BlockHash> salted, reseeded;
  hasher.extend(a, hasher.root(99), &salted);
  BlockHasher(4, 43).extend(a, BlockHasher(4, 43).root(0), &reseeded);
  EXPECT_NE(salted[0], ha[0]);
  EXPECT_NE(reseeded[0], ha[0]);
  EXPECT_EQ(hasher.root(0), BlockHash{});
}

}  // namespace
}  // namespace deepinfer::kv
