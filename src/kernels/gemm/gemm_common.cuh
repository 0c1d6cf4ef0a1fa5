// What the two dequantising tensor-core GEMM kernels (dequant_gemm: large M, shared-memory tiles;
// dequant_gemv: M <= 32, weights streamed straight into registers) share, and why their results
// are bitwise equal — which is what makes the CUDA backend batch invariant: a row's output never
// depends on how many other rows share the launch, because both kernels perform the same F32
// operations in the same order for every output element.
//
// The canonical order for C[m][n] = sum_k A[m][k] W[n][k]:
//   * K is cut into P = min(8, ceil(K / 512)) sub-ranges of R = gemm_subrange(K) elements (a
//     multiple of kGemmBK), a function of K alone. Each sub-range is accumulated from zero; the
//     sub-range sums are added in order: total = ((0 + s_0) + s_1) + ...
//   * Inside a sub-range, tiles of kGemmBK elements in ascending k; a tile is BK / Wf windows of
//     Wf = 4 Lf elements, where Lf = elements per 16 stored bytes of the weight format (BF16 8,
//     FP8 16, FP4 32). Each window is Lf / 4 mma.m16n8k16 steps. Step j of the window at kw takes
//     physical k = kw + c Lf + 4j + {0, 1, 2, 3} for c = 0..3 as its 16 logical k's: the lane
//     (g = lane / 4, c = lane % 4) supplies A[g][kw + c Lf + 4j + {0,1}] as a0 (logical 2c, 2c+1),
//     A[g][... + {2,3}] as a2 (logical 2c+8, 2c+9), rows g+8 as a1/a3, and W[g][...] likewise as
//     b0/b1. A permutation of k applied to both operands leaves the product unchanged; it lets a
//     lane hold one contiguous 16-byte run of a weight row (one vector load, one scale block).
//   * k beyond K contributes zero products (zero-filled operands), identically in both kernels.
// Weights are dequantised exactly as in the reference (stored code x scale, exact in BF16 for
// UE8M0 scales; FP8 with F32 scales is rounded to BF16 the same way in both kernels), so both
// kernels also equal the reference up to that summation order.
#pragma once

#include "kernels/common/device_utils.cuh"
#include "kernels/common/mma_utils.cuh"
#include "kernels/gemm/canonical_k.h"
#include "kernels/gemm/fp4_fold_layout.h"
#include "kernels/gemm/fp4_layout.h"
#include "kernels/launch.h"

namespace deepinfer::kernels {

// Elements per 16 stored bytes (the run one lane holds) for each weight format.
__host__ __device__ constexpr int run_elems(WeightFmt f) {
  return f == WeightFmt::kBF16 ? 8 : (f == WeightFmt::kFp8Block ? 16 : 32);
}

__device__ __forceinline__ float weight_scale(const WeightDesc& w, int64_t n, int64_t k) {
  if (w.fmt == WeightFmt::kFp8Block) {
    const int64_t si = (n / w.block_out) * w.scale_cols + k / w.block_in;
    return w.scale_f32 ? reinterpret_cast<const float*>(w.scale)[si] : e8m0_to_f32(w.scale[si]);
  }
  return e8m0_to_f32(w.scale[n * w.scale_cols + k / 32]);  // FP4: UE8M0 per 32 of a row
}

__device__ __forceinline__ float e2m1_value(uint32_t code) {
  // Magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6 as twice their value in the nibbles of one constant
  // (no local-memory table).
  const float mag = 0.5f * static_cast<float>((0xC8643210u >> (4 * (code & 7))) & 0xfu);
  return (code & 8) ? -mag : mag;
}

// The device-layout word (fp4_layout.h) holding FP4 element (n, k): eight elements per aligned
// 4 bytes (rows of K % 32 == 0 elements: CudaOps checks).
__device__ __forceinline__ uint32_t fp4_word(const WeightDesc& w, int64_t n, int64_t k) {
  return *reinterpret_cast<const uint32_t*>(w.w + n * w.row_bytes + (k / 8) * 4);
}

// FP4 element (n, k)'s E2M1 code, in whichever device layout the weight is (fp4_layout.h, or
// the fold layout of the FP8-order experts: fp4_fold_layout.h).
__device__ __forceinline__ uint32_t fp4_code_at(const WeightDesc& w, int64_t n, int64_t k) {
  if (w.fp4_fold) {
    const uint32_t d = *reinterpret_cast<const uint32_t*>(w.w + n * w.row_bytes + fp4_fold_word_offset(k));
    return fp4_fold_code(d, static_cast<int>(k % 8));
  }
  return fp4_device_code(fp4_word(w, n, k), static_cast<int>(k % 8));
}

// One weight element as F32 (0 outside the matrix is the caller's business).
__device__ __forceinline__ float dequant_weight(const WeightDesc& w, int64_t n, int64_t k) {
  switch (w.fmt) {
    case WeightFmt::kBF16:
      return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(w.w + n * w.row_bytes)[k]);
    case WeightFmt::kFp8Block:
      return e4m3_to_f32(w.w[n * w.row_bytes + k]) * weight_scale(w, n, k);
    case WeightFmt::kFp4Block:
      return e2m1_value(fp4_code_at(w, n, k)) * weight_scale(w, n, k);
  }
  return 0.0f;
}

