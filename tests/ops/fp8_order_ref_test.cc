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
#include "ops/cpu/cpu_ops.h"
#include "tensor/linear_weight.h"
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


// E4M3 codes of 2^e x (1 + m / 8) (e in -6..8) and of subnormal m / 8 x 2^-6.
uint8_t e4m3(int e, int m, bool negative = false) { return static_cast<uint8_t>((negative ? 0x80 : 0) | ((e + 7) << 3) | m); }
uint8_t e4m3_subnormal(int m) { return static_cast<uint8_t>(m); }

TEST(Fp8OrderRefTest, TheNominalExponentAlignsBeforeTheSignificandsCarry) {
  uint8_t a[32] = {}, b[32] = {};
  a[0] = e4m3(0, 4), b[0] = e4m3(0, 4);           // 1.5 x 1.5 = 2.25: exponent 1, nominal 0
  a[1] = e4m3(-6, 0), b[1] = e4m3_subnormal(4);  // 2^-6 x 2^-7 = 2^-13 (subnormal: nominal -6 + -6)
  Fp8MmaModel m = model(32, 13, true);
  EXPECT_EQ(fp8_mma_step_codes(a, b, 0.0f, m), 2.25f);  // aligned to 2^1: 2^-13 < 2^(1-13), dropped
  m.nominal_exponent = true;
  EXPECT_EQ(fp8_mma_step_codes(a, b, 0.0f, m), 2.25f + std::ldexp(1.0f, -13));  // aligned to 2^0: kept
}

TEST(Fp8OrderRefTest, FloorTruncationMovesNegativeTermsDown) {
  double prod[32] = {};
  prod[0] = 1.0, prod[1] = -std::ldexp(1.0, -15);
  Fp8MmaModel m = model(32, 13, true);
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, m), 1.0f);  // toward zero: -2^-15 -> 0
  m.truncation = Fp8MmaModel::Truncation::kFloor;
  EXPECT_EQ(fp8_mma_step(prod, 0.0f, m), 1.0f - std::ldexp(1.0f, -13));  // floor: -> -2^-13
}

TEST(Fp8OrderRefTest, ModelTextRoundTripsAndBadTextIsRefused) {
  Fp8MmaModel m = model(16, 13, false, Rounding::kTowardZeroToBits, true);
  m.nominal_exponent = true, m.truncation = Fp8MmaModel::Truncation::kFloor, m.extra = 2;
  Fp8MmaModel back;
  ASSERT_TRUE(parse_fp8_mma_model(fp8_mma_model_text(m).c_str(), back));
  EXPECT_EQ(fp8_mma_model_text(back), fp8_mma_model_text(m));
  EXPECT_EQ(back.group, 16);
  EXPECT_TRUE(back.nominal_exponent && back.fragment_order && !back.acc_aligned);
  ASSERT_TRUE(parse_fp8_mma_model("g=8,n=14", back));  // omitted keys: defaults
  EXPECT_EQ(back.group, 8);
  EXPECT_EQ(back.bits, 14);
  EXPECT_EQ(back.rounding, Rounding::kNearestEven);
  for (const char* bad : {"g=3", "n=abc", "bogus=1", "g=32,ch=3", "n=13,", "rnd=up", "g"}) {
    Fp8MmaModel untouched = back;
    EXPECT_FALSE(parse_fp8_mma_model(bad, untouched)) << bad;
    EXPECT_EQ(fp8_mma_model_text(untouched), fp8_mma_model_text(back)) << bad;
  }
}

// CpuOps::linear with a step model: the launches the CUDA FP8 order takes (FP8 weights with UE8M0
// 128 x 128 scales, activations quantised per 128 now or already) are fp8_order_dot per output;
// the rest (plain numerics, F32 weight scales) keep the exact dot.
TEST(Fp8OrderRefTest, CpuLinearTakesTheFp8OrderWhereTheKernelsDo) {
  constexpr int64_t T = 3, N = 130, K = 384;
  std::mt19937 rng(11);
  std::vector<uint8_t> codes(N * K), e8m0(2 * 3);
  for (auto& c : codes) {
    c = static_cast<uint8_t>(rng() & 0xff);
    if ((c & 0x7f) == 0x7f) c ^= 1;
  }
  std::vector<float> scale_f32(e8m0.size());
  for (size_t i = 0; i < e8m0.size(); ++i) {
    const int k = static_cast<int>(rng() % 5) - 8;
    e8m0[i] = tensor::e8m0_from_exponent(k), scale_f32[i] = std::ldexp(1.0f, k);
  }
  tensor::LinearWeight w;
  w.format = tensor::WeightFormat::kFp8Block, w.out = N, w.in = K, w.block_out = 128, w.block_in = 128;
  w.weight = tensor::TensorView::contiguous(codes.data(), DType::kF8E4M3, {N, K});
  w.scale = tensor::TensorView::contiguous(e8m0.data(), DType::kF8E8M0, {2, 3});
  std::vector<float> x(T * K);
  for (auto& v : x) v = std::ldexp(static_cast<float>(static_cast<int>(rng() % 2001) - 1000), -8);
  const auto xv = tensor::TensorView::contiguous(x.data(), DType::kF32, {T, K});
  auto run = [&](CpuOps& ops, const tensor::LinearWeight& wt, ops::LinearOptions o) {
    std::vector<float> y(T * N);
    ops.linear(xv, wt, tensor::TensorView::contiguous(y.data(), DType::kF32, {T, N}), o);
    return y;
  };
  CpuOps exact, ordered;
  exact.set_fp8_order_model(std::nullopt);
  const Fp8MmaModel m = model(16, 11, true);  // coarse: far from the exact dot
  ordered.set_fp8_order_model(m);
  // The expected outputs: each row quantised per 128 (E4M3 codes, power-of-two scales), then
  // fp8_order_dot against the weight's codes and scales.
  std::vector<float> want(T * N);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<uint8_t> ac(K);
    std::vector<float> as(K / 128), ws(K / 128);
    for (int64_t b = 0; b < K / 128; ++b) {
      float amax = 1e-4f;
      for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(x[t * K + b * 128 + i]));
      const int k = tensor::pow2_scale_exponent(amax, 448.0f);
      as[b] = std::ldexp(1.0f, k);
      for (int i = 0; i < 128; ++i) ac[b * 128 + i] = tensor::f32_to_e4m3(std::ldexp(x[t * K + b * 128 + i], -k));
    }
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t b = 0; b < K / 128; ++b) ws[b] = scale_f32[(n / 128) * 3 + b];
      want[t * N + n] = fp8_order_dot(ac.data(), as.data(), &codes[n * K], ws.data(), K, m);
    }
  }
  EXPECT_EQ(run(ordered, w, {128}), want);
  EXPECT_NE(run(exact, w, {128}), want);  // the model matters
  EXPECT_EQ(run(ordered, w, {}), run(exact, w, {}));  // plain numerics: the exact dot
  tensor::LinearWeight wf = w;  // F32 scales: the CUDA FP8 order refuses them
  wf.scale = tensor::TensorView::contiguous(scale_f32.data(), DType::kF32, {2, 3});
  EXPECT_EQ(run(ordered, wf, {128}), run(exact, wf, {128}));
  EXPECT_EQ(run(exact, wf, {128}), run(exact, w, {128}));
}

}  // namespace
}  // namespace deepinfer::ops::cpu
