// Block-scaled GEMM C = A W^T with on-the-fly weight dequantisation, on BF16 tensor cores
// (mma.sync m16n8k16, F32 accumulation).
//
// Why BF16 tensor cores for FP8/FP4 weights: every stored weight (E4M3 or E2M1 code x power-of-two
// UE8M0 scale) and every FP8-fake-quantised activation is exactly representable in BF16, and BF16 x
// BF16 products are exact in F32, so this computes the reference's block-scaled FP8 GEMM exactly up
// to F32 summation order (the scale factors are folded into the operands).
//
// Tiling: CTA tile BM x BN x BK (BM = 16 or 64, BN = 64, BK = 32), 4 warps. A tile [BM][BK] and the
// dequantised W tile [BN][BK] live in shared memory (K contiguous, padded against bank conflicts).
// Warps split the tile 2x2 (BM = 64: 32x32 each) or 1x4 (BM = 16: 16x16 each).
// Grid: x = N tiles, y = M tiles x groups (or experts), z = K splits. With splits > 1 each split
// writes F32 partials [split][M][N] that gemm_reduce_kernel sums in split order (deterministic).
// Rows: optional indirections for MoE — A row = a_rows[i] / a_div, C row = c_rows[i].
#pragma once

#include "kernels/common/device_utils.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {

inline constexpr int kGemmBN = 64, kGemmBK = 64, kGemmPad = 8;

__device__ __forceinline__ float dequant_weight(const WeightDesc& w, int64_t n, int64_t k) {
  switch (w.fmt) {
    case WeightFmt::kBF16:
      return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(w.w + n * w.row_bytes)[k]);
    case WeightFmt::kFp8Block: {
      const int64_t si = (n / w.block_out) * w.scale_cols + k / w.block_in;
      const float s = w.scale_f32 ? reinterpret_cast<const float*>(w.scale)[si] : e8m0_to_f32(w.scale[si]);
      return e4m3_to_f32(w.w[n * w.row_bytes + k]) * s;
    }
    case WeightFmt::kFp4Block: {
      const uint8_t b = w.w[n * w.row_bytes + k / 2];
      const float s = e8m0_to_f32(w.scale[n * w.scale_cols + k / 32]);
      return e2m1_to_f32((k & 1) ? (b >> 4) : (b & 0xf)) * s;
    }
  }
  return 0.0f;
}

// Dequantises 16 stored bytes of weight row n starting at element k into BF16 (8 for BF16 storage,
// 16 for FP8, 32 for FP4) at dst. The chunk lies inside one scale block (k aligned to the chunk).
__device__ __forceinline__ int dequant_chunk(const WeightDesc& w, int64_t n, int64_t k, __nv_bfloat16* dst) {
  if (w.fmt == WeightFmt::kBF16) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(w.w + n * w.row_bytes + k * 2);
    return 8;
  }
  if (w.fmt == WeightFmt::kFp8Block) {
    const uint4 raw = *reinterpret_cast<const uint4*>(w.w + n * w.row_bytes + k);
    const int64_t si = (n / w.block_out) * w.scale_cols + k / w.block_in;
    const float s = w.scale_f32 ? reinterpret_cast<const float*>(w.scale)[si] : e8m0_to_f32(w.scale[si]);
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 16; i += 2) {
      *reinterpret_cast<__nv_bfloat162*>(dst + i) = __floats2bfloat162_rn(e4m3_to_f32(b[i]) * s, e4m3_to_f32(b[i + 1]) * s);
    }
    return 16;
  }
  const uint4 raw = *reinterpret_cast<const uint4*>(w.w + n * w.row_bytes + k / 2);
  const float s = e8m0_to_f32(w.scale[n * w.scale_cols + k / 32]);
  const uint8_t* b = reinterpret_cast<const uint8_t*>(&raw);
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    *reinterpret_cast<__nv_bfloat162*>(dst + 2 * i) =
        __floats2bfloat162_rn(e2m1_to_f32(b[i] & 0xf) * s, e2m1_to_f32(b[i] >> 4) * s);
  }
  return 32;
}

__device__ __forceinline__ int chunk_elems(WeightFmt f) { return f == WeightFmt::kBF16 ? 8 : (f == WeightFmt::kFp8Block ? 16 : 32); }

