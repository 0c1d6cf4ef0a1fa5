// The host reference of the FP8 order (src/ops/cpu/fp8_order_ref.h): the step model's features
// one at a time on hand-made products (truncation below the group's largest exponent, the
// accumulator inside or outside the alignment, grouping, the A fragment's position order,
// rounding), and fp8_order_dot's block / sub-range / fold structure against an independent
// computation of the same order with an exact step.
#include "ops/cpu/fp8_order_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "kernels/gemm/canonical_k.h"
#include "tensor/number_formats.h"

namespace deepinfer::ops::cpu {
namespace {

using Rounding = Fp8MmaModel::Rounding;

Fp8MmaModel model(int group, int bits, bool acc_aligned, Rounding r = Rounding::kTowardZero, bool fragment = false,
                  int chunk = 1) {
  Fp8MmaModel m;
  m.group = group, m.bits = bits, m.acc_aligned = acc_aligned, m.rounding = r, m.fragment_order = fragment;
  m.chunk = chunk;
  return m;
}

TEST(Fp8OrderRefTest, TermsBelowTheKeptBitsOfTheGroupsLargestAreDropped) {
  double prod[32] = {};
  prod[0] = 1.0, prod[5] = std::ldexp(1.0, -14), prod[9] = -std::ldexp(1.0, -14);
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 13, true)), 1.0f);  // both below 2^-13: truncated to 0
  prod[9] = 0;
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 14, true)), 1.0f + std::ldexp(1.0f, -14));
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 13, true)), 1.0f);
  prod[5] = -std::ldexp(3.0, -14);  // -1.5 x 2^-13: toward zero, -2^-13
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 13, true)), 1.0f - std::ldexp(1.0f, -13));
}

TEST(Fp8OrderRefTest, ChunksAreSummedExactlyBeforeTheAlignment) {
  double prod[32] = {};
  prod[0] = 1.0, prod[2] = std::ldexp(1.0, -14), prod[3] = std::ldexp(1.0, -14);
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 13, true)), 1.0f);  // each below 2^-13
  // Pairs: 2^-14 + 2^-14 = 2^-13 is one term, kept.
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 13, true, Rounding::kTowardZero, false, 2)), 1.0f + std::ldexp(1.0f, -13));
  // Quads: 1 + 2^-13 is one term (exact), its own largest.
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 13, true, Rounding::kTowardZero, false, 4)), 1.0f + std::ldexp(1.0f, -13));
}

TEST(Fp8OrderRefTest, TheAccumulatorInsideTheAlignmentTruncatesTheProducts) {
  double prod[32] = {};
  prod[0] = 1.0;
  EXPECT_EQ(fp8_mma_step(prod, 1024.0f, model(32, 8, true)), 1024.0f);   // aligned to 2^10: 1 < 2^2
  EXPECT_EQ(fp8_mma_step(prod, 1024.0f, model(32, 8, false)), 1025.0f);  // added after the group
}

TEST(Fp8OrderRefTest, GroupsAndTheFragmentOrderDecideWhatIsAlignedTogether) {
  double prod[32] = {};
  prod[0] = 1.0, prod[16] = std::ldexp(1.0, -14);
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 13, false)), 1.0f);  // one group: aligned to 1
  // Two groups of 16 in position order: the second holds 2^-14 alone, added after the first's 1.
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(16, 13, false)), 1.0f + std::ldexp(1.0f, -14));
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(16, 13, true)), 1.0f);  // ... unless aligned with the accumulator
  // In the fragment order the first group of 8 takes positions 0-3 and 16-19: together again.
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(8, 13, false, Rounding::kTowardZero, true)), 1.0f);
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(8, 13, false, Rounding::kTowardZero, false)), 1.0f + std::ldexp(1.0f, -14));
  std::set<int> seen;
  for (int i = 0; i < 32; ++i) seen.insert(fp8_mma_position(i, true));
  EXPECT_EQ(seen.size(), 32u);
  EXPECT_EQ(fp8_mma_position(4, true), 16);
  EXPECT_EQ(fp8_mma_position(8, true), 4);
  EXPECT_EQ(fp8_mma_position(31, true), 31);
}

