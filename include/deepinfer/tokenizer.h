// Public tokenizer API: byte-level BPE from an HF tokenizer.json (DeepSeek V3/V4 vocabulary plus
// the V4 special tokens), and a streaming detokenizer. Thread-safety: a loaded Tokenizer is
// immutable and may be shared by any number of threads (each encoding thread keeps a 512 KiB
// piece cache of its own); an IncrementalDetokenizer belongs to one request. Implemented in
// src/tokenizer; user guide: docs/tokenizer.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

class Tokenizer {
 public:
  // Loads an HF tokenizer.json (and the tokenizer_config.json beside it, if any, for BOS/EOS);
  // errors name the file and the offending entry. Non-byte-level files are UNIMPLEMENTED.
  static Result<std::shared_ptr<const Tokenizer>> load(const std::string& tokenizer_json_path);
  // The DeepSeek tokenizer that set-up prepares: $DEEPINFER_TOKENIZER if set, else
  // <source tree>/.cache/data/deepseek_v4/tokenizer.json (written by tools/prepare_data.sh, which
  // `./dev.sh build` runs). The error says where it looked and how to create it.
  static Result<std::shared_ptr<const Tokenizer>> load_default();

  virtual ~Tokenizer() = default;

  // Token ids of `text`; no BOS/EOS is added. With match_special=false, text that spells a special
  // token (e.g. "<｜User｜>") is tokenized as ordinary bytes: the only safe mode for untrusted
  // text. With true, every added token of the file is matched, leftmost and longest first.
  // Any bytes are accepted: ill-formed UTF-8 is tokenized byte by byte, never rejected.
  virtual std::vector<int32_t> encode(std::string_view text, bool match_special) const = 0;
  // The UTF-8 text of `ids` (special tokens as their text unless skip_special; unassigned ids
  // contribute nothing). Ill-formed UTF-8 inside becomes U+FFFD; an incomplete sequence at the
  // end is kept as raw bytes, so decoding a prefix of a generation never loses bytes.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = false) const = 0;

  // Number of ids (vocabulary plus added tokens; may be below the model's embedding rows).
  virtual int32_t n_vocab() const = 0;
  // Id of a token given its text form (a special token such as "<｜User｜>", or a vocabulary
  // piece in byte-level form); nullopt if there is none.
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // The raw bytes id stands for (for special tokens: their text); empty for unknown ids.
  virtual std::string token_bytes(int32_t id) const = 0;
  // True for every entry of the file's added_tokens (control tokens such as <｜User｜>,
  // <think>, the placeholders), whatever its "special" flag says.
  virtual bool is_special(int32_t id) const = 0;
  // From tokenizer_config.json beside the file, else DeepSeek's texts; -1 if not in the vocab.
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
};

// Turns a stream of token ids into UTF-8 text deltas that never split a multi-byte character:
// bytes of an incomplete sequence are held back until the sequence completes (or flush()).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                  bool skip_special = false);
  // Appends one token; returns the newly completed text (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is held back (invalid UTF-8 is replaced by U+FFFD), e.g. at end of stream.
  std::string flush();

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence
};

}  // namespace deepinfer
