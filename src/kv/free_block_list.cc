// Intrusive free list of block ids (see free_block_list.h).
#include "kv/free_block_list.h"

#include "base/check.h"

namespace deepinfer::kv {

FreeBlockList::FreeBlockList(int32_t n_blocks)
    : n_blocks_(n_blocks),
      prev_(static_cast<size_t>(n_blocks) + 2, kNoId),
      next_(static_cast<size_t>(n_blocks) + 2, kNoId),
      in_list_(static_cast<size_t>(n_blocks), 0) {
  next_[static_cast<size_t>(head())] = tail();
  prev_[static_cast<size_t>(tail())] = head();
}

BlockId FreeBlockList::front() const {
  return size_ == 0 ? kNoId : next_[static_cast<size_t>(head())];
}

void FreeBlockList::link_after(int32_t at, BlockId b) {
  DI_CHECK(b >= 0 && b < n_blocks_, "block {} out of range [0, {})", b, n_blocks_);
  DI_CHECK(!contains(b), "block {} is already on the free list", b);
  const int32_t after = next_[static_cast<size_t>(at)];
  prev_[static_cast<size_t>(b)] = at;
  next_[static_cast<size_t>(b)] = after;
  next_[static_cast<size_t>(at)] = b;
  prev_[static_cast<size_t>(after)] = b;
  in_list_[static_cast<size_t>(b)] = 1;
  ++size_;
}

void FreeBlockList::push_front(BlockId b) { link_after(head(), b); }

void FreeBlockList::push_back(BlockId b) { link_after(prev_[static_cast<size_t>(tail())], b); }

void FreeBlockList::remove(BlockId b) {
  DI_CHECK(b >= 0 && b < n_blocks_ && contains(b), "block {} is not on the free list", b);
  const int32_t p = prev_[static_cast<size_t>(b)];
  const int32_t n = next_[static_cast<size_t>(b)];
  next_[static_cast<size_t>(p)] = n;
  prev_[static_cast<size_t>(n)] = p;
  prev_[static_cast<size_t>(b)] = kNoId;
  next_[static_cast<size_t>(b)] = kNoId;
  in_list_[static_cast<size_t>(b)] = 0;
  --size_;
}

BlockId FreeBlockList::pop_front() {
  DI_CHECK(size_ > 0, "pop_front on an empty free list");
  const BlockId b = next_[static_cast<size_t>(head())];
  remove(b);
  return b;
}

std::vector<BlockId> FreeBlockList::to_vector() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(size_));
  for (int32_t b = next_[static_cast<size_t>(head())]; b != tail() && b >= 0;
       b = next_[static_cast<size_t>(b)]) {
    out.push_back(b);
    if (static_cast<int32_t>(out.size()) > n_blocks_) break;  // a cycle: stop, the caller reports
  }
  return out;
}

bool FreeBlockList::links_consistent() const {
  int32_t n_forward = 0;
  int32_t prev = head();
  for (int32_t b = next_[static_cast<size_t>(head())]; b != tail(); b = next_[static_cast<size_t>(b)]) {
    if (b < 0 || b >= n_blocks_ || !contains(b) || prev_[static_cast<size_t>(b)] != prev) return false;
    if (++n_forward > n_blocks_) return false;
    prev = b;
  }
  if (prev_[static_cast<size_t>(tail())] != prev || n_forward != size_) return false;
  int32_t n_members = 0;
  for (uint8_t m : in_list_) n_members += m;
  return n_members == size_;
}

}  // namespace deepinfer::kv
