// FakeTokenizer: a tiny Tokenizer for chat tests that needs no data files. Special tokens use the
// real DeepSeek V4 ids; other text becomes one id per byte (kByteBase + byte), except a few
// multi-byte pieces (longest match first) so that markup spans several bytes per token as it does
// with the real BPE. With match_special=true it splits on the special texts first, like HF.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "deepinfer/tokenizer.h"

namespace deepinfer::chat::testing {

class FakeTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kByteBase = 1000;
  static constexpr int32_t kPieceBase = 2000;

  // `pieces`: extra multi-byte tokens.
  explicit FakeTokenizer(std::vector<std::string> pieces = {});

  std::vector<int32_t> encode(std::string_view text, bool match_special) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const override;
  int32_t n_vocab() const override { return 129280; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string token_bytes(int32_t id) const override;
  bool is_special(int32_t id) const override { return id_to_special_.count(id) > 0; }
  int32_t bos_id() const override { return 0; }
  int32_t eos_id() const override { return 1; }

  // Ids of text encoded with specials matched (the reference tokenization of a prompt string).
  std::vector<int32_t> ids(std::string_view text) const { return encode(text, true); }

 private:
  void encode_plain(std::string_view text, std::vector<int32_t>* out) const;

  std::map<std::string, int32_t, std::less<>> special_to_id_;
  std::map<int32_t, std::string> id_to_special_;
  std::vector<std::string> pieces_;  // sorted longest first
};

// The special tokens of the DeepSeek V4/V4.1 vocabulary (text, id) the tests rely on.
const std::vector<std::pair<std::string, int32_t>>& deepseek_specials();

}  // namespace deepinfer::chat::testing
