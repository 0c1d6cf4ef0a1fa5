// Reasoning-aware structured output (StructuredOutput::after_reasoning): a matcher decorator that
// leaves the reasoning free — every token but EOS allowed, nothing fed to the grammar — until the
// `</think>` special token, then delegates to the grammar's matcher for the answer.
// Invariant: the inner matcher sees exactly the tokens after the first `</think>`.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "deepinfer/tokenizer.h"
#include "engine/structured_output.h"

namespace deepinfer::engine {

// The id of the tokenizer's `</think>` special token; INVALID_ARGUMENT naming
// structured_output.after_reasoning when there is none.
Result<int32_t> reasoning_end_token(const Tokenizer& tokenizer);

class ReasoningGatedMatcher final : public StructuredOutputMatcher {
 public:
  // `eos_ids` are masked off while reasoning; n_vocab is the bitmask's vocabulary (model rows).
  ReasoningGatedMatcher(std::unique_ptr<StructuredOutputMatcher> inner, int32_t reasoning_end,
                        std::vector<int32_t> eos_ids, int32_t n_vocab);

  Status fill_bitmask(std::span<uint32_t> words) override;
  bool accept(int32_t token) override;
  bool is_terminated() const override { return answering_ && inner_->is_terminated(); }
  Status rollback(int32_t n) override;

  bool answering() const { return answering_; }  // `</think>` was accepted

 private:
  std::unique_ptr<StructuredOutputMatcher> inner_;
  int32_t reasoning_end_;
  std::vector<int32_t> eos_ids_;
  int32_t n_vocab_;
  bool answering_ = false;
  // Per accepted token: 0 reasoning (free), 1 the `</think>` that started the answer, 2 fed to
  // the inner matcher — what rollback() undoes.
  std::vector<uint8_t> kinds_;
};

}  // namespace deepinfer::engine
