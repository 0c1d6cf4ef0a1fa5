// ReasoningGatedMatcher (see reasoning_gate.h). EOS is masked while reasoning because an answer
// that never starts would satisfy no grammar: the request asked for constrained output, so the
// reasoning must end with `</think>` (or run into max_tokens, finish "length").
#include "engine/reasoning_gate.h"

#include <algorithm>

#include "base/status.h"

namespace deepinfer::engine {

Result<int32_t> reasoning_end_token(const Tokenizer& tokenizer) {
  const std::optional<int32_t> id = tokenizer.token_to_id("</think>");
  if (!id.has_value() || !tokenizer.is_special(*id)) {
    return invalid_argument("structured_output.after_reasoning: the tokenizer has no </think> special token "
                            "that could end the reasoning");
  }
  return *id;
}

ReasoningGatedMatcher::ReasoningGatedMatcher(std::unique_ptr<StructuredOutputMatcher> inner, int32_t reasoning_end,
                                             std::vector<int32_t> eos_ids, int32_t n_vocab)
    : inner_(std::move(inner)), reasoning_end_(reasoning_end), eos_ids_(std::move(eos_ids)), n_vocab_(n_vocab) {}

Status ReasoningGatedMatcher::fill_bitmask(std::span<uint32_t> words) {
  if (answering_) return inner_->fill_bitmask(words);
  std::fill(words.begin(), words.end(), 0xffffffffu);
  // Bits past the vocabulary stay clear, as the grammar's masks leave them.
  const int64_t n_bits = static_cast<int64_t>(words.size()) * 32;
  for (int64_t t = n_vocab_; t < n_bits; ++t) words[static_cast<size_t>(t >> 5)] &= ~(1u << (t & 31));
  for (int32_t eos : eos_ids_) {
    if (eos >= 0 && eos < n_bits) words[static_cast<size_t>(eos >> 5)] &= ~(1u << (eos & 31));
  }
  return Status::ok();
}

bool ReasoningGatedMatcher::accept(int32_t token) {
  if (answering_) {
    if (!inner_->accept(token)) return false;
    kinds_.push_back(2);
    return true;
  }
  if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) return false;
  if (token == reasoning_end_) answering_ = true;
  kinds_.push_back(answering_ ? 1 : 0);
  return true;
}

Status ReasoningGatedMatcher::rollback(int32_t n) {
  if (n < 0 || static_cast<size_t>(n) > kinds_.size()) {
    return invalid_argument("structured output: rollback of {} tokens, {} accepted", n, kinds_.size());
  }
  int32_t inner = 0;
  for (int32_t i = 0; i < n; ++i) {
    const uint8_t kind = kinds_.back();
    kinds_.pop_back();
    if (kind == 2) ++inner;
    if (kind == 1) answering_ = false;
  }
  return inner > 0 ? inner_->rollback(inner) : Status::ok();
}

}  // namespace deepinfer::engine
