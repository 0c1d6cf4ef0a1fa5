// Bad words (SamplingParams::bad_words, vLLM's semantics): their token sequences, and a matcher
// decorator that bans the last token of a sequence wherever the output so far ends with the
// tokens before it. As a StructuredOutputMatcher it rides on the grammar machinery: the mask is
// computed from the tokens the host has taken in (a row's sampling waits for them when planned
// ahead), drafts are verified row after row and checked against it, rollback undoes them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/tokenizer.h"
#include "engine/structured_output.h"

namespace deepinfer::engine {

// Each word tokenized without special tokens, leading blanks dropped; plus, as vLLM does, the
// same with one leading space where that gives a different first token and the same length (the
// word in the middle of a text). Ids outside [0, n_vocab) are dropped with their sequence.
std::vector<std::vector<int32_t>> bad_word_token_ids(std::span<const std::string> words, const Tokenizer& tokenizer,
                                                     int32_t n_vocab);

class BadWordsMatcher final : public StructuredOutputMatcher {
 public:
  // `inner`: the request's grammar matcher, or null (every token allowed but the banned ones).
  BadWordsMatcher(std::unique_ptr<StructuredOutputMatcher> inner, std::vector<std::vector<int32_t>> words,
                  int32_t n_vocab);

  Status fill_bitmask(std::span<uint32_t> words) override;
  bool accept(int32_t token) override;
  bool is_terminated() const override { return inner_ != nullptr && inner_->is_terminated(); }
  Status rollback(int32_t n) override;

 private:
  std::unique_ptr<StructuredOutputMatcher> inner_;
  std::vector<std::vector<int32_t>> words_;
  int32_t n_vocab_;
  std::vector<int32_t> output_;  // every token accepted so far
};

}  // namespace deepinfer::engine
