// PromptLogprobs: one sequence's prompt logprobs (SamplingParams::prompt_logprobs, vLLM's
// semantics) gathered while its prompt chunks run. Row p of the prompt (p < n_prompt - 1) is the
// distribution of the token at p + 1: its logprob, rank and the top N, reduced on the model's device
// in the step that computed the row (ModelRunner::launch_prompt_logprobs), so no [vocab] logits row
// outlives its step. Entries arrive by position, a chunk at a time; a sequence preempted and
// recomputed records the same rows again (its first record stands). Engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer::engine {

class PromptLogprobs {
 public:
  // `prompt`: the sequence's prompt ids; n_top: SamplingParams::prompt_logprobs (0..20).
  PromptLogprobs(std::span<const int32_t> prompt, int32_t n_top);

  int32_t n_top() const { return n_top_; }
  // The prompt token whose logprob row `position` gives (position + 1's), -1 past the prompt.
  int32_t next_token(int32_t position) const;
  // Row `position`'s reduction: the token's logprob and rank, and a top list of at least n_top()
  // entries (ids -1: fewer tokens than that), of which the first n_top() are kept.
  void record(int32_t position, float logprob, int32_t rank, std::span<const int32_t> top_ids,
              std::span<const float> top_logprobs);
  // Every row recorded (a one-token prompt has none) and not taken yet.
  bool ready() const { return !taken_ && n_recorded_ == static_cast<int32_t>(recorded_.size()); }
  // The entries for prompt tokens 1 .. n_prompt - 1 (TokenEvent::prompt_logprobs), once ready().
  std::vector<TokenLogprobs> take();

 private:
  std::vector<int32_t> prompt_;
  int32_t n_top_ = 0;
  std::vector<TokenLogprobs> entries_;  // [n_prompt - 1]: entry p is row p's (prompt token p + 1)
  std::vector<uint8_t> recorded_;       // [n_prompt - 1]
  int32_t n_recorded_ = 0;
  bool taken_ = false;
};

}  // namespace deepinfer::engine