__device__ __forceinline__ void mma_bf16_16816(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int BM>
__global__ void __launch_bounds__(128) dequant_gemm_kernel(GemmParams p, int m_tiles) {
  constexpr int BN = kGemmBN, BK = kGemmBK, LD = BK + kGemmPad;
  constexpr int WM = BM == 64 ? 32 : 16;  // warp tile
  constexpr int WN = BM == 64 ? 32 : 16;
  constexpr int MT = WM / 16, NT = WN / 8;
  __shared__ __align__(16) __nv_bfloat16 sA[BM][LD];
  __shared__ __align__(16) __nv_bfloat16 sB[BN][LD];
  __shared__ int32_t a_row[BM], c_row[BM];

  const int group = blockIdx.y / m_tiles, m_tile = blockIdx.y % m_tiles;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int split = blockIdx.z;
  const int64_t k_per_split = ((p.K + p.splits - 1) / p.splits + BK - 1) / BK * BK;
  const int64_t k_begin = split * k_per_split, k_end = min64(p.K, k_begin + k_per_split);

  // Rows of this tile: plain, grouped, or an expert's permuted (token, slot) pairs.
  WeightDesc w = p.w;
  int64_t m_count;
  if (p.experts != nullptr) {
    w = p.experts[group];
    const int32_t begin = p.offsets[group], count = p.offsets[group + 1] - begin;
    m_count = count - m_tile * BM;
    if (m_count <= 0) return;
    for (int i = threadIdx.x; i < BM; i += blockDim.x) {
      const int32_t pr = i < m_count ? p.perm[begin + m_tile * BM + i] : -1;
      a_row[i] = pr < 0 ? -1 : pr / p.a_div;
      c_row[i] = pr;
    }
  } else {
    m_count = p.M - m_tile * BM;
    if (m_count <= 0) return;
    for (int i = threadIdx.x; i < BM; i += blockDim.x) {
      a_row[i] = i < m_count ? m_tile * BM + i : -1;
      c_row[i] = a_row[i];
    }
  }
  const int64_t a_col0 = static_cast<int64_t>(group) * (p.experts ? 0 : p.K);
  const int64_t w_row0 = p.experts ? 0 : static_cast<int64_t>(group) * p.N;
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = BM == 64 ? (warp >> 1) * WM : 0;
  const int wn = BM == 64 ? (warp & 1) * WN : warp * WN;
  float acc[MT][NT][4] = {};

  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
  // 16-byte vector loads when every row start is 16-byte aligned (else the scalar path).
  const bool a_vec = (p.lda % 8 == 0) && ((a_col0 % 8) == 0) && (reinterpret_cast<uintptr_t>(A) % 16 == 0);
  const int ce = chunk_elems(w.fmt);
  const bool b_vec = (w.row_bytes % 16 == 0) && (reinterpret_cast<uintptr_t>(w.w) % 16 == 0) &&
                     (w.fmt == WeightFmt::kBF16 || (w.fmt == WeightFmt::kFp8Block && w.block_in % 16 == 0) ||
                      w.fmt == WeightFmt::kFp4Block);
  for (int64_t k0 = k_begin; k0 < k_end; k0 += BK) {
    const bool full_k = k0 + BK <= k_end;
    if (a_vec && full_k) {
      for (int i = threadIdx.x; i < BM * (BK / 8); i += blockDim.x) {
        const int r = i / (BK / 8), kk = (i % (BK / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (a_row[r] >= 0) v = *reinterpret_cast<const uint4*>(A + a_row[r] * p.lda + a_col0 + k0 + kk);
        *reinterpret_cast<uint4*>(&sA[r][kk]) = v;
      }
    } else {
      for (int i = threadIdx.x; i < BM * BK; i += blockDim.x) {
        const int r = i / BK, kk = i % BK;
        const int64_t k = k0 + kk;
        sA[r][kk] = (a_row[r] >= 0 && k < k_end) ? A[a_row[r] * p.lda + a_col0 + k] : __float2bfloat16_rn(0.0f);
      }
    }
    if (b_vec && full_k && n0 + BN <= p.N) {
      for (int i = threadIdx.x; i < BN * (BK / ce); i += blockDim.x) {
        const int r = i / (BK / ce), kk = (i % (BK / ce)) * ce;
        dequant_chunk(w, w_row0 + n0 + r, k0 + kk, &sB[r][kk]);
      }
    } else {
      for (int i = threadIdx.x; i < BN * BK; i += blockDim.x) {
        const int r = i / BK, kk = i % BK;
        const int64_t n = n0 + r, k = k0 + kk;
        sB[r][kk] = __float2bfloat16_rn((n < p.N && k < k_end) ? dequant_weight(w, w_row0 + n, k) : 0.0f);
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      const int g = lane >> 2, c = lane & 3;
      uint32_t af[MT][4], bf[NT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int r = wm + mt * 16 + g;
        af[mt][0] = *reinterpret_cast<const uint32_t*>(&sA[r][kk + 2 * c]);
        af[mt][1] = *reinterpret_cast<const uint32_t*>(&sA[r + 8][kk + 2 * c]);
        af[mt][2] = *reinterpret_cast<const uint32_t*>(&sA[r][kk + 2 * c + 8]);
        af[mt][3] = *reinterpret_cast<const uint32_t*>(&sA[r + 8][kk + 2 * c + 8]);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int n = wn + nt * 8 + g;
        bf[nt][0] = *reinterpret_cast<const uint32_t*>(&sB[n][kk + 2 * c]);
        bf[nt][1] = *reinterpret_cast<const uint32_t*>(&sB[n][kk + 2 * c + 8]);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(acc[mt][nt], af[mt], bf[nt]);
    }
    __syncthreads();
  }

  // Epilogue: each accumulator (row g / g+8, cols 2c, 2c+1) goes to C, or to the split partials.
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = wm + mt * 16 + g + (e >= 2 ? 8 : 0);
        const int64_t n = n0 + wn + nt * 8 + 2 * c + (e & 1);
        if (r >= m_count || n >= p.N) continue;
        const int64_t row = c_row[r];
        const int64_t col = static_cast<int64_t>(p.experts ? 0 : group) * p.N + n;
        if (p.splits > 1) {
          p.partial[(static_cast<int64_t>(split) * p.M + row) * p.ldc + col] = acc[mt][nt][e];
        } else if (p.c_bf16) {
          reinterpret_cast<__nv_bfloat16*>(p.C)[row * p.ldc + col] = __float2bfloat16_rn(acc[mt][nt][e]);
        } else {
          reinterpret_cast<float*>(p.C)[row * p.ldc + col] = acc[mt][nt][e];
        }
      }
}

// Sums split partials in split order: C[m][n] = sum_s partial[s][m][n].
__global__ void gemm_reduce_kernel(const float* partial, int splits, int64_t M, int64_t ldc, void* C, bool c_bf16) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * ldc) return;
  float s = 0.0f;
  for (int k = 0; k < splits; ++k) s += partial[k * M * ldc + i];
  if (c_bf16) reinterpret_cast<__nv_bfloat16*>(C)[i] = __float2bfloat16_rn(s);
  else reinterpret_cast<float*>(C)[i] = s;
}

// Plain F32 reference GEMM (F32 activations: the CPU-matching "plain" numerics), one thread per
// output, sequential K loop. Slow by design; only used for validation runs.
__global__ void f32_gemm_kernel(const float* A, int64_t lda, WeightDesc w, int64_t M, int64_t N, int64_t K,
                                int n_groups, float* C, int64_t ldc) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t m = blockIdx.y;
  const int g = blockIdx.z;
  if (n >= N) return;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const float* a = A + m * lda + static_cast<int64_t>(g) * K;
  // No FMA contraction: the same roundings as the CPU reference's dot().
  for (int64_t k = 0; k < K; ++k)
    acc[k % 8] = __fadd_rn(acc[k % 8], __fmul_rn(a[k], dequant_weight(w, static_cast<int64_t>(g) * N + n, k)));
  C[m * ldc + static_cast<int64_t>(g) * N + n] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// Expert-mode variant of f32_gemm_kernel: grid (N tiles, max rows per expert, E); block row i of
// expert e computes C[perm[off[e] + i]] from A row perm[...] / a_div.
__global__ void f32_expert_gemm_kernel(const float* A, int64_t lda, const WeightDesc* experts, const int32_t* offsets,
                                       const int32_t* perm, int a_div, int64_t N, int64_t K, float* C, int64_t ldc) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int e = blockIdx.z;
  const int32_t i = offsets[e] + static_cast<int32_t>(blockIdx.y);
  if (n >= N || i >= offsets[e + 1]) return;
  const int32_t row = perm[i];
  const float* a = A + static_cast<int64_t>(row / a_div) * lda;
  const WeightDesc w = experts[e];
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < K; ++k) acc[k % 8] = __fadd_rn(acc[k % 8], __fmul_rn(a[k], dequant_weight(w, n, k)));
  C[static_cast<int64_t>(row) * ldc + n] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace deepinfer::kernels
