// Exact tests of each single-row sampling step (logits_processors.h): values are chosen so the
// fp32 results are exact, and every expectation is a literal.
#include "sample/logits_processors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace deepinfer::sample {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(LogitsProcessorsTest, SanitizeMapsNanAndPositiveInfinity) {
  std::vector<float> l = {1.0f, NAN, kInf, -kInf, -2.0f};
  sanitize_logits(l);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -kInf, std::numeric_limits<float>::max(), -kInf, -2.0f}));
}

TEST(LogitsProcessorsTest, LogitBiasAddsAndIgnoresOutOfRangeIds) {
  std::vector<float> l = {1.0f, 2.0f, -kInf};
  apply_logit_bias(l, {{0, -0.5f}, {2, 100.0f}, {7, 1.0f}, {-1, 1.0f}});
  EXPECT_EQ(l, (std::vector<float>{0.5f, 2.0f, -kInf}));  // bias never revives a masked token
}

TEST(LogitsProcessorsTest, BitmaskUsesLittleEndianBitsPerWord) {
  std::vector<float> l(40, 1.0f);
  // Word 0 allows tokens 0 and 31; word 1 allows token 33 (bit 1).
  const std::vector<uint32_t> mask = {0x80000001u, 0x2u};
  ASSERT_EQ(bitmask_words(40), 2);
  apply_token_bitmask(l, mask);
  for (int i = 0; i < 40; ++i) {
    const bool allowed = i == 0 || i == 31 || i == 33;
    EXPECT_EQ(l[i], allowed ? 1.0f : -kInf) << "token " << i;
  }
  EXPECT_EQ(bitmask_words(32), 1);
  EXPECT_EQ(bitmask_words(33), 2);
  EXPECT_EQ(bitmask_words(129280), 4040);
}

TEST(LogitsProcessorsTest, AllowedTokenIds) {
  std::vector<float> l = {1.0f, 2.0f, 3.0f, 4.0f};
  apply_allowed_token_ids(l, std::vector<int32_t>{});
  EXPECT_EQ(l, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
  apply_allowed_token_ids(l, std::vector<int32_t>{3, 1, 9});
  EXPECT_EQ(l, (std::vector<float>{-kInf, 2.0f, -kInf, 4.0f}));
}

TEST(LogitsProcessorsTest, SuppressStopTokensUnlessNothingElseRemains) {
  std::vector<float> l = {1.0f, 5.0f, 2.0f};
  EXPECT_TRUE(suppress_stop_tokens(l, std::vector<int32_t>{1, 1}));
  EXPECT_EQ(l, (std::vector<float>{1.0f, -kInf, 2.0f}));
  // Only stop tokens are still possible (e.g. a finished grammar): suppression is skipped.
  std::vector<float> only_stops = {-kInf, 5.0f, -kInf, 3.0f};
  EXPECT_FALSE(suppress_stop_tokens(only_stops, std::vector<int32_t>{1, 3, 3}));
  EXPECT_EQ(only_stops, (std::vector<float>{-kInf, 5.0f, -kInf, 3.0f}));
}

TEST(LogitsProcessorsTest, PenaltiesFollowVllmDefinitions) {
  // prompt {0, 1}, output 2, 2, 3: repetition applies to {0, 1, 2, 3}; presence and frequency
  // to {2: count 2, 3: count 1}; token 4 is untouched.
  TokenHistory h(std::vector<int32_t>{0, 1});
  h.append(std::vector<int32_t>{2, 2, 3});
  std::vector<float> l = {4.0f, -4.0f, 3.0f, 0.0f, 4.0f};
  apply_penalties(l, h, /*repetition=*/2.0f, /*presence=*/0.5f, /*frequency=*/0.25f);
  EXPECT_EQ(l[0], 2.0f);                       // positive: divided
  EXPECT_EQ(l[1], -8.0f);                      // negative: multiplied
  EXPECT_EQ(l[2], 3.0f / 2 - 0.25f * 2 - 0.5f);  // 0.5
  EXPECT_EQ(l[3], 0.0f * 2 - 0.25f - 0.5f);      // zero counts as non-positive
  EXPECT_EQ(l[4], 4.0f);
}

TEST(LogitsProcessorsTest, RepetitionPenaltyBelowOneRewardsRepeats) {
  TokenHistory h(std::vector<int32_t>{0});
  std::vector<float> l = {2.0f, 2.0f};
  apply_penalties(l, h, 0.5f, 0.0f, 0.0f);
  EXPECT_EQ(l, (std::vector<float>{4.0f, 2.0f}));
}

TEST(LogitsProcessorsTest, TokenHistoryKeepsFirstOccurrenceOrder) {
  TokenHistory h(std::vector<int32_t>{7, 3, 7});
  h.append(std::vector<int32_t>{5, 3, 5, 5});
  EXPECT_EQ(std::vector<int32_t>(h.seen().begin(), h.seen().end()),
            (std::vector<int32_t>{7, 3, 5}));
  ASSERT_EQ(h.output_counts().size(), 2u);
  EXPECT_EQ(h.output_counts()[0].token, 5);
  EXPECT_EQ(h.output_counts()[0].count, 3);
  EXPECT_EQ(h.output_counts()[1].token, 3);
  EXPECT_EQ(h.output_counts()[1].count, 1);
  EXPECT_EQ(h.n_output(), 4);
}

TEST(LogitsProcessorsTest, ArgmaxPicksLowestIdOnTies) {
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{1.0f, 3.0f, 2.0f, 3.0f}), 1);
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{-kInf, -kInf}), -1);
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{-kInf, -5.0f, -5.0f}), 1);
}