// True when 16-byte runs of this weight can be loaded as vectors and each run lies inside one
// scale block (else the element-wise path is taken; the values are the same).
__device__ __forceinline__ bool weight_runs_vectorisable(const WeightDesc& w) {
  return (w.row_bytes % 16 == 0) && (reinterpret_cast<uintptr_t>(w.w) % 16 == 0) &&
         (w.fmt != WeightFmt::kFp8Block || w.block_in % 16 == 0);
}

// BF16x2 product of two pairs given as bits.
__device__ __forceinline__ uint32_t hmul2_bits(uint32_t a, uint32_t b) {
  const __nv_bfloat162 r =
      __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// Four E2M1 codes (the nibbles of v in checkpoint order, lowest first: decode_quad un-permutes the
// device-layout word first) times a UE8M0 scale as two BF16 pairs, built
// with byte permutes: the magnitude's BF16 bytes come from two 8-entry tables, the signs (nibble
// bits 3, 7 -> pair bits 15, 31) are routed by one multiply (bit 3 x 2^12 lands on 15, bit 7 x
// 2^24 on 31; the cross terms land on bits 19 and 27, masked off), then one BF16x2 multiply by the
// scale. Exact (power-of-two scale): decode_quad's path for scale codes above 128, where
// fp4_quad_fast's factor would overflow; both give the same bits.
__device__ __forceinline__ void fp4_quad(uint32_t v, uint32_t scale_bf16x2, uint32_t& b0, uint32_t& b1) {
  // BF16 bytes of 0, .5, 1, 1.5, 2, 3, 4, 6: low bytes 00 00 80 c0 00 40 80 c0, high 00 3f 3f 3f 40 40 40 40.
  constexpr uint32_t kLo0 = 0xc0800000u, kLo1 = 0xc0804000u, kHi0 = 0x3f3f3f00u, kHi1 = 0x40404040u;
  constexpr uint32_t kSignRoute = (1u << 12) | (1u << 24), kSignBits = 0x80008000u;
  const uint32_t sel = v & 0x7777u, sign = v & 0x8888u;
  uint32_t lo, hi;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(lo) : "r"(kLo0), "r"(kLo1), "r"(sel));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(hi) : "r"(kHi0), "r"(kHi1), "r"(sel));
  uint32_t m0, m1;
  asm("prmt.b32 %0, %1, %2, 0x5140;" : "=r"(m0) : "r"(lo), "r"(hi));
  asm("prmt.b32 %0, %1, %2, 0x7362;" : "=r"(m1) : "r"(lo), "r"(hi));
  m0 |= ((sign & 0xffu) * kSignRoute) & kSignBits;
  m1 |= ((sign >> 8) * kSignRoute) & kSignBits;
  b0 = hmul2_bits(m0, scale_bf16x2);
  b1 = hmul2_bits(m1, scale_bf16x2);
}
// Elements 4h .. 4h+3 of the eight E2M1 codes of a device-layout `word` (fp4_layout.h: pairs
// 2h and 2h + 1) times a UE8M0 scale as two BF16 pairs — the fast form of fp4_quad (the FP4
// experts' decode dominates their GEMMs). fp4_pair_bits places a pair's code bits where, read as
// BF16, they are the codes' values times 2^-126 (the E2M1 subnormal 0.5 included), so one BF16x2
// multiply by scale x 2^126 (e8m0_times_2p126_bf16x2) gives the exact dequantised values, the
// bits fp4_quad gives: per word 9 integer instructions and 4 multiplies.
__device__ __forceinline__ void fp4_quad_fast(uint32_t word, int h, uint32_t scale_2p126_bf16x2, uint32_t& b0,
                                              uint32_t& b1) {
  b0 = hmul2_bits(fp4_pair_bits(word, 2 * h), scale_2p126_bf16x2);
  b1 = hmul2_bits(fp4_pair_bits(word, 2 * h + 1), scale_2p126_bf16x2);
}
// A UE8M0 scale 2^(e-127) times 2^126 as a BF16x2 pair (exponent field e + 126; e <= 128 fits).
__device__ __forceinline__ uint32_t e8m0_times_2p126_bf16x2(uint8_t e) {
  const uint32_t h = (static_cast<uint32_t>(e) + 126u) << 7;
  return h | (h << 16);
}
// A UE8M0 scale as a BF16x2 pair (2^-127, code 0, is a BF16 subnormal).
__device__ __forceinline__ uint32_t e8m0_bf16x2(uint8_t e) {
  const uint32_t h = e == 0 ? 0x0040u : static_cast<uint32_t>(e) << 7;
  return h | (h << 16);
}

