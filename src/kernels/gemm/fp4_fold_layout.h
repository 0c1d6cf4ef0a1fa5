// FP4 expert weights in the FP8 order (docs/cuda.md "Session 48"): the device layout and the
// in-register decode that turn a row's E2M1 codes and its four 1 x 32 UE8M0 scales of a 128-input
// block into E4M3 codes with one scale for the block — the form of a dense FP8 weight block, so
// the FP8-order kernels (fp8_gemv.cuh's header defines the order) can take FP4 experts with the
// same k grouping (fp8_order_layout.h) and the same per-128 promotion.
//
// The fold (inference/convert.py --expert-dtype fp8 does it per 128 x 128 block; here per row and
// canonical K sub-range, gemm_subrange): with e_j the scale code of 32-block j of a row's 128-input
// block and ref the largest e over the row's sub-range that holds the block, every code of block j
// becomes E4M3(fp4 x 2^(6 + d_j)), d_j = e_j - ref <= 0, and the block's weight scale is
// 2^(ref - 133) (= 2^(e_j - 127) / 2^(6 + d_j)). Exact for d_j >= -14 (fp4 x 2^(6 + d) is then a
// multiple of 2^-9, E4M3's smallest subnormal, with at most two significant bits, and at most
// 6 x 64 = 384 < 448); a 32-block 2^15 or more below its sub-range's largest scale rounds to
// E4M3's subnormals (round to nearest, ties to even) — below 2^-23 of the sub-range's largest
// weight. One scale per row and sub-range (session 51; it was per block before) lets the kernel
// promote a block's sums with the activation's scale alone and apply the row's once per sub-range:
// a power of two commutes with every rounding of the sums, so the bits are those of a per-block
// scale wherever both folds are exact (all of a sub-range's 32-blocks within 2^14 of its largest).
//
// The FP8 order gives lane c of a window w (64 inputs) the inputs 64 w + 16 c .. + 15: eight
// checkpoint bytes, one 32-block (2 w + c / 2), two k32 steps s of eight inputs 8 s + 4 h + j
// (a0 for h = 0, a2 for h = 1: positions 16 h + 4 c + j). The device layout puts them where one
// 16-byte load per row and block finds them:
//   * words: in each row's 64-byte block, device word 4 c + 2 w + s holds checkpoint word
//     8 w + 2 c + s (lane c's run = its words of both windows, in step order);
//   * bits: within a word (inputs t = 0..7, nibble t of the checkpoint word), each nibble keeps its
//     three magnitude bits (m, e0, e1) in place; the signs of inputs 0..3 (a0) move to bits 7, 15,
//     23, 31 and those of inputs 4..7 (a2) to bits 3, 11, 19, 27.
// Decode of a word with the step's table T (byte i = the E4M3 code of magnitude i at that d):
//   a0 = prmt(T, w & 0x7777) | (w & 0x80808080)
//   a2 = prmt(T, (w >> 16) & 0x7777) | ((w << 4) & 0x80808080)
// — eight integer instructions per eight weights (against 13 for BF16 in fp4_layout.h).
// Plain C++ (host and device): the layout kernel, the decoders and the CPU tests
// (fp4_fold_layout_test) share it.
#pragma once

#include <cstdint>

#include "kernels/gemm/canonical_k.h"  // DI_HOST_DEVICE

