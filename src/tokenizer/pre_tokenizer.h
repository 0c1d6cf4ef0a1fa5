// The Split pre-tokenizers of a tokenizer.json, compiled with PCRE2 (UTF + Unicode properties +
// JIT). Each Split re-splits every piece of the previous one, and its pattern only ever sees that
// piece: lookaheads such as \s+(?!\S) stop at the piece's end, as in HF tokenizers. Invalid UTF-8
// never matches any pattern (PCRE2_MATCH_INVALID_UTF), so stray bytes become pieces of their own.
// Thread-safe: split() is const and keeps its match state per call.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer_json.h"

namespace deepinfer::tokenizer {

class PreTokenizer {
 public:
  // `path` names the tokenizer file in compile errors.
  static Result<PreTokenizer> create(const std::vector<SplitSpec>& splits, const std::string& path);

  PreTokenizer();  // no Split steps: the whole text is one piece
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the pieces of `text` to `pieces` (views into `text`): non-empty, in order, and
  // concatenating to `text`.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

 private:
  struct Compiled;
  void split_level(size_t level, std::string_view piece,
                   std::vector<std::string_view>& pieces) const;

  std::vector<std::unique_ptr<Compiled>> levels_;
};

}  // namespace deepinfer::tokenizer