// Four E4M3 bytes of v times a UE8M0 scale as two BF16 pairs: an E4M3 code's bits moved into a
// BF16 (sign to bit 15, exponent and mantissa shifted left by 4) are its value times 2^-120 —
// subnormals included — so one BF16x2 multiply by scale x 2^120 (fp8_scale_bf16x2) gives the
// exact dequantised values. Magnitudes and signs are permuted into place separately (the
// magnitude x 16 + the sign byte is one shift-add). Used by both GEMM kernels whenever the scales
// are UE8M0.
__device__ __forceinline__ void fp8_quad(uint32_t v, uint32_t scale_bf16x2, uint32_t& b0, uint32_t& b1) {
  const uint32_t mag = v & 0x7f7f7f7fu, sign = v & 0x80808080u;
  uint32_t t0, t1, s0, s1;
  asm("prmt.b32 %0, %1, 0, 0x4140;" : "=r"(t0) : "r"(mag));   // bytes 0, 1 -> bits 0-7, 16-23
  asm("prmt.b32 %0, %1, 0, 0x4342;" : "=r"(t1) : "r"(mag));   // bytes 2, 3
  asm("prmt.b32 %0, %1, 0, 0x1404;" : "=r"(s0) : "r"(sign));  // sign bytes 0, 1 -> bits 8-15, 24-31
  asm("prmt.b32 %0, %1, 0, 0x3424;" : "=r"(s1) : "r"(sign));
  b0 = hmul2_bits(t0 * 16u + s0, scale_bf16x2);
  b1 = hmul2_bits(t1 * 16u + s1, scale_bf16x2);
}
// A UE8M0 scale 2^(e-127) times 2^120 as a BF16x2 pair (exponent field e + 120; e <= 134 fits).
__device__ __forceinline__ uint32_t e8m0_times_2p120_bf16x2(uint8_t e) {
  const uint32_t h = (static_cast<uint32_t>(e) + 120u) << 7;
  return h | (h << 16);
}
__device__ __forceinline__ uint8_t fp8_scale_code(const WeightDesc& w, int64_t n, int64_t k) {
  return w.scale[(n / w.block_out) * w.scale_cols + k / w.block_in];
}
__device__ __forceinline__ uint8_t fp4_scale_code(const WeightDesc& w, int64_t n, int64_t k) {
  return w.scale[n * w.scale_cols + k / 32];
}

