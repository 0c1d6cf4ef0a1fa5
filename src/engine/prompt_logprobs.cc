// PromptLogprobs (see prompt_logprobs.h).
#include "engine/prompt_logprobs.h"

#include "base/check.h"

namespace deepinfer::engine {

PromptLogprobs::PromptLogprobs(std::span<const int32_t> prompt, int32_t n_top)
    : prompt_(prompt.begin(), prompt.end()),
      n_top_(n_top),
      entries_(prompt.empty() ? 0 : prompt.size() - 1),
      recorded_(entries_.size(), 0) {}

int32_t PromptLogprobs::next_token(int32_t position) const {
  const auto next = static_cast<size_t>(position) + 1;
  return position >= 0 && next < prompt_.size() ? prompt_[next] : -1;
}

void PromptLogprobs::record(int32_t position, float logprob, int32_t rank, std::span<const int32_t> top_ids,
                            std::span<const float> top_logprobs) {
  DI_CHECK(position >= 0 && static_cast<size_t>(position) < recorded_.size(),
           "prompt logprobs: row {} of a {}-token prompt", position, prompt_.size());
  DI_CHECK(top_ids.size() >= static_cast<size_t>(n_top_) && top_logprobs.size() == top_ids.size(),
           "prompt logprobs: {} top entries for n = {}", top_ids.size(), n_top_);
  const auto p = static_cast<size_t>(position);
  if (recorded_[p] != 0) return;  // a recompute (preemption) of a row recorded (maybe taken) before
  TokenLogprobs& e = entries_[p];
  e.token = prompt_[p + 1];
  e.logprob = logprob;
  e.rank = rank;
  for (size_t j = 0; j < static_cast<size_t>(n_top_); ++j) {
    if (top_ids[j] >= 0) e.top.push_back(TokenLogprob{top_ids[j], top_logprobs[j]});
  }
  recorded_[p] = 1;
  ++n_recorded_;
}

std::vector<TokenLogprobs> PromptLogprobs::take() {
  DI_CHECK(ready(), "prompt logprobs taken with {} of {} rows recorded", n_recorded_, recorded_.size());
  taken_ = true;
  return std::move(entries_);
}

}  // namespace deepinfer::engine
