// The FP4 fold (src/kernels/gemm/fp4_fold_layout.h) without a GPU: its E4M3 tables against an
// independent nearest-code search over every E4M3 value; the decode of every code at every
// position of a word against the folded weight's value; the word placement that gives lane c of
// the FP8 order its inputs in step order; and the fold's promise — code x 2^(ref - 133) is the
// checkpoint weight fp4 x 2^(e - 127) exactly while d >= -14.
#include "kernels/gemm/fp4_fold_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>

#include "kernels/gemm/fp8_order_layout.h"

namespace deepinfer::kernels {
namespace {

// E4M3 (bias 7, no infinities, 0x7f / 0xff NaN) byte -> value.
double e4m3_value(uint32_t b) {
  const int E = static_cast<int>((b >> 3) & 15), M = static_cast<int>(b & 7);
  const double mag = E == 0 ? std::ldexp(M, -9) : std::ldexp(8 + M, E - 10);
  return (b & 0x80) ? -mag : mag;
}

double fp4_value(uint32_t code) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8) ? -kMag[code & 7] : kMag[code & 7];
}

// The positive E4M3 code nearest to v >= 0 (ties to the even code), by search.
uint32_t nearest_e4m3(double v) {
  uint32_t best = 0;
  double best_err = v;
  for (uint32_t b = 1; b <= 0x7e; ++b) {
    const double err = std::fabs(e4m3_value(b) - v);
    if (err < best_err || (err == best_err && (b & 1) == 0 && (best & 1) == 1)) best = b, best_err = err;
  }
  return best;
}

TEST(Fp4FoldLayoutTest, TablesAreTheNearestE4m3OfEachScaledMagnitude) {
  for (int d = 0; d >= -kFp4FoldMaxShift; --d) {
    const Fp4FoldTable t = fp4_fold_table(d);
    for (int i = 0; i < 8; ++i) {
      const uint32_t b = ((i < 4 ? t.lo : t.hi) >> (8 * (i & 3))) & 0xffu;
      const double v = std::ldexp(fp4_value(static_cast<uint32_t>(i)), 6 + d);
      EXPECT_EQ(b, nearest_e4m3(v)) << "d " << d << " magnitude " << i;
      if (d >= -14) {
        EXPECT_EQ(e4m3_value(b), v) << "d " << d << " magnitude " << i << " must be exact";
      }
    }
  }
  // Past the tables every magnitude rounds to zero (the kernels clamp d there).
  const Fp4FoldTable past = fp4_fold_table(-kFp4FoldMaxShift - 1);
  EXPECT_EQ(past.lo, 0u);
  EXPECT_EQ(past.hi, 0u);
}

TEST(Fp4FoldLayoutTest, BitLayoutRoundTripsAndKeepsMagnitudes) {
  std::mt19937 rng(5);
  for (int n = 0; n < 20000; ++n) {
    const uint32_t w = rng();
    const uint32_t d = fp4_fold_word_bits(w);
    EXPECT_EQ(fp4_unfold_word_bits(d), w);
    EXPECT_EQ(d & kFp4FoldMagBits, w & kFp4FoldMagBits);
  }
}

// Every code (16) at every input position (8) of a word, with every table: the decoded bytes are
// the folded codes, signs included (-0 stays -0: E2M1 code 8).
TEST(Fp4FoldLayoutTest, DecodeGivesEachInputsFoldedCode) {
  for (int d = 0; d >= -kFp4FoldMaxShift; --d) {
    const Fp4FoldTable t = fp4_fold_table(d);
    for (int pos = 0; pos < 8; ++pos)
      for (uint32_t code = 0; code < 16; ++code) {
        // The other inputs hold (pos + 5 x code) mod 16: every neighbour value appears.
        uint32_t w = 0;
        for (int q = 0; q < 8; ++q) w |= ((q == pos ? code : (static_cast<uint32_t>(q) + 5 * code) & 15u)) << (4 * q);
        uint32_t a0 = 0, a2 = 0;
        fp4_fold_decode(fp4_fold_word_bits(w), t, a0, a2);
        for (int q = 0; q < 8; ++q) {
          const uint32_t c = (w >> (4 * q)) & 15u;
          const uint32_t got = ((q < 4 ? a0 : a2) >> (8 * (q & 3))) & 0xffu;
          const double want = std::ldexp(std::fabs(fp4_value(c)), 6 + d);
          EXPECT_EQ(got & 0x7fu, nearest_e4m3(want)) << "d " << d << " input " << q << " code " << c;
          EXPECT_EQ(got >> 7, c >> 3) << "sign of input " << q << " code " << c;
        }
      }
  }
}

