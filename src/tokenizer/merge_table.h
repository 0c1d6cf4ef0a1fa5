// MergeTable: (left id, right id) → (rank, merged id), the BPE hot-path lookup. An open-addressing
// table with linear probing over one flat array: no per-entry allocation, one or two cache lines
// per lookup. Built once at load, read-only afterwards (safe to share between threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepinfer::tokenizer {

struct Merge {
  uint32_t rank = kNoRank;  // lower merges first; kNoRank: the pair never merges
  int32_t merged_id = -1;
  static constexpr uint32_t kNoRank = UINT32_MAX;
};

class MergeTable {
 public:
  MergeTable() = default;
  explicit MergeTable(size_t n_merges);

  // Returns false if the pair was already present; the later entry replaces it, as HF
  // tokenizers and transformers.js both build their rank maps that way.
  bool insert(int32_t left, int32_t right, Merge merge);
  Merge find(int32_t left, int32_t right) const {
    if (slots_.empty()) return {};
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.merge;
      if (s.key == kEmpty) return {};
    }
  }
  size_t size() const { return n_entries_; }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge;
  };
  static uint64_t pack(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  size_t slot_of(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 0;
  size_t n_entries_ = 0;
};

}  // namespace deepinfer::tokenizer
