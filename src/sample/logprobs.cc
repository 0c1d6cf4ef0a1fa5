// Logprob helpers (contracts in logprobs.h).
#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>

#include "sample/logits_processors.h"

namespace deepinfer::sample {

double log_sum_exp(std::span<const float> logits) {
  const float m = max_finite(logits);
  if (m == kNegInf) return -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - m);  // exp(-inf) = 0
  return static_cast<double>(m) + std::log(sum);
}

float token_logprob(std::span<const float> logits, double lse, int32_t token) {
  const float v = logits[token];
  if (v == kNegInf || std::isinf(lse)) return kNegInf;
  return static_cast<float>(static_cast<double>(v) - lse);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, double lse, int32_t n) {
  if (n <= 0) return {};
  // A small sorted array (best first) beats a full sort: n <= 20 while the row has ~129k ids.
  // Scanning ids upwards and inserting only on strictly greater logits keeps lower ids first
  // among equals.
  std::vector<int32_t> best;
  best.reserve(n + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (static_cast<int32_t>(best.size()) == n && !(v > logits[best.back()])) continue;
    auto pos = std::upper_bound(best.begin(), best.end(), v,
                                [&](float x, int32_t id) { return x > logits[id]; });
    best.insert(pos, static_cast<int32_t>(i));
    if (static_cast<int32_t>(best.size()) > n) best.pop_back();
  }
  std::vector<TokenLogprob> out;
  out.reserve(best.size());
  for (int32_t id : best) out.push_back({id, token_logprob(logits, lse, id)});
  return out;
}

int32_t token_rank(std::span<const float> logits, int32_t token) {
  const float v = logits[static_cast<size_t>(token)];
  int32_t before = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    before += logits[i] > v || (logits[i] == v && static_cast<int32_t>(i) < token);
  }
  return before + 1;
}

LogprobResult compute_logprobs(std::span<const float> logits, int32_t token, int32_t n_top) {
  const double lse = log_sum_exp(logits);
  return {token_logprob(logits, lse, token), top_logprobs(logits, lse, n_top)};
}

}  // namespace deepinfer::sample
