// Speculative verification: exact rule checks, determinism, and losslessness (the emitted
// tokens of repeated verify steps follow the target distribution, chi-square at 0.001).
#include "sample/spec_verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sample/keyed_noise.h"
#include "sample/sampler.h"
#include "sample_stats.h"

namespace deepinfer::sample {
namespace {

TEST(SpecVerifyTest, MatchRuleAcceptsWhileEqual) {
  auto r = verify_by_match(std::vector<int32_t>{1, 2, 9, 4}, std::vector<int32_t>{1, 2, 3});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->n_accepted, 2);
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{1, 2, 9}));
  r = verify_by_match(std::vector<int32_t>{1, 2, 3, 4}, std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(r->n_accepted, 3);
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{1, 2, 3, 4}));  // bonus token
  r = verify_by_match(std::vector<int32_t>{5}, std::vector<int32_t>{});
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{5}));
  EXPECT_FALSE(verify_by_match(std::vector<int32_t>{1, 2}, std::vector<int32_t>{1, 2}).is_ok());
}

TEST(SpecVerifyTest, RejectionChecksSizes) {
  const std::vector<float> p(3 * 4, 0.25f);
  EXPECT_FALSE(verify_rejection(p, std::vector<int32_t>{1}, {}, 4, 0, 0).is_ok());
  EXPECT_TRUE(verify_rejection(p, std::vector<int32_t>{1, 2}, {}, 4, 0, 0).is_ok());
  EXPECT_FALSE(verify_rejection(p, std::vector<int32_t>{1, 2}, std::vector<float>(4), 4, 0, 0).is_ok());
  EXPECT_FALSE(verify_rejection(p, std::vector<int32_t>{1, 4}, {}, 4, 0, 0).is_ok());
}

TEST(SpecVerifyTest, EqualDistributionsAlwaysAcceptAndZeroTargetAlwaysRejects) {
  constexpr int32_t kVocab = 4;
  const std::vector<float> row = {0.1f, 0.2f, 0.3f, 0.4f};
  std::vector<float> p, q;
  for (int i = 0; i < 3; ++i) p.insert(p.end(), row.begin(), row.end());
  for (int i = 0; i < 2; ++i) q.insert(q.end(), row.begin(), row.end());
  std::vector<float> p_no2 = p;
  p_no2[2] = 0.0f;  // position 0 forbids token 2
  for (uint64_t seed = 0; seed < 500; ++seed) {
    auto r = verify_rejection(p, std::vector<int32_t>{3, 0}, q, kVocab, seed, 40);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->n_accepted, 2);  // u < 1 = p/q
    ASSERT_EQ(r->tokens.size(), 3u);
    auto rej = verify_rejection(p_no2, std::vector<int32_t>{2, 0}, {}, kVocab, seed, 40);
    EXPECT_EQ(rej->n_accepted, 0);
    ASSERT_EQ(rej->tokens.size(), 1u);
    EXPECT_NE(rej->tokens[0], 2);  // the residual of a point-mass draft excludes the draft
    // Same inputs, same seed: same result.
    auto again = verify_rejection(p, std::vector<int32_t>{3, 0}, q, kVocab, seed, 40);
    EXPECT_EQ(again->tokens, r->tokens);
  }
}

std::vector<float> random_dist(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  std::vector<float> d(n);
  float sum = 0.0f;
  for (float& x : d) sum += (x = u(rng));
  for (float& x : d) x /= sum;
  return d;
}

int32_t draw_from(const std::vector<float>& dist, uint64_t seed, int64_t position) {
  std::vector<float> log_d(dist.size());
  for (size_t i = 0; i < dist.size(); ++i) log_d[i] = std::log(dist[i]);
  return gumbel_argmax(log_d, seed, NoiseStream::kToken, position);
}

