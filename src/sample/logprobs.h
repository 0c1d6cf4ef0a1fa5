// Logprob helpers over one row of logits: log-sum-exp in fp64 (accumulated in id order, so the
// value never depends on the batch), the logprob of one token, and the top-N list.
// Used by the sampler (raw or processed mode) and by the engine for prompt logprobs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "deepinfer/sampling.h"

namespace deepinfer::sample {

// max + log Σ exp(l_i - max) over finite entries; -inf if none is finite.
double log_sum_exp(std::span<const float> logits);

// float(l_token - lse); -inf for a -inf logit or an empty row.
float token_logprob(std::span<const float> logits, double lse, int32_t token);

// The n most likely tokens (n <= logits.size()), sorted by logprob descending, ties by lower id.
// Tokens with -inf logits are included only when fewer than n are finite.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, double lse, int32_t n);

// 1-based rank of `token` in the top-n order above (value descending, lower id first among equals):
// 1 + the entries that come before it, so a token at index j of top_logprobs' list has rank j + 1.
// For prompt logprobs, whose token need not be in the list (Ops::token_rank_rows on a device).
int32_t token_rank(std::span<const float> logits, int32_t token);

// Logprob of `token` plus its top-n list, in one call (n = 0: empty list). For prompt logprobs:
// pass the raw logits at position i and the prompt token at i + 1.
struct LogprobResult {
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};
LogprobResult compute_logprobs(std::span<const float> logits, int32_t token, int32_t n_top);

}  // namespace deepinfer::sample
