// BPE core: turns the bytes of one pre-token into vocabulary ids by applying merges lowest rank
// first, leftmost first among equal ranks (HF tokenizers' and transformers.js' order). Short
// pieces use a scan over stack arrays; long ones (e.g. a 10k-space run) a min segment tree, so
// the cost stays O(n log n). No caching and no text handling here; thread-safe (per-thread
// scratch buffers, no shared mutable state).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/merge_table.h"

namespace deepinfer::tokenizer {

class BpeModel {
 public:
  BpeModel() = default;
  // byte_ids[b]: id of the single-byte token b (every byte must have one).
  // whole_tokens: raw bytes → id, only used when ignore_merges is set (else may be empty).
  BpeModel(std::array<int32_t, 256> byte_ids, MergeTable merges, bool ignore_merges,
           std::unordered_map<std::string, int32_t> whole_tokens);

  // Appends the ids of `piece` (non-empty) to `out`.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  size_t n_merges() const { return merges_.size(); }

 private:
  // Longest piece for the O(n^2) stack-array loop; measured faster than the tree up to here.
  static constexpr size_t kMaxShortBytes = 64;
  void merge_short(std::string_view piece, std::vector<int32_t>& out) const;
  void merge_long(std::string_view piece, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_ids_{};
  MergeTable merges_;
  bool ignore_merges_ = false;
  std::unordered_map<std::string, int32_t> whole_tokens_;
};

}  // namespace deepinfer::tokenizer