// Generates two tokens with repeated verify steps: context-free targets p_j per output position
// j, drafts sampled from q_j with independent noise. Tokens at positions 0 and 1 must then be
// independent with laws p_0 and p_1, whatever q is.
TEST(SpecVerifyTest, RejectionSamplingIsLossless) {
  constexpr int kVocab = 5;
  constexpr int kK = 3;
  constexpr int kTrials = 30000;
  std::mt19937_64 rng(11);
  std::vector<std::vector<float>> p(kK + 2), q(kK + 2);
  for (auto& d : p) d = random_dist(rng, kVocab);
  for (auto& d : q) d = random_dist(rng, kVocab);
  std::vector<int64_t> joint(kVocab * kVocab, 0);
  int64_t n_accepted_total = 0;
  for (uint64_t trial = 0; trial < kTrials; ++trial) {
    std::vector<int32_t> out;
    while (out.size() < 2) {
      const int64_t pos = static_cast<int64_t>(out.size());
      std::vector<int32_t> drafts;
      std::vector<float> target, draft_probs;
      for (int i = 0; i < kK; ++i) {
        drafts.push_back(draw_from(q[pos + i], trial ^ 0xD1F7u, pos + i));
        draft_probs.insert(draft_probs.end(), q[pos + i].begin(), q[pos + i].end());
      }
      for (int i = 0; i <= kK; ++i) {
        const auto& row = p[std::min<int64_t>(pos + i, kK + 1)];
        target.insert(target.end(), row.begin(), row.end());
      }
      auto r = verify_rejection(target, drafts, draft_probs, kVocab, trial, pos);
      ASSERT_TRUE(r.is_ok());
      n_accepted_total += r->n_accepted;
      out.insert(out.end(), r->tokens.begin(), r->tokens.end());
    }
    ++joint[out[0] * kVocab + out[1]];
  }
  std::vector<double> expected(kVocab * kVocab);
  for (int a = 0; a < kVocab; ++a) {
    for (int b = 0; b < kVocab; ++b) expected[a * kVocab + b] = double(p[0][a]) * p[1][b];
  }
  const auto result = testing::chi_square(joint, expected);
  EXPECT_TRUE(result.pass()) << result.describe();
  EXPECT_GT(n_accepted_total, kTrials / 2);  // drafts are really accepted, not just resampled
}

// Gumbel coupling: a drafter that samples with the same keyed noise, verified with the match
// rule, reproduces non-speculative seeded sampling exactly, for any draft quality.
TEST(SpecVerifyTest, GumbelCoupledVerificationEqualsPlainSeededSampling) {
  constexpr int32_t kVocab = 50;
  Sampler s = Sampler::create({.n_vocab = kVocab}).value();
  SamplingParams params;
  params.temperature = 0.8f;
  std::mt19937_64 rng(4);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<float>> target(6), draft(6);  // context-free logits per position
  for (auto& l : target) { l.resize(kVocab); for (float& v : l) v = normal(rng); }
  for (auto& l : draft) { l.resize(kVocab); for (float& v : l) v = normal(rng) * 0.5f + 0.0f; }
  for (int i = 0; i < 6; ++i) {
    for (int t = 0; t < kVocab; ++t) draft[i][t] += target[i][t];  // correlated drafter
  }
  int64_t n_accepted = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    auto token_at = [&](const std::vector<float>& logits, int64_t pos) {
      return s.sample_row(logits, {.params = &params, .position = pos, .seed = seed}).token;
    };
    std::vector<int32_t> plain, drafts, targets;
    for (int pos = 0; pos < 6; ++pos) plain.push_back(token_at(target[pos], pos));
    for (int pos = 0; pos < 5; ++pos) drafts.push_back(token_at(draft[pos], pos));
    for (int pos = 0; pos < 6; ++pos) targets.push_back(token_at(target[pos], pos));
    auto r = verify_by_match(targets, drafts);
    ASSERT_TRUE(r.is_ok());
    n_accepted += r->n_accepted;
    EXPECT_TRUE(std::equal(r->tokens.begin(), r->tokens.end(), plain.begin()));
  }
  EXPECT_GT(n_accepted, 300);  // the coupled drafter agrees often
}

}  // namespace
}  // namespace deepinfer::sample
