// BlockPool: history block ids with ref counts, an LRU free list and the prefix-cache index.
// Invariants (checked by check_integrity): a block is on the free list iff its ref count is 0;
// a hash is written once, when every position of the block is computed, and stays until the
// block is evicted by a later allocation; one block per hash. Free-list order is eviction
// order: uncached free blocks (worthless) sit before cached ones, cached ones in LRU order.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kv/free_block_list.h"
#include "kv/types.h"

namespace deepinfer::kv {

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Free blocks, including cached ones that an allocation may evict.
  int32_t n_free() const { return free_.size(); }
  int32_t n_cached() const { return static_cast<int32_t>(by_hash_.size()); }
  int64_t n_evictions() const { return n_evictions_; }

  // Takes n blocks from the head of the free list (ref count 1); a cached block taken this way
  // loses its hash (eviction). nullopt when fewer than n are free; nothing changes then.
  std::optional<std::vector<BlockId>> allocate(int32_t n);
  // Adds a reference to a block found through lookup(); a free cached block leaves the list.
  void share(BlockId b);
  // Drops a reference. At zero the block goes to the free list: cached blocks to the tail
  // (most recently used), uncached ones to the head (reused first).
  void release(BlockId b);
  // Write-once hash of a fully computed, referenced block. Returns false (and leaves the block
  // uncached) when another block already holds `hash`: two sequences computed the same prefix.
  bool register_hash(BlockId b, const BlockHash& hash);
  std::optional<BlockId> lookup(const BlockHash& hash) const;

  int32_t ref_count(BlockId b) const { return blocks_[static_cast<size_t>(b)].ref_count; }
  const std::optional<BlockHash>& hash(BlockId b) const { return blocks_[static_cast<size_t>(b)].hash; }
  bool is_free(BlockId b) const { return free_.contains(b); }
  std::vector<BlockId> free_list() const { return free_.to_vector(); }

  // Checks the pool's own invariants and that ref_count(b) == expected_refs[b] for every block.
  Status check_integrity(std::span<const int32_t> expected_refs) const;

 private:
  struct Block {
    int32_t ref_count = 0;
    std::optional<BlockHash> hash;
  };
  Status check_free_list() const;

  std::vector<Block> blocks_;
  FreeBlockList free_;
  std::unordered_map<BlockHash, BlockId, BlockHashHasher> by_hash_;
  int64_t n_evictions_ = 0;
};

}  // namespace deepinfer::kv
