// The device layout of FP4 codes (src/kernels/gemm/fp4_layout.h) without a GPU: the permutation is
// a bijection of the word's 32 bits, every element's code survives it, and the decoders' integer
// part (fp4_pair_bits, what fp4_quad_fast runs) gives each pair's BF16 x 2^-126 bits — checked
// against an independent placement of the checkpoint nibbles for every code of every pair, with
// the other pairs' bits random (they must not leak into it).
#include "kernels/gemm/fp4_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

namespace deepinfer::kernels {
namespace {

// E2M1 code -> value (the spec's table; sign bit 3).
float e2m1(uint32_t code) {
  static const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (code & 8) ? -kMag[code & 7] : kMag[code & 7];
}
// A BF16 bit pattern's value (exact: bits into the top of an F32).
float bf16_value(uint32_t bits16) {
  const uint32_t f = bits16 << 16;
  float v;
  std::memcpy(&v, &f, 4);
  return v;
}

TEST(Fp4LayoutTest, PermutationIsABijection) {
  std::set<int> bits;
  for (int p = 0; p < 4; ++p)
    for (int b = 0; b < 8; ++b) {
      const int d = fp4_device_bit(p, b);
      ASSERT_GE(d, 0);
      ASSERT_LT(d, 32);
      bits.insert(d);
    }
  EXPECT_EQ(bits.size(), 32u);
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t w = rng();
    ASSERT_EQ(fp4_from_device_word(fp4_to_device_word(w)), w);
    ASSERT_EQ(fp4_to_device_word(fp4_from_device_word(w)), w);
  }
}

TEST(Fp4LayoutTest, EveryElementKeepsItsCode) {
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t w = rng(), d = fp4_to_device_word(w);
    for (int e = 0; e < 8; ++e) ASSERT_EQ(fp4_device_code(d, e), (w >> (4 * e)) & 0xfu) << "element " << e;
  }
}

TEST(Fp4LayoutTest, PairBitsAreTheCodesTimes2PowMinus126) {
  std::mt19937 rng(3);
  for (int pair = 0; pair < 4; ++pair) {
    for (uint32_t v = 0; v < 256; ++v) {      // the pair's two codes
      for (int trial = 0; trial < 16; ++trial) {  // random other pairs
        uint32_t w = rng();
        w = (w & ~(0xffu << (8 * pair))) | (v << (8 * pair));
        const uint32_t bits = fp4_pair_bits(fp4_to_device_word(w), pair);
        ASSERT_EQ(bits & ~kFp4PairBits, 0u);
        // Independent of the layout: each half times 2^126 is the code's value (BF16 subnormals
        // for 0.5, exact).
        const float lo = std::ldexp(bf16_value(bits & 0xffffu), 126), hi = std::ldexp(bf16_value(bits >> 16), 126);
        ASSERT_EQ(lo, e2m1(v & 0xf)) << "pair " << pair << " codes " << v;
        ASSERT_EQ(hi, e2m1(v >> 4)) << "pair " << pair << " codes " << v;
        ASSERT_EQ(std::signbit(lo), (v & 0x8) != 0);  // -0 stays -0
        ASSERT_EQ(std::signbit(hi), (v & 0x80) != 0);
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels
