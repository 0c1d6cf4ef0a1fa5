// The sampler against an independent sort-based reference: (1) the truncated support of
// top-k/top-p/min-p is identical, ties included, over thousands of random rows; (2) seeded
// draws follow the reference distribution (chi-square at significance 0.001 over 20,000 draws
// per configuration, fixed seeds, so the outcome is deterministic).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "sample/logits_processors.h"
#include "sample_stats.h"
#include "sample/sampler.h"

namespace deepinfer::sample {
namespace {

struct Truncation {
  float temperature = 1.0f;
  int32_t top_k = -1;
  float top_p = 1.0f;
  float min_p = 0.0f;
};

// Reference: sort once by (z desc, id asc), cut by k, then by cumulative mass p over the
// renormalised top-k set, then by ratio to the top probability; renormalise; fp64 throughout.
std::vector<double> reference_probs(const std::vector<float>& logits, const Truncation& t) {
  const size_t v = logits.size();
  std::vector<double> z(v);
  for (size_t i = 0; i < v; ++i) z[i] = static_cast<double>(logits[i]) / t.temperature;
  std::vector<size_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return z[a] != z[b] ? z[a] > z[b] : a < b; });
  size_t n_keep = v;  // kept = order[0, n_keep), extended over ties at each cut
  auto extend_ties = [&](size_t n) {
    while (n < v && z[order[n]] == z[order[n - 1]]) ++n;
    return n;
  };
  if (t.top_k > 0 && static_cast<size_t>(t.top_k) < v) n_keep = extend_ties(t.top_k);
  auto softmax_prefix = [&](size_t n) {
    std::vector<double> p(v, 0.0);
    double sum = 0.0;
    for (size_t j = 0; j < n; ++j) sum += std::exp(z[order[j]] - z[order[0]]);
    for (size_t j = 0; j < n; ++j) p[order[j]] = std::exp(z[order[j]] - z[order[0]]) / sum;
    return p;
  };
  if (t.top_p < 1.0f) {
    const std::vector<double> p = softmax_prefix(n_keep);
    double cum = 0.0;
    for (size_t j = 0; j < n_keep; ++j) {
      cum += p[order[j]];
      if (cum >= t.top_p) {
        n_keep = extend_ties(j + 1);
        break;
      }
    }
  }
  if (t.min_p > 0.0f) {
    const std::vector<double> p = softmax_prefix(n_keep);
    size_t n = 1;
    while (n < n_keep && p[order[n]] >= t.min_p * p[order[0]]) ++n;
    n_keep = n;
  }
  return softmax_prefix(n_keep);
}

Sampler make_sampler(int32_t n_vocab) { return Sampler::create({.n_vocab = n_vocab}).value(); }

SamplingParams to_params(const Truncation& t) {
  SamplingParams p;
  p.temperature = t.temperature;
  p.top_k = t.top_k;
  p.top_p = t.top_p;
  p.min_p = t.min_p;
  return p;
}

TEST(SamplerDistributionTest, SupportMatchesSortReferenceIncludingTies) {
  constexpr int32_t kVocab = 12;
  Sampler s = make_sampler(kVocab);
  std::mt19937_64 rng(7);
  const float temps[] = {1.0f, 0.5f, 2.0f};
  const int32_t ks[] = {-1, 1, 3, 5, 11, 12, 20};
  const float ps[] = {1.0f, 0.3f, 0.55f, 0.8f, 0.95f};
  const float min_ps[] = {0.0f, 0.05f, 0.2f, 0.5f};
  int n_cases = 0, n_truncated = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    // Small integers: many exact ties, and exact fp32 arithmetic for T in {1, 0.5, 2}.
    std::vector<float> logits(kVocab);
    for (float& l : logits) l = static_cast<float>(static_cast<int>(rng() % 7) - 3);
    const Truncation t{temps[rng() % 3], ks[rng() % 7], ps[rng() % 5], min_ps[rng() % 4]};
    const SamplingParams p = to_params(t);
    std::vector<float> z(kVocab);
    ASSERT_TRUE(s.process_row(logits, {.params = &p}, z));
    const std::vector<double> ref = reference_probs(logits, t);
    int n_support = 0;
    for (int i = 0; i < kVocab; ++i) {
      ASSERT_EQ(z[i] != kNegInf, ref[i] > 0.0)
          << "trial " << trial << " token " << i << " T " << t.temperature << " k " << t.top_k
          << " p " << t.top_p << " min_p " << t.min_p;
      n_support += ref[i] > 0.0;
    }
    ++n_cases;
    n_truncated += n_support < kVocab;
  }
  EXPECT_EQ(n_cases, 3000);
  EXPECT_GT(n_truncated, 2000);  // the cases really exercise truncation
}

// Draws `n` tokens varying the seed (vary_seed) or the position, returns per-token counts.
std::vector<int64_t> draw(const Sampler& s, const std::vector<float>& logits,
                          const SamplingParams& p, int n, bool vary_seed) {
  std::vector<int64_t> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    const RowInput row{.params = &p, .position = vary_seed ? 17 : i,
                       .seed = vary_seed ? static_cast<uint64_t>(i) : 12345u};
    ++counts[s.sample_row(logits, row).token];
  }
  return counts;
}

TEST(SamplerDistributionTest, SeededDrawsFollowTheReferenceDistribution) {
  constexpr int32_t kVocab = 10;
  constexpr int kDraws = 20000;
  Sampler s = make_sampler(kVocab);
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  const Truncation configs[] = {
      {1.0f, -1, 1.0f, 0.0f}, {0.7f, 4, 1.0f, 0.0f},  {1.3f, -1, 0.8f, 0.0f},
      {1.0f, -1, 1.0f, 0.1f}, {0.9f, 6, 0.7f, 0.05f}, {2.0f, 3, 1.0f, 0.3f},
  };
  int n_config = 0;
  for (const Truncation& t : configs) {
    std::vector<float> logits(kVocab);
    for (float& l : logits) l = uniform(rng);
    const SamplingParams p = to_params(t);
    for (bool vary_seed : {true, false}) {
      const auto result = testing::chi_square(draw(s, logits, p, kDraws, vary_seed),
                                              reference_probs(logits, t));
      EXPECT_TRUE(result.pass()) << "config " << n_config << (vary_seed ? " seeds" : " positions")
                                 << ": " << result.describe();
    }
    ++n_config;
  }
}

TEST(SamplerDistributionTest, LargerVocabularyWithTopK) {
  constexpr int32_t kVocab = 2000;
  Sampler s = make_sampler(kVocab);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = normal(rng);
  const Truncation t{1.0f, 40, 0.95f, 0.0f};
  const auto result = testing::chi_square(draw(s, logits, to_params(t), 20000, true),
                                          reference_probs(logits, t));
  EXPECT_TRUE(result.pass()) << result.describe();
  EXPECT_GE(result.df, 20);
}

}  // namespace
}  // namespace deepinfer::sample
