// Small-M dequantising GEMM (M <= 32 rows per weight: decode steps, MoE experts at small batch).
// Memory bound: the weight is read once, straight from global memory into registers as 16-byte
// runs (one vector load per lane per n8 tile), dequantised there and fed to mma.m16n8k16 in the
// canonical order of gemm_common.cuh — so the result is bitwise the one dequant_gemm gives for
// the same rows, whatever M is.
//
// Work split: CTA = (128 columns, one K sub-range, one group or active expert), 4 warps of 32
// columns. The CTA stages its rows' A slice [rows][R] in shared memory once (coalesced); each
// warp then streams its weight rows with kGemvDepth windows of loads (runs and their scales) in
// flight. Sub-range sums go to F32 partials [P][M][ldc] that gemv_reduce_kernel folds in
// sub-range order ((0 + s_0) + s_1) + ... — the canonical fold; with one sub-range the CTA
// writes C itself (as 0 + s_0).
#pragma once

#include "kernels/gemm/gemm_common.cuh"

namespace deepinfer::kernels {

inline constexpr int kGemvWarps = 4;
inline constexpr int kGemvWarpCols = 32;  // 4 n8 tiles per warp
inline constexpr int kGemvCtaCols = kGemvWarps * kGemvWarpCols;
inline constexpr int kGemvMaxRows = 32;   // MT <= 2 m16 tiles
inline constexpr int kGemvDepth = 4;      // windows of weight loads in flight per warp
inline constexpr int kGemvPad = 8;        // BF16 elements of row padding in the A slice

// Shared memory of one CTA: A slice [MT * 16][R + pad] BF16.
__host__ __device__ inline size_t gemv_smem_bytes(int mt, int64_t K) {
  return static_cast<size_t>(mt) * 16 * (gemm_subrange(K) + kGemvPad) * 2;
}

// A 16-byte run of a weight row at the edges of the matrix or of an unaligned row: byte loads,
// zero beyond K.
template <WeightFmt F>
__device__ __forceinline__ uint4 gemv_edge_run(const WeightDesc& w, int64_t row, int64_t k, int64_t K) {
  uint32_t words[4] = {0, 0, 0, 0};
  const int64_t b0 = weight_byte<F>(k), b_end = weight_byte<F>(K);
  for (int i = 0; i < 16; ++i)
    if (b0 + i < b_end) words[i / 4] |= static_cast<uint32_t>(w.w[row * w.row_bytes + b0 + i]) << (8 * (i % 4));
  return make_uint4(words[0], words[1], words[2], words[3]);
}

template <WeightFmt F, int MT>
__global__ void __launch_bounds__(kGemvWarps * 32) dequant_gemv_kernel(GemmParams p, float* partial) {
  constexpr int NT = kGemvWarpCols / 8, L = run_elems(F), W = 4 * L, D = kGemvDepth;
  extern __shared__ __align__(16) __nv_bfloat16 sA[];  // [MT * 16][LDA]
  __shared__ int32_t a_row[MT * 16], c_row[MT * 16];

  const int64_t R = gemm_subrange(p.K), LDA = R + kGemvPad;
  const int sub = blockIdx.y;
  const int64_t k_sub = sub * R, k_len = min64(p.K, k_sub + R) - k_sub;
  int64_t rows_begin = 0, m_count = 0;
  int group = blockIdx.z;
  WeightDesc w = p.w;
  if (p.experts != nullptr) {
    if (static_cast<int>(blockIdx.z) >= p.active[p.n_experts]) return;  // fewer active experts
    group = p.active[blockIdx.z];
    w = p.experts[group];
    rows_begin = p.offsets[group];
    m_count = p.offsets[group + 1] - rows_begin;
  } else {
    m_count = p.M;
  }
  for (int i = threadIdx.x; i < MT * 16; i += blockDim.x) {
    int32_t ar = -1, cr = -1;
    if (i < m_count) {
      cr = p.experts ? p.perm[rows_begin + i] : i;
      ar = p.experts ? cr / p.a_div : i;
    }
    a_row[i] = ar;
    c_row[i] = cr;
  }
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t n_base = static_cast<int64_t>(blockIdx.x) * kGemvCtaCols + warp * kGemvWarpCols;
  const int64_t w_row0 = p.experts ? 0 : static_cast<int64_t>(group) * p.N;
  const bool b_vec = weight_runs_vectorisable(w);
  // Same windows as dequant_gemm: whole BK tiles of the sub-range, zero beyond K.
  const int n_windows = static_cast<int>((k_len + kGemmBK - 1) / kGemmBK * (kGemmBK / W));

  // Window wi of tile nt: the lane's 16-byte run (zeros outside the matrix) and its scale.
  auto load = [&](int wi, uint4* raw, float* scale) {
    const int64_t k = k_sub + static_cast<int64_t>(wi) * W + c * L;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int64_t n = n_base + nt * 8 + g;
      raw[nt] = make_uint4(0, 0, 0, 0);
      scale[nt] = 1.0f;
      if (wi >= n_windows || n >= p.N || k >= p.K) continue;
      if (b_vec && k + L <= p.K) {
        raw[nt] = __ldg(reinterpret_cast<const uint4*>(w.w + (w_row0 + n) * w.row_bytes + weight_byte<F>(k)));
      } else {
        raw[nt] = gemv_edge_run<F>(w, w_row0 + n, k, p.K);
      }
      if constexpr (F == WeightFmt::kFp4Block) {
        scale[nt] = __uint_as_float(fp4_scale_bf16x2(w, w_row0 + n, k));  // bits, see run_quad
      } else if constexpr (F == WeightFmt::kFp8Block) {
        scale[nt] = fp8_run_scale(w, w_row0 + n, k);
      }
    }
  };

