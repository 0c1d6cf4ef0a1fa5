// AddedTokenMatcher (see added_tokens.h).
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// Start of the code point that ends just before `pos` (steps back over continuation bytes).
size_t previous_char_start(std::string_view text, size_t pos) {
  size_t p = pos - 1;
  while (p > 0 && (static_cast<uint8_t>(text[p]) & 0xC0) == 0x80 && pos - p < 4) --p;
  return p;
}

}  // namespace

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
  const auto& children = nodes_[node].children;
  const auto it = std::lower_bound(children.begin(), children.end(), byte,
                                   [](const auto& edge, uint8_t b) { return edge.first < b; });
  return it != children.end() && it->first == byte ? it->second : -1;
}

void AddedTokenMatcher::add(std::string_view content, int32_t id, bool lstrip, bool rstrip) {
  if (content.empty()) return;
  int32_t node = 0;
  for (char c : content) {
    const auto byte = static_cast<uint8_t>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& children = nodes_[node].children;
      children.insert(std::upper_bound(children.begin(), children.end(), std::make_pair(byte, -1)),
                      {byte, next});
    }
    node = next;
  }
  if (nodes_[node].token < 0) ++n_tokens_;
  // A repeated content keeps the later entry, as HF's added vocabulary does.
  nodes_[node].token = static_cast<int32_t>(tokens_.size());
  tokens_.push_back({id, lstrip, rstrip});
  first_byte_[static_cast<uint8_t>(content[0])] = true;
}

std::pair<size_t, int32_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    if (nodes_[node].token >= 0) best = {i + 1 - pos, nodes_[node].token};
  }
  return best;
}

std::optional<AddedTokenMatch> AddedTokenMatcher::find(std::string_view text, size_t from) const {
  if (n_tokens_ == 0) return std::nullopt;
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) continue;
    const auto [length, index] = longest_at(text, pos);
    if (length == 0) continue;
    const Token& token = tokens_[index];
    AddedTokenMatch match{pos, pos + length, token.id};
    uint32_t cp = 0;
    while (token.lstrip && match.begin > from) {
      const size_t start = previous_char_start(text, match.begin);
      if (start < from || decode_code_point(text, start, &cp) != match.begin - start ||
          !is_unicode_white_space(cp)) {
        break;
      }
      match.begin = start;
    }
    while (token.rstrip && match.end < text.size()) {
      const size_t len = decode_code_point(text, match.end, &cp);
      if (len == 0 || !is_unicode_white_space(cp)) break;
      match.end += len;
    }
    return match;
  }
  return std::nullopt;
}

}  // namespace deepinfer::tokenizer