// Four E4M3 bytes of v times an F32 scale as two BF16 pairs, through F32 products: F32 scales
// (Flash-Base) and UE8M0 codes above 134 (beyond fp8_quad's range; never in practice).
__device__ __forceinline__ void fp8_quad_f32(uint32_t v, float s, uint32_t& b0, uint32_t& b1) {
  b0 = pack_bf16(e4m3_to_f32(v & 0xff) * s, e4m3_to_f32((v >> 8) & 0xff) * s);
  b1 = pack_bf16(e4m3_to_f32((v >> 16) & 0xff) * s, e4m3_to_f32(v >> 24) * s);
}

// A run's UE8M0 scale code as the BF16x2 factor of the fast decoders (unused for BF16), and
// whether that decoder covers the code (FP8 codes above 134 take the F32 path, FP4 codes above
// 128 fp4_quad with the plain scale).
template <WeightFmt F>
__device__ __forceinline__ uint32_t quad_scale(uint8_t code) {
  if constexpr (F == WeightFmt::kFp4Block) return e8m0_times_2p126_bf16x2(code);
  if constexpr (F == WeightFmt::kFp8Block) return e8m0_times_2p120_bf16x2(code);
  return 0;
}
template <WeightFmt F>
__device__ __forceinline__ bool quad_scale_exact(uint8_t code) {
  if constexpr (F == WeightFmt::kFp8Block) return code <= 134;
  if constexpr (F == WeightFmt::kFp4Block) return code <= 128;  // scales up to 2: always in practice
  return true;
}

// Elements 4j .. 4j+3 of a 16-byte run as the BF16 pairs b0 = (4j, 4j+1), b1 = (4j+2, 4j+3),
// given the run's quad_scale (valid when quad_scale_exact): the streaming kernel's inner loop,
// with the scale computed once per run instead of once per quad.
template <WeightFmt F>
__device__ __forceinline__ void decode_quad_scaled(const uint4& raw, uint32_t scale, int j, uint32_t& b0,
                                                   uint32_t& b1) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (F == WeightFmt::kBF16) {
    b0 = words[(2 * j) % 4];
    b1 = words[(2 * j + 1) % 4];
  } else if constexpr (F == WeightFmt::kFp4Block) {
    fp4_quad_fast(words[j / 2], j % 2, scale, b0, b1);
  } else {
    fp8_quad(words[j], scale, b0, b1);
  }
}

// The one weight decoder of both GEMM kernels: elements 4j .. 4j+3 of a 16-byte run of format F
// with UE8M0 scale code `code` (unused for BF16). Both kernels decode through it (or through
// decode_quad_scaled, which it is whenever the code allows), so they see the same weights bit for
// bit.
template <WeightFmt F>
__device__ __forceinline__ void decode_quad(const uint4& raw, uint8_t code, int j, uint32_t& b0, uint32_t& b1) {
  if (quad_scale_exact<F>(code)) {
    decode_quad_scaled<F>(raw, quad_scale<F>(code), j, b0, b1);
  } else {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    if constexpr (F == WeightFmt::kFp4Block) {
      fp4_quad((fp4_from_device_word(words[j / 2]) >> (16 * (j % 2))) & 0xffffu, e8m0_bf16x2(code), b0, b1);
    } else {
      fp8_quad_f32(words[j], e8m0_to_f32(code), b0, b1);
    }
  }
}

