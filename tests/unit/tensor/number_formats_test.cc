#include "tensor/number_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace deepinfer::tensor {
namespace {

TEST(NumberFormatsTest, E4M3RoundTripsEveryFiniteCode) {
  int finite = 0;
  for (int b = 0; b < 256; ++b) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(b));
    if (std::isnan(v)) {
      EXPECT_TRUE(b == 0x7f || b == 0xff) << b;
      continue;
    }
    ++finite;
    EXPECT_EQ(round_e4m3(v), v) << b;
    if (b != 0x80) {  // -0 encodes as 0x80 too
      EXPECT_EQ(e4m3_encode(v), b) << b;
    }
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(NumberFormatsTest, E4M3RoundsToNearestEvenAndSaturates) {
  // 1.0625 lies halfway between 1.0 (mantissa 0) and 1.125 (mantissa 1): ties to even -> 1.0.
  EXPECT_EQ(round_e4m3(1.0625f), 1.0f);
  // 1.1875 lies halfway between 1.125 (m=1) and 1.25 (m=2) -> 1.25.
  EXPECT_EQ(round_e4m3(1.1875f), 1.25f);
  EXPECT_EQ(round_e4m3(1000.0f), 448.0f);
  EXPECT_EQ(round_e4m3(-1000.0f), -448.0f);
  // Subnormal halfway 0.5 * 2^-9 rounds to even (0).
  EXPECT_EQ(round_e4m3(std::ldexp(1.0f, -10)), 0.0f);
  EXPECT_EQ(round_e4m3(std::ldexp(3.0f, -10)), std::ldexp(2.0f, -9));
}

TEST(NumberFormatsTest, E2M1TiesGoToEvenCodes) {
  EXPECT_EQ(f32_to_e2m1(0.25f), 0);
  EXPECT_EQ(f32_to_e2m1(0.75f), 2);
  EXPECT_EQ(f32_to_e2m1(1.25f), 2);
  EXPECT_EQ(f32_to_e2m1(1.75f), 4);
  EXPECT_EQ(f32_to_e2m1(2.5f), 4);
  EXPECT_EQ(f32_to_e2m1(3.5f), 6);
  EXPECT_EQ(f32_to_e2m1(5.0f), 6);
  EXPECT_EQ(f32_to_e2m1(5.01f), 7);
  EXPECT_EQ(f32_to_e2m1(-6.5f), 15);
  for (uint8_t c = 0; c < 16; ++c) {
    if (c == 8) continue;  // -0 encodes as +0
    EXPECT_EQ(f32_to_e2m1(e2m1_to_f32(c)), c);
  }
}

TEST(NumberFormatsTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1.
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST(NumberFormatsTest, E8M0AndPow2Exponent) {
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(130), 8.0f);
  EXPECT_EQ(e8m0_to_f32(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(pow2_scale_exponent(448.0f, 448.0f), 0);
  EXPECT_EQ(pow2_scale_exponent(449.0f, 448.0f), 1);
  EXPECT_EQ(pow2_scale_exponent(1.0f, 448.0f), -8);  // 1/448 -> 2^-8.8 -> ceil -8
}

}  // namespace
}  // namespace deepinfer::tensor
