// Scalar conversions for the low-precision formats of DeepSeek-V4 checkpoints and of its
// numerics contract (model_v4_flash.md §3, §5.4, §5.5): BF16, FP8 E4M3FN, UE8M0 scale bytes,
// FP4 E2M1. All roundings are round-to-nearest-even, as the reference's casts are.
// Host-only; the CUDA kernels carry their own device versions in kernels/common.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace deepinfer::tensor {

// ---- BF16 -------------------------------------------------------------------------------
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round to nearest even on the dropped 16 bits
  return static_cast<uint16_t>(u >> 16);
}

// The value `f` takes after a round trip through BF16 (how the reference stores activations).
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// ---- UE8M0 scale bytes ------------------------------------------------------------------
inline float e8m0_to_f32(uint8_t e) {
  if (e == 0) return std::ldexp(1.0f, -127);  // 2^-127 is subnormal in F32 but exact
  return std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
}
// The byte of a power of two 2^k, k in [-127, 127].
inline uint8_t e8m0_from_exponent(int k) { return static_cast<uint8_t>(k + 127); }

// ---- FP8 E4M3FN -------------------------------------------------------------------------
inline float e4m3_to_f32(uint8_t b) {
  const int sign = b >> 7;
  const int exp = (b >> 3) & 0xf;
  const int man = b & 0x7;
  float v;
  if (exp == 0xf && man == 0x7) {
    v = std::nanf("");
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -9);  // subnormal: m * 2^-9
  } else {
    v = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  }
  return sign ? -v : v;
}

// Nearest E4M3 value of `x` after saturating to [-448, 448] (ties to even mantissa).
inline float round_e4m3(float x) {
  if (std::isnan(x)) return x;
  const float a = std::fmin(std::fabs(x), 448.0f);
  if (a == 0.0f) return std::copysign(0.0f, x);
  int e = std::ilogb(a);
  if (e < -6) e = -6;                          // below the smallest normal: subnormal step 2^-9
  const float step = std::ldexp(1.0f, e - 3);  // 3 mantissa bits
  const float q = std::nearbyint(a / step) * step;  // a/step is exact; nearbyint rounds to even
  return std::copysign(std::fmin(q, 448.0f), x);
}

// Encodes an E4M3-representable value (use round_e4m3 first). Never produces 0x7F/0xFF.
inline uint8_t e4m3_encode(float v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const float a = std::fabs(v);
  if (a == 0.0f) return sign;
  int e = std::ilogb(a);
  if (e < -6) return sign | static_cast<uint8_t>(std::lrint(std::ldexp(a, 9)));  // subnormal
  const int man = static_cast<int>(std::lrint((std::ldexp(a, -e) - 1.0f) * 8.0f));
  return sign | static_cast<uint8_t>(((e + 7) << 3) | man);
}

inline uint8_t f32_to_e4m3(float x) { return e4m3_encode(round_e4m3(x)); }

// ---- FP4 E2M1 ---------------------------------------------------------------------------
inline float e2m1_to_f32(uint8_t code) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMag[code & 7];
  return (code & 8) ? -m : m;
}

// Code of the E2M1 value nearest to clamp(x, -6, 6); ties go to the even code.
inline uint8_t f32_to_e2m1(float x) {
  const float a = std::fmin(std::fabs(x), 6.0f);
  // Midpoints between consecutive magnitudes; at a tie pick the even code (<= for even
  // lower codes 0,2,4,6 and < for odd ones 1,3,5).
  uint8_t code;
  if (a <= 0.25f) code = 0;
  else if (a < 0.75f) code = 1;
  else if (a <= 1.25f) code = 2;
  else if (a < 1.75f) code = 3;
  else if (a <= 2.5f) code = 4;
  else if (a < 3.5f) code = 5;
  else if (a <= 5.0f) code = 6;
  else code = 7;
  return (std::signbit(x) && code != 0) ? static_cast<uint8_t>(code | 8) : code;
}

inline float round_e2m1(float x) { return e2m1_to_f32(f32_to_e2m1(x)); }

// ---- Power-of-two block scales ----------------------------------------------------------
// The UE8M0 exponent k with 2^k = 2^ceil(log2(amax / qmax)), as the reference computes it in
// F32 (model_v4_flash.md §3.2). `amax` must already be floored (1e-4 for FP8 activations/KV).
inline int pow2_scale_exponent(float amax, float qmax) {
  const float r = amax / qmax;
  return static_cast<int>(std::ceil(std::log2(r)));
}

}  // namespace deepinfer::tensor
