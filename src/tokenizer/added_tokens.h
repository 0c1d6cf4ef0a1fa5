// AddedTokenMatcher: finds added/special tokens (e.g. "<｜User｜>") in raw text, leftmost first
// and longest at that position (HF's leftmost-longest rule), with the optional lstrip/rstrip
// whitespace swallowing. A byte trie; a first-byte table skips most text without touching it.
// Immutable after build; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::tokenizer {

struct AddedTokenMatch {
  size_t begin = 0;  // includes whitespace swallowed by lstrip
  size_t end = 0;    // includes whitespace swallowed by rstrip
  int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  void add(std::string_view content, int32_t id, bool lstrip, bool rstrip);
  bool empty() const { return n_tokens_ == 0; }

  // The first match starting at or after `from`; lstrip never reaches before `from`.
  std::optional<AddedTokenMatch> find(std::string_view text, size_t from) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                 // index into tokens_ if a token ends here
  };
  struct Token {
    int32_t id;
    bool lstrip;
    bool rstrip;
  };
  int32_t child(int32_t node, uint8_t byte) const;
  // Length of the longest token starting at text[pos], and its index; 0 if none.
  std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;

  std::vector<Node> nodes_{Node{}};
  std::vector<Token> tokens_;
  std::array<bool, 256> first_byte_{};
  size_t n_tokens_ = 0;
};

}  // namespace deepinfer::tokenizer
