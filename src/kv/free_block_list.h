// FreeBlockList: intrusive doubly linked list over block ids, in eviction order (head first).
// Intrusive (prev/next arrays indexed by block id) so that a prefix-cache hit can pull a free
// cached block out of the middle in O(1), which a std::deque cannot do. Holds no block state
// other than membership; BlockPool decides where a block goes (head or tail).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/types.h"

namespace deepinfer::kv {

class FreeBlockList {
 public:
  explicit FreeBlockList(int32_t n_blocks);

  int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(BlockId b) const { return in_list_[static_cast<size_t>(b)] != 0; }
  BlockId front() const;  // kNoId when empty

  void push_front(BlockId b);
  void push_back(BlockId b);
  void remove(BlockId b);
  BlockId pop_front();

  // Head-to-tail order; for tests, integrity checks and debug dumps.
  std::vector<BlockId> to_vector() const;
  // True when the forward and backward walks agree with size() and membership flags.
  bool links_consistent() const;

 private:
  // Sentinels live after the real blocks: index n is the head, n + 1 the tail.
  int32_t head() const { return n_blocks_; }
  int32_t tail() const { return n_blocks_ + 1; }
  void link_after(int32_t at, BlockId b);

  int32_t n_blocks_;
  int32_t size_ = 0;
  std::vector<int32_t> prev_;
  std::vector<int32_t> next_;
  std::vector<uint8_t> in_list_;
};

}  // namespace deepinfer::kv