// Lane c of the FP8 order reads its 16 bytes of a row's block at 16 c: device word 4 c + 2 w + s
// must hold inputs 64 w + 16 c + 8 s .. + 7, whose FP8-order slots are step 2 w + s, positions
// 4 c + j (a0: inputs + 0..3) and 16 + 4 c + j (a2: + 4..7).
TEST(Fp4FoldLayoutTest, LaneRunsHoldTheirStepsInputs) {
  std::set<int> slots;
  for (int q = 0; q < 16; ++q) {
    const int slot = fp4_fold_word_slot(q);
    EXPECT_EQ(fp4_fold_word_source(slot), q);
    EXPECT_TRUE(slots.insert(slot).second) << "two words in slot " << slot;
  }
  for (int c = 0; c < 4; ++c)
    for (int w = 0; w < 2; ++w)
      for (int s = 0; s < 2; ++s) {
        const int q = fp4_fold_word_source(4 * c + 2 * w + s);  // checkpoint word: inputs 8 q .. 8 q + 7
        for (int t = 0; t < 8; ++t) {
          const int input = 8 * q + t;
          EXPECT_EQ(input, 64 * w + 16 * c + 8 * s + t);
          const Fp8StepPos sp = fp8_step_pos(input);
          EXPECT_EQ(sp.step, 2 * w + s);
          EXPECT_EQ(sp.pos, 16 * (t / 4) + 4 * c + t % 4);
          EXPECT_EQ(input / 32, 2 * w + c / 2) << "a lane's window lies in one 32-block";
        }
      }
}

// The element-wise reader (dequant_weight's fp4_code_at): every input of a row laid out as the
// layout kernel does (word q to slot fp4_fold_word_slot(q), bits moved) reads back as its code.
TEST(Fp4FoldLayoutTest, ElementReaderFindsEveryInput) {
  std::mt19937 rng(13);
  constexpr int kBlocks = 3;
  uint32_t checkpoint[16 * kBlocks], device[16 * kBlocks];
  for (uint32_t& w : checkpoint) w = rng();
  for (int b = 0; b < kBlocks; ++b)
    for (int q = 0; q < 16; ++q) device[16 * b + fp4_fold_word_slot(q)] = fp4_fold_word_bits(checkpoint[16 * b + q]);
  for (int64_t k = 0; k < 128 * kBlocks; ++k) {
    const int64_t off = fp4_fold_word_offset(k);
    ASSERT_EQ(off % 4, 0);
    const uint32_t want = (checkpoint[k / 8] >> (4 * (k % 8))) & 15u;  // byte k / 2, nibble k % 2
    EXPECT_EQ(fp4_fold_code(device[off / 4], static_cast<int>(k % 8)), want) << "input " << k;
  }
}

// The fold: code(fp4 x 2^(6 + d)) x 2^(ref - 133) equals fp4 x 2^(e - 127) for d = e - ref >= -14;
// further down, within half an E4M3 subnormal step of it. ref: the largest scale of the row's
// sub-range (here four blocks' words, as V4-Flash's 512-input sub-ranges hold).
TEST(Fp4FoldLayoutTest, FoldedWeightsAreTheCheckpointsWeights) {
  std::mt19937 rng(9);
  for (int n = 0; n < 1000; ++n) {
    uint32_t words[4] = {};
    uint32_t m = 0;
    for (uint32_t& codes : words) {
      for (int j = 0; j < 4; ++j) codes |= (100u + rng() % (n % 2 ? 40 : 12)) << (8 * j);  // spreads of 11 / 39
      m = fp4_fold_ref_add(m, codes);
    }
    const int ref = fp4_fold_ref(m);
    for (const uint32_t codes : words) {
      for (int j = 0; j < 4; ++j) {
        const int e = static_cast<int>((codes >> (8 * j)) & 0xffu), d = e - ref;
        EXPECT_LE(d, 0);
        const Fp4FoldTable t = fp4_fold_table(d < -kFp4FoldMaxShift ? -kFp4FoldMaxShift - 1 : d);
        for (uint32_t code = 0; code < 16; ++code) {
          uint32_t a0 = 0, a2 = 0;
          fp4_fold_decode(fp4_fold_word_bits(code), t, a0, a2);
          const double folded = std::ldexp(e4m3_value(a0 & 0xffu), ref - 133);
          const double exact = std::ldexp(fp4_value(code), e - 127);
          if (d >= -14) {
            EXPECT_EQ(folded, exact) << "e " << e << " ref " << ref << " code " << code;
          } else {
            EXPECT_LE(std::fabs(folded - exact), std::ldexp(1.0, ref - 133 - 10)) << "e " << e << " ref " << ref;
          }
        }
      }
    }
  }
}

