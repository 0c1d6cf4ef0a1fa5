// MergeTable construction (see merge_table.h). The load factor stays at or below 1/2, so probe
// sequences are short and a miss (the common case in BPE) ends at an empty slot quickly.
#include "tokenizer/merge_table.h"

#include "base/check.h"

namespace deepinfer::tokenizer {

MergeTable::MergeTable(size_t n_merges) {
  size_t capacity = 16;
  int bits = 4;
  while (capacity < 2 * n_merges) {
    capacity *= 2;
    ++bits;
  }
  slots_.resize(capacity);
  mask_ = capacity - 1;
  shift_ = 64 - bits;
}

bool MergeTable::insert(int32_t left, int32_t right, Merge merge) {
  DI_CHECK(!slots_.empty() && 2 * (n_entries_ + 1) <= slots_.size(), "MergeTable sized too small");
  const uint64_t key = pack(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.merge = merge;
      return false;
    }
    if (s.key == kEmpty) {
      s.key = key;
      s.merge = merge;
      ++n_entries_;
      return true;
    }
  }
}

}  // namespace deepinfer::tokenizer