  float acc[MT][NT][4] = {};
  uint4 raw[D][NT];
  float scale[D][NT];
#pragma unroll
  for (int d = 0; d < D; ++d) load(d, raw[d], scale[d]);  // in flight while A is staged

  // Stage the A slice: columns [k_sub, k_sub + R) of every present row, zero elsewhere.
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
  const int64_t a_col0 = (p.experts ? 0 : static_cast<int64_t>(group) * p.K) + k_sub;
  const bool a_vec = (p.lda % 8 == 0) && (a_col0 % 8 == 0) && (reinterpret_cast<uintptr_t>(A) % 16 == 0) && (k_len % 8 == 0);
  for (int64_t i = threadIdx.x; i < MT * 16 * (R / 8); i += blockDim.x) {
    const int r = static_cast<int>(i / (R / 8));
    const int64_t kk = (i % (R / 8)) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (a_row[r] >= 0 && kk < k_len) {
      const __nv_bfloat16* src = A + static_cast<int64_t>(a_row[r]) * p.lda + a_col0 + kk;
      if (a_vec) {
        v = *reinterpret_cast<const uint4*>(src);
      } else {
        uint16_t e[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) e[q] = kk + q < k_len ? __bfloat16_as_ushort(src[q]) : 0;
        v = make_uint4(e[0] | (uint32_t{e[1]} << 16), e[2] | (uint32_t{e[3]} << 16), e[4] | (uint32_t{e[5]} << 16),
                       e[6] | (uint32_t{e[7]} << 16));
      }
    }
    *reinterpret_cast<uint4*>(&sA[r * LDA + kk]) = v;
  }
  __syncthreads();

  for (int w0 = 0; w0 < n_windows; w0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int wi = w0 + d;
      if (wi >= n_windows) break;
      uint4 cur[NT];
      float cur_scale[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) cur[nt] = raw[d][nt], cur_scale[nt] = scale[d][nt];
      load(wi + D, raw[d], scale[d]);  // refill this slot before consuming it
#pragma unroll
      for (int j = 0; j < L / 4; ++j) {
        const int kk = wi * W + c * L + 4 * j;  // within the slice
        uint32_t bf[NT][2];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) run_quad<F>(cur[nt], cur_scale[nt], j, bf[nt][0], bf[nt][1]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const uint2 lo = *reinterpret_cast<const uint2*>(&sA[(mt * 16 + g) * LDA + kk]);
          const uint2 hi = *reinterpret_cast<const uint2*>(&sA[(mt * 16 + g + 8) * LDA + kk]);
          const uint32_t af[4] = {lo.x, hi.x, lo.y, hi.y};  // a0..a3: logical k 2c.., rows g / g + 8
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(acc[mt][nt], af, bf[nt]);
        }
      }
    }
  }

  const int P = gridDim.y;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = mt * 16 + g + (e >= 2 ? 8 : 0);
        const int64_t n = n_base + nt * 8 + 2 * c + (e & 1);
        if (r >= m_count || n >= p.N) continue;
        const int64_t row = c_row[r];
        const int64_t col = static_cast<int64_t>(p.experts ? 0 : group) * p.N + n;
        if (P > 1) {
          partial[(static_cast<int64_t>(sub) * p.M + row) * p.ldc + col] = acc[mt][nt][e];
        } else if (p.c_bf16) {
          reinterpret_cast<__nv_bfloat16*>(p.C)[row * p.ldc + col] = __float2bfloat16_rn(0.0f + acc[mt][nt][e]);
        } else {
          reinterpret_cast<float*>(p.C)[row * p.ldc + col] = 0.0f + acc[mt][nt][e];
        }
      }
}

// C = ((0 + partial[0]) + partial[1]) + ... over the P sub-ranges, for the rows the partials
// cover: all M rows (dense) or the expert pairs (expert mode: every pair row is written once).
__global__ void gemv_reduce_kernel(const float* partial, int P, int64_t M, int64_t ldc, int64_t n_cols, int64_t col0,
                                   void* C, bool c_bf16) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * n_cols) return;
  const int64_t idx = (i / n_cols) * ldc + col0 + i % n_cols;
  float v = 0.0f;
  for (int s = 0; s < P; ++s) v += partial[s * M * ldc + idx];
  if (c_bf16) reinterpret_cast<__nv_bfloat16*>(C)[idx] = __float2bfloat16_rn(v);
  else reinterpret_cast<float*>(C)[idx] = v;
}

}  // namespace deepinfer::kernels
