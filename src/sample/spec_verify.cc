// Speculative verification rules (contracts in spec_verify.h).
#include "sample/spec_verify.h"

#include <algorithm>
#include <cmath>

#include "base/status.h"
#include "sample/keyed_noise.h"
#include "sample/logits_processors.h"
#include "sample/sampler.h"

namespace deepinfer::sample {

int32_t sample_weights(std::span<const float> w, uint64_t seed, NoiseStream stream, int64_t position) {
  std::vector<float> log_w(w.size());  // [n_vocab]
  for (size_t i = 0; i < w.size(); ++i) log_w[i] = w[i] > 0.0f ? std::log(w[i]) : kNegInf;
  return gumbel_argmax(log_w, seed, stream, position);
}

Result<VerifyResult> verify_rejection(std::span<const float> target_probs,
                                      std::span<const int32_t> draft_tokens,
                                      std::span<const float> draft_probs, int32_t n_vocab,
                                      uint64_t seed, int64_t first_position) {
  const size_t k = draft_tokens.size();
  const auto v = static_cast<size_t>(n_vocab);
  if (n_vocab <= 0 || target_probs.size() != (k + 1) * v) {
    return invalid_argument("verify: target_probs has {} values, expected (k + 1) * n_vocab = {}",
                            target_probs.size(), (k + 1) * v);
  }
  if (!draft_probs.empty() && draft_probs.size() != k * v) {
    return invalid_argument("verify: draft_probs has {} values, expected k * n_vocab = {}",
                            draft_probs.size(), k * v);
  }
  for (size_t i = 0; i < k; ++i) {
    if (draft_tokens[i] < 0 || draft_tokens[i] >= n_vocab) {
      return invalid_argument("verify: draft token {} = {} is outside [0, {})", i,
                              draft_tokens[i], n_vocab);
    }
  }
  VerifyResult result;
  for (size_t i = 0; i < k; ++i) {
    std::span<const float> q = draft_probs.empty() ? std::span<const float>() : draft_probs.subspan(i * v, v);
    const RowVerdict row = verify_rejection_row(target_probs.subspan(i * v, v), draft_tokens[i], q, seed,
                                                first_position + static_cast<int64_t>(i));
    result.tokens.push_back(row.token);
    if (!row.accepted) return result;
    ++result.n_accepted;
  }
  result.tokens.push_back(sample_weights(target_probs.subspan(k * v, v), seed,
                                         NoiseStream::kToken, first_position + static_cast<int64_t>(k)));
  return result;
}

RowVerdict verify_rejection_row(std::span<const float> p, int32_t x, std::span<const float> q, uint64_t seed,
                                int64_t position) {
  const float q_x = q.empty() ? 1.0f : q[static_cast<size_t>(x)];
  const double u = noise_uniform(seed, NoiseStream::kSpecAccept, position, x);
  if (u * q_x < p[static_cast<size_t>(x)]) return RowVerdict{true, x};
  return RowVerdict{false, sample_residual(p, x, q, seed, position)};
}

int32_t sample_residual(std::span<const float> p, int32_t x, std::span<const float> q, uint64_t seed,
                        int64_t position) {
  std::vector<float> residual(p.size());  // [n_vocab]
  for (size_t t = 0; t < p.size(); ++t) {
    const float q_t = q.empty() ? (t == static_cast<size_t>(x) ? 1.0f : 0.0f) : q[t];
    residual[t] = std::max(p[t] - q_t, 0.0f);
  }
  const int32_t correction = sample_weights(residual, seed, NoiseStream::kSpecResidual, position);
  // An all-zero residual only arises from rounding (p == q); p itself is then the right law.
  return correction != kNoToken ? correction : sample_weights(p, seed, NoiseStream::kSpecResidual, position);
}

Result<VerifyResult> verify_by_match(std::span<const int32_t> target_tokens,
                                     std::span<const int32_t> draft_tokens) {
  if (target_tokens.size() != draft_tokens.size() + 1) {
    return invalid_argument("verify: {} target tokens for {} drafts, expected k + 1",
                            target_tokens.size(), draft_tokens.size());
  }
  VerifyResult result;
  for (size_t i = 0; i < draft_tokens.size(); ++i) {
    if (draft_tokens[i] != target_tokens[i]) break;
    result.tokens.push_back(draft_tokens[i]);
    ++result.n_accepted;
  }
  result.tokens.push_back(target_tokens[result.n_accepted]);
  return result;
}

}  // namespace deepinfer::sample
