// BpeTokenizer: the Tokenizer implementation (include/deepinfer/tokenizer.h) for byte-level BPE
// tokenizer.json files. encode = [added-token split] → Split pre-tokenizers → bytes → BPE per
// piece (cached); decode = concatenated token bytes, made valid UTF-8 (see utf8.h).
// "Special" here means every entry of added_tokens, whatever its "special" flag: DeepSeek's
// files mark role tokens such as <｜User｜> non-special, yet for the engine they are control
// tokens (skipped by skip_special, never produced from user text with match_special=false).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "deepinfer/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_cache.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace deepinfer::tokenizer {

class BpeTokenizer final : public Tokenizer {
 public:
  // Upper bound on ids, so a corrupt file cannot make us allocate gigabytes.
  static constexpr int64_t kMaxVocab = 1 << 24;

  // `path` names the file in error messages. bos/eos are looked up by text when given.
  static Result<std::shared_ptr<const BpeTokenizer>> build(const TokenizerSpec& spec,
                                                           const std::string& path,
                                                           const std::string& bos_text,
                                                           const std::string& eos_text);

  std::vector<int32_t> encode(std::string_view text, bool match_special) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  int32_t n_vocab() const override { return static_cast<int32_t>(kinds_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string token_bytes(int32_t id) const override;
  bool is_special(int32_t id) const override { return kind(id) == Kind::kAdded; }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }

  // Public only for std::make_shared; use build().
  struct PrivateTag {};
  explicit BpeTokenizer(PrivateTag) {}

 private:
  enum class Kind : uint8_t { kUnassigned = 0, kVocab, kAdded };
  Kind kind(int32_t id) const { return id >= 0 && id < n_vocab() ? kinds_[id] : Kind::kUnassigned; }
  Status build_ids(const TokenizerSpec& spec, const std::string& path);
  Status build_bpe(const TokenizerSpec& spec, const std::string& path);
  void encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const;

  PreTokenizer pre_tokenizer_;
  BpeModel bpe_;
  BpeCache cache_;
  AddedTokenMatcher added_;
  std::vector<std::string> bytes_;  // raw bytes of each id ("" if unassigned)
  std::vector<Kind> kinds_;
  std::unordered_map<std::string, int32_t> vocab_ids_;  // byte-level text → id
  std::unordered_map<std::string, int32_t> added_ids_;  // content → id
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
};

}  // namespace deepinfer::tokenizer