// The reference is the largest code of the words folded in, whatever their order and bytes
// (fp4_fold_ref_add's host form; the device's DPX form keeps the same two 16-bit lanes).
TEST(Fp4FoldLayoutTest, SubRangeReferenceIsTheLargestCode) {
  std::mt19937 rng(17);
  for (int n = 0; n < 2000; ++n) {
    const int words = 1 + n % 8;
    uint32_t m = 0;
    int want = 0;
    for (int q = 0; q < words; ++q) {
      const uint32_t codes = rng();
      for (int j = 0; j < 4; ++j) want = std::max(want, static_cast<int>((codes >> (8 * j)) & 0xffu));
      m = fp4_fold_ref_add(m, codes);
    }
    ASSERT_EQ(fp4_fold_ref(m), want) << "case " << n;
  }
  EXPECT_EQ(fp4_fold_ref(fp4_fold_ref_add(0u, 0xff000000u)), 255);
  EXPECT_EQ(fp4_fold_ref(fp4_fold_ref_add(0u, 0u)), 0);
}

// The kernel's promotion with one reference per sub-range gives the bits of the per-block one
// (fp8_expert_gemm.cuh): per block, the per-block fold's chain adds fmaf(part_b, sw_b x sa_b, .)
// with sw_b = 2^(ref_b - 133); the sub-range fold's codes are those codes times 2^(ref_b - ref)
// (exact: the tensor core's part scales with them), its chain adds fmaf(part_b 2^(ref_b - ref),
// sa_b, .) and its sum enters the total as fmaf(sum, 2^(ref - 133), total). Host F32 fmaf is the
// device's; the parts and scales are drawn so that no sum leaves the normal range.
TEST(Fp4FoldLayoutTest, SubRangeScaleGivesThePerBlockScalesBits) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> part_dist(-4096.0f, 4096.0f);
  for (int n = 0; n < 20000; ++n) {
    const int subs = 1 + n % 4, blocks = 1 + (n / 4) % 4;
    float total_block = 0.0f, total_sub = 0.0f;
    for (int p = 0; p < subs; ++p) {
      int ref_b[8];
      int ref = 0;
      for (int b = 0; b < blocks; ++b) ref = std::max(ref, ref_b[b] = 100 + static_cast<int>(rng() % 14));
      float sum_block = 0.0f, sum_sub = 0.0f;
      for (int b = 0; b < blocks; ++b) {
        const float part = part_dist(rng), sa = std::ldexp(1.0f, -static_cast<int>(rng() % 12));
        const float sw_b = std::ldexp(1.0f, ref_b[b] - 133);
        sum_block = std::fmaf(part, sw_b * sa, sum_block);
        sum_sub = std::fmaf(std::ldexp(part, ref_b[b] - ref), sa, sum_sub);
      }
      total_block = p == 0 ? 0.0f + sum_block : total_block + sum_block;
      total_sub = p == 0 ? sum_sub * std::ldexp(1.0f, ref - 133) : std::fmaf(sum_sub, std::ldexp(1.0f, ref - 133), total_sub);
    }
    ASSERT_EQ(total_sub, total_block) << "case " << n;
  }
}

}  // namespace
}  // namespace deepinfer::kernels