TEST(Fp8OrderRefTest, TheStepsSumIsRoundedAsTheModelSays) {
  double prod[32] = {};
  prod[0] = 1.0, prod[1] = std::ldexp(1.0, -24), prod[2] = std::ldexp(1.0, -25);  // 1 + 0.75 ulp
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 60, true, Rounding::kNearestEven)), 1.0f + std::ldexp(1.0f, -23));
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 60, true, Rounding::kTowardZero)), 1.0f);
  prod[1] = std::ldexp(1.0, -3), prod[2] = std::ldexp(1.0, -5);  // 1.15625: 1.001010b
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, model(32, 3, false, Rounding::kTowardZeroToBits)), 1.125f);  // 4 bits
}

// An independent computation of the same order with an exact step: each step's exact sum added
// onto the block's F32 part with one rounding (positions do not matter for an exact sum), blocks
// promoted with fmaf in order per canonical sub-range, the sub-ranges' sums added from 0.
float reference_order(const std::vector<uint8_t>& a, const std::vector<float>& as, const std::vector<uint8_t>& w,
                      const std::vector<float>& ws, int64_t K) {
  const int64_t R = kernels::gemm_subrange(K);
  float total = 0.0f;
  for (int64_t r0 = 0; r0 < K; r0 += R) {
    float sum = 0.0f;
    for (int64_t b0 = r0; b0 < std::min(K, r0 + R); b0 += 128) {
      float part = 0.0f;
      for (int step = 0; step < 4; ++step) {
        double s = part;
        // Step `step` holds inputs 64 (step / 2) + 8 (step % 2) + {0..7} + 16 c (fp8_order_layout.h).
        for (int c = 0; c < 4; ++c)
          for (int j = 0; j < 8; ++j) {
            const int64_t k = b0 + 64 * (step / 2) + 16 * c + 8 * (step % 2) + j;
            s += static_cast<double>(tensor::e4m3_to_f32(a[k])) * tensor::e4m3_to_f32(w[k]);
          }
        part = static_cast<float>(s);
      }
      sum = std::fmaf(part, ws[b0 / 128] * as[b0 / 128], sum);
    }
    total = total + sum;
  }
  return total;
}

TEST(Fp8OrderRefTest, DotFollowsTheBlocksSubRangesAndFold) {
  std::mt19937 rng(7);
  for (int64_t K : {128, 512, 1024, 4096, 7168}) {  // one block .. eight sub-ranges of 7 blocks
    std::vector<uint8_t> a(K), w(K);
    std::vector<float> as(K / 128), ws(K / 128);
    for (int64_t i = 0; i < K; ++i) {
      a[i] = static_cast<uint8_t>(rng() & 0xff), w[i] = static_cast<uint8_t>(rng() & 0xff);
      if ((a[i] & 0x7f) == 0x7f) a[i] ^= 1;  // no NaN codes
      if ((w[i] & 0x7f) == 0x7f) w[i] ^= 1;
    }
    for (auto& s : as) s = std::ldexp(1.0f, static_cast<int>(rng() % 9) - 12);
    for (auto& s : ws) s = std::ldexp(1.0f, static_cast<int>(rng() % 9) - 4);
    const float got = fp8_order_dot(a.data(), as.data(), w.data(), ws.data(), K, Fp8MmaModel{});
    EXPECT_EQ(got, reference_order(a, as, w, ws, K)) << K;
    // And near the exact dot: a few F32 roundings per block.
    double exact = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double p = static_cast<double>(tensor::e4m3_to_f32(a[k])) * tensor::e4m3_to_f32(w[k]) * as[k / 128] * ws[k / 128];
      exact += p, mag += std::fabs(p);
    }
    EXPECT_LE(std::fabs(got - exact), 1e-6 * mag) << K;
    // A truncating model moves it (the test can tell the models apart).
    EXPECT_NE(fp8_order_dot(a.data(), as.data(), w.data(), ws.data(), K, model(32, 10, true)), got) << K;
  }
}

}  // namespace
}  // namespace deepinfer::ops::cpu
