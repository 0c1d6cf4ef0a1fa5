// Reads an HF tokenizer.json into TokenizerSpec: the plain data the BPE tokenizer is built from.
// Only the subset byte-level BPE tokenizers use is accepted (Split/ByteLevel pre-tokenizers,
// BPE model, ByteLevel decoder); anything else is an UNIMPLEMENTED error naming the file and the
// JSON path of the entry, never a silent difference. No BPE logic lives here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace deepinfer::tokenizer {

struct AddedTokenSpec {
  int32_t id = -1;
  std::string content;   // raw UTF-8 text, matched literally
  bool special = false;  // the file's "special" flag (kept for reference; see bpe_tokenizer.h)
  bool lstrip = false;   // matching also swallows the whitespace on its left
  bool rstrip = false;   // ... and on its right
};

// One `Split` pre-tokenizer with behavior Isolated: every match and every gap between matches
// becomes its own piece.
struct SplitSpec {
  std::string pattern;
  bool is_regex = true;  // false: {"String": ...}, matched literally
};

struct TokenizerSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;       // byte-level text → id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order (rank = index)
  std::vector<AddedTokenSpec> added_tokens;
  std::vector<SplitSpec> splits;  // applied in order, each re-splitting the previous pieces
  bool ignore_merges = false;     // BPE option: a piece that is a whole vocab entry skips merges
};

// `path` only names the file in error messages.
Result<TokenizerSpec> parse_tokenizer_json(std::string_view json_text, const std::string& path);

}  // namespace deepinfer::tokenizer