TEST(LogitsProcessorsTest, TemperatureShiftsMaxToZero) {
  std::vector<float> l = {2.0f, 4.0f, -kInf, 3.0f};
  ASSERT_TRUE(apply_temperature(l, 0.5f));
  EXPECT_EQ(l, (std::vector<float>{-4.0f, 0.0f, -kInf, -2.0f}));
  // A tiny temperature underflows instead of producing inf - inf = NaN.
  std::vector<float> tiny = {1.0f, 2.0f};
  ASSERT_TRUE(apply_temperature(tiny, 1e-39f));  // -1 / 1e-39 overflows to -inf
  EXPECT_EQ(tiny, (std::vector<float>{-kInf, 0.0f}));
  std::vector<float> none = {-kInf};
  EXPECT_FALSE(apply_temperature(none, 1.0f));
}

TEST(LogitsProcessorsTest, TopKKeepsTiesAtTheBoundary) {
  std::vector<float> l = {1.0f, 5.0f, 3.0f, 3.0f, 2.0f, -kInf};
  apply_top_k(l, 2);  // 2nd largest is 3: both 3s stay
  EXPECT_EQ(l, (std::vector<float>{-kInf, 5.0f, 3.0f, 3.0f, -kInf, -kInf}));
  std::vector<float> small = {1.0f, -kInf, 2.0f};
  apply_top_k(small, 2);  // only 2 finite: no-op
  EXPECT_EQ(small, (std::vector<float>{1.0f, -kInf, 2.0f}));
  apply_top_k(small, 1);
  EXPECT_EQ(small, (std::vector<float>{-kInf, -kInf, 2.0f}));
}

TEST(LogitsProcessorsTest, TopPKeepsTheSmallestTopSetReachingP) {
  // Probabilities ~0.5, 0.25, 0.125, 0.125 (fp32 ln 2 is not exact, so thresholds are tested
  // away from the exact boundaries).
  const float ln2 = std::log(2.0f);
  const std::vector<float> base = {-2 * ln2, 0.0f, -2 * ln2, -ln2};
  auto kept = [&](float p) {
    std::vector<float> l = base;
    apply_top_p(l, p);
    std::vector<int> ids;
    for (int i = 0; i < 4; ++i) {
      if (l[i] != -kInf) {
        EXPECT_EQ(l[i], base[i]);  // survivors keep their values
        ids.push_back(i);
      }
    }
    return ids;
  };
  EXPECT_EQ(kept(0.1f), (std::vector<int>{1}));
  EXPECT_EQ(kept(0.49f), (std::vector<int>{1}));
  EXPECT_EQ(kept(0.51f), (std::vector<int>{1, 3}));
  EXPECT_EQ(kept(0.74f), (std::vector<int>{1, 3}));
  EXPECT_EQ(kept(0.76f), (std::vector<int>{0, 1, 2, 3}));  // the two 0.125 ties stay together
  EXPECT_EQ(kept(1.0f), (std::vector<int>{0, 1, 2, 3}));
}

