// BpeCache: piece bytes → ids for short pre-tokens, so that frequent words skip the merge loop.
// Lock-free and bounded: every thread has its own direct-mapped table (kSlots slots of 64 bytes,
// allocated on the thread's first lookup) shared by all tokenizers that thread uses; a slot is
// tagged with its tokenizer's unique owner id, and a colliding insert simply overwrites. Only
// pieces of at most kMaxPieceBytes bytes and kMaxIds ids are cached: longer ones rarely repeat.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

class BpeCache {
 public:
  static constexpr size_t kMaxPieceBytes = 32;
  static constexpr size_t kMaxIds = 4;
  static constexpr size_t kSlots = 8192;  // 512 KiB per thread

  BpeCache();  // takes a fresh owner id: slots of other (or destroyed) tokenizers never match
  BpeCache(const BpeCache&) = delete;
  BpeCache& operator=(const BpeCache&) = delete;

  // Appends the cached ids of `piece` to `out` and returns true on a hit.
  bool lookup(std::string_view piece, std::vector<int32_t>& out) const;
  void insert(std::string_view piece, const int32_t* ids, size_t n_ids) const;

 private:
  uint64_t owner_;
};

}  // namespace deepinfer::tokenizer
