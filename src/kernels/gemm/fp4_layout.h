// The device layout of FP4 weight codes: the CUDA kernels read FP4 weights with the bits of every
// 32-bit word permuted (once, when the weights reach the device: Ops::to_fp4_device_layout), so
// that decoding a pair of codes into BF16 takes fewer instructions (gemm_common.cuh,
// fp4_quad_fast). Plain C++ (host and device): the permutation kernel, the decoders and the CPU
// tests (fp4_layout_test) share it.
//
// A checkpoint word holds eight E2M1 codes, pair p = byte p (element 2p in its low nibble, 2p + 1
// in its high one; code bits m, e0, e1, sign). The decoders want each pair as two BF16 whose bits
// are the codes' values times 2^-126 — code bits m, e0, e1 at BF16 bits 6-8, sign at 15, i.e. at
// kFp4PairBits = {6, 7, 8, 15, 22, 23, 24, 31} of the pair's 32 bits — then one BF16x2 multiply by
// the scale. In the device layout pair 0 is stored at exactly those bits, pair 1 three bits lower
// and pair 2 six bits lower (three disjoint copies of the pattern: word & mask, (word << 3) &
// mask, (word << 6) & mask), and pair 3 in the eight bits left, from which one shift, one mask
// and one multiply place it (fp4_pair_bits). Per word that is 9 integer instructions instead
// of the 15 of the checkpoint layout (even/odd nibble split, byte permute, multiply, mask per
// pair); with the 4 BF16x2 multiplies, 13 instead of 19 per eight weights.
#pragma once

#include <cstdint>

#include "kernels/gemm/canonical_k.h"  // DI_HOST_DEVICE

namespace deepinfer::kernels {

// BF16x2 bits of a placed pair: code bits m, e0, e1, sign of the low element at 6, 7, 8, 15, of
// the high element at 22, 23, 24, 31.
inline constexpr uint32_t kFp4PairBits = 0x81c081c0u;
// Pair 3's stored bits shifted right by 7 (kFp4LastMask) and multiplied by kFp4LastMul land on
// kFp4PairBits: m, e0 (stored at 13, 14) by x1, e1 (10) by x2^5, sign (11) by x2^11, high
// element 16 bits up. The three shifted copies of the eight bits are disjoint (no carries).
inline constexpr uint32_t kFp4LastMask = 0x00d800d8u;
inline constexpr uint32_t kFp4LastMul = 1u + (1u << 5) + (1u << 11);

// Device-layout bit of bit b (0-3: low nibble m, e0, e1, sign; 4-7: high nibble) of pair p.
DI_HOST_DEVICE constexpr int fp4_device_bit(int p, int b) {
  const int placed = (b < 4 ? 0 : 16) + (b % 4 == 3 ? 15 : 6 + b % 4);  // kFp4PairBits, in order
  if (p < 3) return placed - 3 * p;
  const int last = (b % 4 == 0 ? 13 : b % 4 == 1 ? 14 : b % 4 == 2 ? 10 : 11);
  return (b < 4 ? 0 : 16) + last;
}

// A checkpoint word in the device layout, and back.
DI_HOST_DEVICE constexpr uint32_t fp4_to_device_word(uint32_t w) {
  uint32_t out = 0;
  for (int p = 0; p < 4; ++p)
    for (int b = 0; b < 8; ++b) out |= ((w >> (8 * p + b)) & 1u) << fp4_device_bit(p, b);
  return out;
}
DI_HOST_DEVICE constexpr uint32_t fp4_from_device_word(uint32_t d) {
  uint32_t out = 0;
  for (int p = 0; p < 4; ++p)
    for (int b = 0; b < 8; ++b) out |= ((d >> fp4_device_bit(p, b)) & 1u) << (8 * p + b);
  return out;
}
// Element e (0-7) of a device-layout word as its E2M1 code.
DI_HOST_DEVICE constexpr uint32_t fp4_device_code(uint32_t d, int e) {
  uint32_t code = 0;
  for (int b = 0; b < 4; ++b) code |= ((d >> fp4_device_bit(e / 2, 4 * (e % 2) + b)) & 1u) << b;
  return code;
}

// Pair `pair` (0-3) of a device-layout word, placed (kFp4PairBits; the decoders' integer part):
// pairs 0-2 are masked shifts, pair 3 a shift, a mask and a multiply.
DI_HOST_DEVICE constexpr uint32_t fp4_pair_bits(uint32_t d, int pair) {
  switch (pair) {
    case 0: return d & kFp4PairBits;
    case 1: return (d << 3) & kFp4PairBits;
    case 2: return (d << 6) & kFp4PairBits;
    default: return (((d >> 7) & kFp4LastMask) * kFp4LastMul) & kFp4PairBits;
  }
}

static_assert(fp4_from_device_word(fp4_to_device_word(0x12345678u)) == 0x12345678u);
static_assert(fp4_pair_bits(fp4_to_device_word(0xf0u << 24), 3) == 0x81c00000u);

}  // namespace deepinfer::kernels