// One weight element as the tensor-core kernels see it (BF16, through decode_quad), for their
// element-wise edge paths.
__device__ __forceinline__ __nv_bfloat16 dequant_weight_bf16(const WeightDesc& w, int64_t n, int64_t k) {
  uint32_t b0 = 0, b1 = 0;
  if (w.fmt == WeightFmt::kFp8Block) {
    if (w.scale_f32) return __float2bfloat16_rn(dequant_weight(w, n, k));
    decode_quad<WeightFmt::kFp8Block>(make_uint4(w.w[n * w.row_bytes + k], 0, 0, 0), fp8_scale_code(w, n, k), 0, b0, b1);
  } else if (w.fmt == WeightFmt::kFp4Block) {
    // Element 0 of a word holding only element k's code (in the device layout, as decode_quad reads).
    const uint32_t code = fp4_code_at(w, n, k);
    decode_quad<WeightFmt::kFp4Block>(make_uint4(fp4_to_device_word(code), 0, 0, 0), fp4_scale_code(w, n, k), 0, b0,
                                      b1);
  } else {
    return __float2bfloat16_rn(dequant_weight(w, n, k));
  }
  return *reinterpret_cast<const __nv_bfloat16*>(&b0);  // low half: element 0 of the quad
}

// Dequantises one 16-byte run (raw) of row n starting at element k into BF16 pairs out[Lf / 2]
// (out[i] holds elements 2i, 2i+1 in its low, high halves).
template <WeightFmt F>
__device__ __forceinline__ void dequant_run(const WeightDesc& w, int64_t n, int64_t k, const uint4& raw, uint32_t* out) {
  if constexpr (F == WeightFmt::kFp8Block) {
    if (w.scale_f32) {
      const float s = weight_scale(w, n, k);
      const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) fp8_quad_f32(words[q], s, out[2 * q], out[2 * q + 1]);
      return;
    }
  }
  const uint8_t code =
      F == WeightFmt::kFp8Block ? fp8_scale_code(w, n, k) : (F == WeightFmt::kFp4Block ? fp4_scale_code(w, n, k) : 0);
#pragma unroll
  for (int q = 0; q < run_elems(F) / 4; ++q) decode_quad<F>(raw, code, q, out[2 * q], out[2 * q + 1]);
}

// Steps j and j + 1 of a transposed window (weights as the mma's A operand: row tiles 0 and 1,
// i.e. columns g and g + 8, decoded by `decode(t, step, b0, b1)`; one row of activations as B):
// x holds the lane's activations 4j .. 4j + 7, so one 16-byte read serves both steps. The lean
// kernel's inner loop, in the canonical order.
template <typename Decode>
__device__ __forceinline__ void transposed_mma_pair(float* acc, Decode decode, int j, const uint4& x) {
#pragma unroll
  for (int jj = 0; jj < 2; ++jj) {
    uint32_t w0[2], w1[2];
    decode(0, j + jj, w0[0], w0[1]);
    decode(1, j + jj, w1[0], w1[1]);
    const uint32_t af[4] = {w0[0], w1[0], w0[1], w1[1]};
    const uint32_t bx[2] = {jj ? x.z : x.x, jj ? x.w : x.y};
    mma_bf16_16816(acc, af, bx);
  }
}

// C[i] = v in the output's type (BF16 rounded to nearest even, or F32): every GEMM kernel's store.
__device__ __forceinline__ void store_out(void* C, bool c_bf16, int64_t i, float v) {
  if (c_bf16) {
    reinterpret_cast<__nv_bfloat16*>(C)[i] = __float2bfloat16_rn(v);
  } else {
    reinterpret_cast<float*>(C)[i] = v;
  }
}

// Split-K launches: after its partials are written, whether this CTA is the last of the `arrivals`
// CTAs sharing `counter` — the one that folds them (arrival order decides only who folds, never
// the order). Called by every thread of the CTA; the folder re-arms the counter (*counter = 0).
__device__ __forceinline__ bool last_to_arrive(int32_t* counter, int arrivals) {
  __shared__ bool s_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(counter, 1) == arrivals - 1;
  __syncthreads();
  if (!s_last) return false;
  __threadfence();
  return true;
}

}  // namespace deepinfer::kernels
