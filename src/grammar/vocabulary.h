// The grammar engine's view of a tokenizer: per-id byte strings, special flags, EOS, and the
// structures derived once per vocabulary: a flat preorder byte trie of the non-special tokens,
// "slices" (bitsets of tokens made only of JSON-safe characters, bucketed by character count,
// used to skip whole trie subtrees in wide states) and the cross-grammar cache of masks of leaf
// rule states. Immutable after create() except that cache, which is internally synchronized.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace deepinfer {
class Tokenizer;
}

namespace deepinfer::grammar {

struct StateMask;

// One node of a token trie, in preorder; node 0 is the root (no byte).
struct TrieNode {
  int32_t end;        // one past the last node of this subtree
  int32_t token;      // token whose bytes end here, or -1 (more in Vocabulary::next_duplicate)
  uint16_t depth;     // bytes from the root
  uint8_t byte;
  uint8_t min_slice;  // least slice length of the subtree's tokens, 0 if one is not a slice token
};

// Slice levels: U[l] = tokens of <= kSliceLengths[l] JSON-safe characters.
inline constexpr std::array<uint8_t, 16> kSliceLengths = {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 254};
inline constexpr uint8_t kUnboundedSlice = 255;

class Vocabulary {
 public:
  // token_bytes[i]: raw bytes of id i (empty = never allowed); special[i]: matched only by id.
  // n_tokens (>= token_bytes.size(), 0 = same) is the id range a bitmask covers: ids past the
  // tokenizer's (e.g. unused embedding rows) are never allowed.
  static Result<std::shared_ptr<const Vocabulary>> create(std::vector<std::string> token_bytes,
                                                          std::vector<uint8_t> special, int32_t eos_id,
                                                          int32_t n_tokens = 0);
  static Result<std::shared_ptr<const Vocabulary>> from_tokenizer(const Tokenizer& tokenizer,
                                                                  int32_t n_tokens = 0);
  ~Vocabulary();

  int32_t n_tokens() const { return n_tokens_; }
  int32_t n_words() const { return (n_tokens_ + 31) / 32; }
  std::string_view token_bytes(int32_t id) const {
    return id >= 0 && id < static_cast<int32_t>(bytes_.size()) ? std::string_view(bytes_[id]) : std::string_view();
  }
  bool is_special(int32_t id) const { return id >= 0 && id < static_cast<int32_t>(special_.size()) && special_[id]; }
  int32_t eos_id() const { return eos_id_; }
  // Id of a special token with exactly this text, or -1.
  int32_t find_special(std::string_view text) const;
  // Id of a token with exactly these bytes (non-special first), or -1.
  int32_t find_token(std::string_view bytes) const;

  const std::vector<TrieNode>& trie() const { return trie_; }
  // Bytes of the longest (non-special) token: no mask walk reads further from its state.
  int32_t max_token_bytes() const { return max_token_bytes_; }
  // The trie of the tokens outside slice `level` (all tokens for level -1): a walk that ORs in
  // the slice only needs to visit these.
  const std::vector<TrieNode>& rest_trie(int level) const { return level < 0 ? trie_ : rest_[level]; }
  int32_t next_duplicate(int32_t token) const { return dup_next_[token]; }
  uint8_t slice_length(int32_t token) const { return slice_len_[token]; }
  // Highest slice level usable in a state of the given slice depth, or -1.
  static int slice_level(uint8_t depth);
  const uint32_t* slice_bits(int level) const { return slices_[level].data(); }

  // Cross-grammar cache of leaf-rule state masks, keyed by the state's automaton digest.
  std::shared_ptr<const StateMask> find_shared(const std::array<uint64_t, 2>& key) const;
  void put_shared(const std::array<uint64_t, 2>& key, std::shared_ptr<const StateMask> mask) const;

 private:
  Vocabulary() = default;
  void build_trie();
  // A preorder trie of the given tokens, which must be sorted by bytes.
  std::vector<TrieNode> build_trie_of(const std::vector<int32_t>& sorted_ids) const;
  void build_slices();
  void build_rest_tries();

  int32_t n_tokens_ = 0;
  int32_t eos_id_ = -1;
  int32_t max_token_bytes_ = 0;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> special_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> dup_next_;
  std::vector<uint8_t> slice_len_;
  std::vector<std::vector<uint32_t>> slices_;
  std::array<std::vector<TrieNode>, kSliceLengths.size()> rest_;

  struct KeyHash {
    size_t operator()(const std::array<uint64_t, 2>& k) const { return k[0] ^ (k[1] * 0x9E3779B97F4A7C15ull); }
  };
  mutable std::mutex shared_mu_;
  mutable size_t shared_bytes_ = 0;  // StateMask::memory_bytes of shared_'s entries
  mutable std::unordered_map<std::array<uint64_t, 2>, std::shared_ptr<const StateMask>, KeyHash> shared_;
};

}  // namespace deepinfer::grammar