TEST(LogitsProcessorsTest, TopPReachedExactlyStopsThere) {
  // exp(0) = 1 exactly: masses 1, 1, 1, 1 of total 4. p = 0.5 is reached exactly by the first
  // tie group only if the group has two members; here every token ties, so all stay.
  std::vector<float> ties = {0.0f, 0.0f, 0.0f, 0.0f};
  apply_top_p(ties, 0.5f);
  EXPECT_EQ(ties, (std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f}));
  // Masses 1, 1 and ~0 (exp(-200) in fp64): the top tie group has mass 2 of total 2 + tiny,
  // which reaches p = 0.9; the last token goes.
  std::vector<float> l = {0.0f, -200.0f, 0.0f};
  apply_top_p(l, 0.9f);
  EXPECT_EQ(l, (std::vector<float>{0.0f, -kInf, 0.0f}));
}

// apply_top_p sorts only a prefix of the (logit desc, id asc) order that surely holds the cut:
// on rows from flat to peaked (where the prefix is a handful of tokens), with ties, -inf entries
// and many top_p values, it leaves the row exactly as the full sort of every finite token does
// (the reference below is that algorithm written out).
TEST(LogitsProcessorsTest, TopPEqualsTheFullSort) {
  auto full_sort = [](std::vector<float>& l, float top_p) {
    float m = -kInf;
    for (float v : l) m = std::max(m, v);
    std::vector<int32_t> order;
    double total = 0.0;
    for (size_t i = 0; i < l.size(); ++i) {
      if (l[i] == -kInf) continue;
      order.push_back(static_cast<int32_t>(i));
      total += std::exp(static_cast<double>(l[i]) - m);
    }
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] != l[b] ? l[a] > l[b] : a < b; });
    double mass = 0.0;
    for (int32_t id : order) {
      mass += std::exp(static_cast<double>(l[id]) - m);
      if (mass >= static_cast<double>(top_p) * total) {
        const float threshold = l[id];
        for (float& v : l) v = v < threshold ? -kInf : v;
        return;
      }
    }
  };
  std::mt19937 rng(5);
  int64_t small_prefix_rows = 0;
  for (const float scale : {0.5f, 3.0f, 12.0f, 40.0f}) {  // flat ... peaked
    for (int trial = 0; trial < 12; ++trial) {
      std::normal_distribution<float> normal(0.0f, scale);
      std::uniform_int_distribution<int> kind(0, 19);
      std::vector<float> row(5000);
      for (float& v : row) {
        const int k = kind(rng);
        v = k == 0 ? -kInf : (k == 1 ? std::round(normal(rng)) : normal(rng));  // some ties
      }
      for (const float top_p : {0.05f, 0.5f, 0.9f, 0.95f, 0.999f}) {
        std::vector<float> got = row, want = row;
        apply_top_p(got, top_p);
        full_sort(want, top_p);
        ASSERT_EQ(got, want) << "scale " << scale << ", trial " << trial << ", top_p " << top_p;
        small_prefix_rows += std::count_if(got.begin(), got.end(), [](float v) { return v != -kInf; }) < 100;
      }
    }
  }
  EXPECT_GT(small_prefix_rows, 20);  // the peaked rows do exercise short prefixes
}

TEST(LogitsProcessorsTest, MinPIsRelativeToTheTopProbability) {
  // min_p = 0.25 keeps exp(l - max) >= 0.25, i.e. l >= max - ln 4 (ln 4 = 1.386294...).
  std::vector<float> l = {-1.0f, 0.0f, -2.0f, -kInf, -1.3862f, -1.3864f};
  apply_min_p(l, 0.25f);
  EXPECT_EQ(l, (std::vector<float>{-1.0f, 0.0f, -kInf, -kInf, -1.3862f, -kInf}));
  // Only the ratio to the top matters: shifting every logit changes nothing.
  std::vector<float> shifted = {9.0f, 10.0f, 8.0f, -kInf, 8.6138f, 8.6136f};
  apply_min_p(shifted, 0.25f);
  EXPECT_EQ(shifted, (std::vector<float>{9.0f, 10.0f, -kInf, -kInf, 8.6138f, -kInf}));
  std::vector<float> off = {0.0f, -50.0f};
  apply_min_p(off, 0.0f);
  EXPECT_EQ(off[1], -50.0f);
}

}  // namespace
}  // namespace deepinfer::sample
