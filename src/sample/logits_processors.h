// The individual steps of the sampling pipeline, each an in-place transform of ONE row of fp32
// logits (one sequence). Removed tokens become -inf; no step ever turns -inf back into a
// finite value, which is why masks, min_tokens suppression and logit_bias commute. Nothing here
// looks at another row, so any composition of these steps is batch-invariant.
// The order in which Sampler applies them is the contract in sampler.h.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <span>

#include "sample/token_history.h"

namespace deepinfer::sample {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Words of a token bitmask row: ceil(n_vocab / 32).
constexpr int64_t bitmask_words(int64_t n_vocab) { return (n_vocab + 31) / 32; }
// Bit (token % 32) of word (token / 32), i.e. little-endian bit order within each word.
inline bool bitmask_allows(std::span<const uint32_t> bitmask, int32_t token) {
  return (bitmask[token >> 5] >> (token & 31)) & 1u;
}

// NaN becomes -inf and +inf becomes the largest float, so later arithmetic
// (subtracting the max, dividing by temperature) stays free of NaN.
void sanitize_logits(std::span<float> logits);

// logits[id] += bias for each entry; ids outside the row are ignored (validated upstream).
void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias);

// Tokens whose bit is clear become -inf. bitmask has bitmask_words(logits.size()) words.
void apply_token_bitmask(std::span<float> logits, std::span<const uint32_t> bitmask);

// Tokens not listed become -inf (no-op for an empty list).
void apply_allowed_token_ids(std::span<float> logits, std::span<const int32_t> allowed);

// min_tokens: the listed ids become -inf, unless that would leave no finite logit (e.g. a
// grammar that can only end here), in which case nothing changes. Returns whether it applied.
bool suppress_stop_tokens(std::span<float> logits, std::span<const int32_t> stop_ids);

// vLLM penalties, in this order: repetition (seen tokens: positive logits divided by it,
// non-positive multiplied), then frequency (minus penalty × output count), then presence
// (minus penalty once per output token). All arithmetic in fp32.
void apply_penalties(std::span<float> logits, const TokenHistory& history,
                     float repetition_penalty, float presence_penalty, float frequency_penalty);

// Lowest id among the largest logits; -1 if no logit is finite.
int32_t argmax_lowest_id(std::span<const float> logits);

// z = (logits - max) / temperature, so the top logit becomes exactly 0 and a tiny temperature
// underflows the rest to -inf instead of overflowing. temperature > 0. Returns false (and
// leaves the row) if no logit is finite.
bool apply_temperature(std::span<float> logits, float temperature);

// Keeps every token whose logit is >= the k-th largest finite logit (ties at the boundary are
// all kept); k <= 0 or k >= number of finite logits is a no-op.
void apply_top_k(std::span<float> logits, int32_t k);

// Nucleus: with p_i = softmax(logits), keeps every token whose logit is >= t*, where t* is the
// largest logit value such that the mass of {i : logit_i >= t*} reaches top_p (mass summed in
// fp64 over tokens sorted by logit descending, id ascending; compared as mass >= top_p × total).
// Ties at the boundary are all kept. top_p >= 1 is a no-op; if rounding keeps the total mass
// below top_p × total, everything is kept.
void apply_top_p(std::span<float> logits, float top_p);

// Keeps tokens with exp(logit_i - max) >= min_p (fp64), i.e. p_i >= min_p × p_max; the
// normalisation cancels, so it is independent of earlier renormalisations. 0 = no-op.
void apply_min_p(std::span<float> logits, float min_p);

// Largest finite logit, or -inf if none.
float max_finite(std::span<const float> logits);

}  // namespace deepinfer::sample