namespace deepinfer::kernels {

inline constexpr int kFp4FoldBlockBytes = 64;  // a row's 128-input block
inline constexpr int kFp4FoldMaxShift = 24;    // tables for d = 0 .. -24 (below: every code rounds to zero)

// E4M3 code (sign 0) nearest to k x 2^(e - 9), k < 16, -30 <= e <= 20 (round to nearest, ties to
// even; past E4M3's largest finite 448 it saturates, which the fold never reaches). E4M3: bias 7,
// subnormals M x 2^-9. The value is exact as u x 2^-39.
DI_HOST_DEVICE constexpr uint32_t e4m3_from_scaled(uint32_t k, int e) {
  if (k == 0) return 0;
  const uint64_t u = static_cast<uint64_t>(k) << (e + 30);
  int msb = 63;
  while (((u >> msb) & 1) == 0) --msb;
  int E = msb - 32;                          // value 2^(msb - 39) x 1.f: E4M3 exponent field msb - 39 + 7
  const int sh = E >= 1 ? msb - 3 : 30;      // one mantissa step: 2^(msb - 3), or 2^-9 for subnormals
  uint64_t q = u >> sh;                      // 8..15 for normals, 0..7 for subnormals
  const uint64_t r = u & ((uint64_t{1} << sh) - 1), half = uint64_t{1} << (sh - 1);
  if (r > half || (r == half && (q & 1))) ++q;
  if (E < 1) return static_cast<uint32_t>(q);  // q = 8 is the smallest normal's code, 0x08
  if (q == 16) ++E, q = 8;
  if (E > 15 || (E == 15 && q > 14)) return 0x7e;
  return static_cast<uint32_t>(E << 3) | static_cast<uint32_t>(q - 8);
}

// E2M1 magnitude i (0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6) as k x 2^-1: k = 0, 1, 2, 3, 4, 6, 8, 12.
DI_HOST_DEVICE constexpr uint32_t fp4_half_units(int i) {
  return i < 4 ? static_cast<uint32_t>(i) : static_cast<uint32_t>((2 + (i & 1)) << ((i >> 1) - 1));
}

// The step table for d (<= 0): byte i = E4M3 code of magnitude i x 2^(6 + d). lo: bytes 0-3, hi: 4-7.
struct Fp4FoldTable {
  uint32_t lo = 0, hi = 0;
};
DI_HOST_DEVICE constexpr Fp4FoldTable fp4_fold_table(int d) {
  Fp4FoldTable t;
  for (int i = 0; i < 8; ++i) {
    // magnitude i x 2^(6 + d) = half_units x 2^(5 + d) = half_units x 2^((14 + d) - 9)
    const uint32_t b = e4m3_from_scaled(fp4_half_units(i), 14 + d);
    if (i < 4) {
      t.lo |= b << (8 * i);
    } else {
      t.hi |= b << (8 * (i - 4));
    }
  }
  return t;
}

// Device word index (0..15) of checkpoint word q of a row's 64-byte block, and back.
DI_HOST_DEVICE constexpr int fp4_fold_word_slot(int q) {
  const int w = q >> 3, c = (q >> 1) & 3, s = q & 1;  // q = 8 w + 2 c + s
  return 4 * c + 2 * w + s;
}
DI_HOST_DEVICE constexpr int fp4_fold_word_source(int slot) {
  const int c = slot >> 2, w = (slot >> 1) & 1, s = slot & 1;  // slot = 4 c + 2 w + s
  return 8 * w + 2 * c + s;
}

// A checkpoint word's bits in the device layout, and back (only the sign bits move).
inline constexpr uint32_t kFp4FoldMagBits = 0x77777777u;
DI_HOST_DEVICE constexpr uint32_t fp4_fold_word_bits(uint32_t w) {
  uint32_t out = w & kFp4FoldMagBits;
  for (int t = 0; t < 8; ++t) {
    const uint32_t sign = (w >> (4 * t + 3)) & 1u;
    const int to = t < 4 ? 8 * t + 7 : 8 * (t - 4) + 3;
    out |= sign << to;
  }
  return out;
}
DI_HOST_DEVICE constexpr uint32_t fp4_unfold_word_bits(uint32_t d) {
  uint32_t out = d & kFp4FoldMagBits;
  for (int t = 0; t < 8; ++t) {
    const int from = t < 4 ? 8 * t + 7 : 8 * (t - 4) + 3;
    out |= ((d >> from) & 1u) << (4 * t + 3);
  }
  return out;
}

// prmt.b32 (default mode) over the table with selector nibbles 0..7 (the callers mask bit 3 off).
DI_HOST_DEVICE inline uint32_t fp4_fold_prmt(const Fp4FoldTable& t, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(t.lo, t.hi, sel);
#else
  uint32_t out = 0;
  for (int n = 0; n < 4; ++n) {
    const uint32_t i = (sel >> (4 * n)) & 7u;
    const uint32_t b = ((i < 4 ? t.lo : t.hi) >> (8 * (i & 3))) & 0xffu;
    out |= b << (8 * n);
  }
  return out;
#endif
}

// A device word's a0 (inputs 0..3) and a2 (inputs 4..7) E4M3 operands with step table t.
DI_HOST_DEVICE inline void fp4_fold_decode(uint32_t w, const Fp4FoldTable& t, uint32_t& a0, uint32_t& a2) {
  a0 = fp4_fold_prmt(t, w & 0x7777u) | (w & 0x80808080u);
  a2 = fp4_fold_prmt(t, (w >> 16) & 0x7777u) | ((w << 4) & 0x80808080u);
}

// Input t (0..7) of a device word as its E2M1 code (the element-wise paths: dequant_weight).
DI_HOST_DEVICE constexpr uint32_t fp4_fold_code(uint32_t d, int t) {
  const int sign_bit = t < 4 ? 8 * t + 7 : 8 * (t - 4) + 3;
  return ((d >> (4 * t)) & 7u) | (((d >> sign_bit) & 1u) << 3);
}
// Byte offset, within a row, of the device word holding input k (k / 128 blocks of 64 bytes).
DI_HOST_DEVICE constexpr int64_t fp4_fold_word_offset(int64_t k) {
  return (k / 128) * kFp4FoldBlockBytes + 4 * fp4_fold_word_slot(static_cast<int>((k % 128) / 8));
}

// A row's reference for a K sub-range: the largest of its scale codes (code words: 32-block j of
// a 128-input block at byte j). fp4_fold_ref_add folds one code word into a running maximum m
// (start 0) held as two 16-bit lanes (bytes 0 and 1 low, 2 and 3 high); fp4_fold_ref reads it.
// Two PRMTs and one three-way 16x2 max (sm_90's DPX) per word: byte-SIMD maxima are emulated on
// sm_90 (two __vmaxu4 per word took 15 instructions, ncu SASS, session 50).
DI_HOST_DEVICE inline uint32_t fp4_fold_ref_add(uint32_t m, uint32_t codes) {
#if defined(__CUDA_ARCH__)
  return __vimax3_u16x2(m, __byte_perm(codes, 0u, 0x4240), __byte_perm(codes, 0u, 0x4341));
#else
  for (int j = 0; j < 4; ++j) {
    const uint32_t e = (codes >> (8 * j)) & 0xffu, shift = 16 * (j >> 1);
    if (e > ((m >> shift) & 0xffffu)) m = (m & ~(0xffffu << shift)) | (e << shift);
  }
  return m;
#endif
}
DI_HOST_DEVICE inline int fp4_fold_ref(uint32_t m) {
  const uint32_t lo = m & 0xffffu, hi = m >> 16;
  return static_cast<int>(lo > hi ? lo : hi);
}

static_assert(fp4_fold_word_source(fp4_fold_word_slot(11)) == 11);
static_assert(fp4_unfold_word_bits(fp4_fold_word_bits(0x89abcdefu)) == 0x89abcdefu);
static_assert(e4m3_from_scaled(12, 14) == 0x7c);  // 6 x 2^6 = 384 = 1.5 x 2^8: E 15, M 4
static_assert(e4m3_from_scaled(1, 14) == 0x60);   // 0.5 x 2^6 = 32 = 2^5: E 12
static_assert(e4m3_from_scaled(1, 0) == 0x01);    // 2^-9: the smallest subnormal

}  // namespace deepinfer::kernels
