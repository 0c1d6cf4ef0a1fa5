// Block pool: ref counts, LRU free list, write-once hashes (see block_pool.h).
#include "kv/block_pool.h"

#include "base/check.h"

namespace deepinfer::kv {

BlockPool::BlockPool(int32_t n_blocks) : blocks_(static_cast<size_t>(n_blocks)), free_(n_blocks) {
  // Fresh pool: ids in ascending order, so the first allocations are 0, 1, 2, ...
  for (BlockId b = 0; b < n_blocks; ++b) free_.push_back(b);
}

std::optional<std::vector<BlockId>> BlockPool::allocate(int32_t n) {
  DI_CHECK(n >= 0, "allocate({})", n);
  if (n > free_.size()) return std::nullopt;
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const BlockId b = free_.pop_front();
    Block& block = blocks_[static_cast<size_t>(b)];
    DI_CHECK(block.ref_count == 0, "free block {} has ref count {}", b, block.ref_count);
    if (block.hash) {
      by_hash_.erase(*block.hash);
      block.hash.reset();
      ++n_evictions_;
    }
    block.ref_count = 1;
    out.push_back(b);
  }
  return out;
}

void BlockPool::share(BlockId b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  DI_CHECK(block.hash.has_value(), "sharing uncached block {}", b);
  if (block.ref_count == 0) free_.remove(b);
  ++block.ref_count;
}

void BlockPool::release(BlockId b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  DI_CHECK(block.ref_count > 0, "releasing block {} with ref count {}", b, block.ref_count);
  if (--block.ref_count > 0) return;
  if (block.hash) {
    free_.push_back(b);
  } else {
    free_.push_front(b);
  }
}

bool BlockPool::register_hash(BlockId b, const BlockHash& hash) {
  Block& block = blocks_[static_cast<size_t>(b)];
  DI_CHECK(block.ref_count > 0, "registering a hash on free block {}", b);
  if (block.hash) {
    DI_CHECK(*block.hash == hash, "block {} already has a different hash (write-once)", b);
    return true;
  }
  if (by_hash_.contains(hash)) return false;
  block.hash = hash;
  by_hash_.emplace(hash, b);
  return true;
}

std::optional<BlockId> BlockPool::lookup(const BlockHash& hash) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

Status BlockPool::check_free_list() const {
  if (!free_.links_consistent()) return internal_error("block pool: free list links are corrupt");
  bool seen_cached = false;
  for (BlockId b : free_.to_vector()) {
    const Block& block = blocks_[static_cast<size_t>(b)];
    if (block.ref_count != 0) {
      return internal_error("block pool: block {} is on the free list with ref count {}", b,
                            block.ref_count);
    }
    if (block.hash) {
      seen_cached = true;
    } else if (seen_cached) {
      return internal_error("block pool: uncached free block {} sits after a cached one", b);
    }
  }
  return Status::ok();
}

Status BlockPool::check_integrity(std::span<const int32_t> expected_refs) const {
  if (expected_refs.size() != blocks_.size()) {
    return internal_error("block pool: {} expected ref counts for {} blocks", expected_refs.size(),
                          blocks_.size());
  }
  DI_RETURN_IF_ERROR(check_free_list());
  int64_t n_refs = 0, n_expected = 0;
  int32_t n_used = 0;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const Block& block = blocks_[b];
    if (block.ref_count != expected_refs[b]) {
      return internal_error("block pool: block {} has ref count {} but {} block-table references",
                            b, block.ref_count, expected_refs[b]);
    }
    if ((block.ref_count == 0) != free_.contains(static_cast<BlockId>(b))) {
      return internal_error("block pool: block {} ref count {} disagrees with free-list membership",
                            b, block.ref_count);
    }
    if (block.hash) {
      auto it = by_hash_.find(*block.hash);
      if (it == by_hash_.end() || it->second != static_cast<BlockId>(b)) {
        return internal_error("block pool: hash of block {} is not indexed to it", b);
      }
    }
    n_refs += block.ref_count;
    n_expected += expected_refs[b];
    n_used += block.ref_count > 0 ? 1 : 0;
  }
  if (n_refs != n_expected) {
    return internal_error("block pool: ref counts sum to {}, block tables hold {}", n_refs, n_expected);
  }
  if (n_used + free_.size() != n_blocks()) {
    return internal_error("block pool: {} used + {} free != {} blocks", n_used, free_.size(), n_blocks());
  }
  for (const auto& [hash, b] : by_hash_) {
    if (b < 0 || b >= n_blocks() || !blocks_[static_cast<size_t>(b)].hash ||
        !(*blocks_[static_cast<size_t>(b)].hash == hash)) {
      return internal_error("block pool: hash index points at block {} which does not hold it", b);
    }
  }
  return Status::ok();
}

}  // namespace deepinfer::kv
