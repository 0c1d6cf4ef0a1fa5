// Block-scaled GEMM C = A W^T with on-the-fly weight dequantisation on BF16 tensor cores
// (mma.sync m16n8k16, F32 accumulation), for M > 32 rows (dequant_gemv.cuh takes fewer).
//
// Why BF16 tensor cores for FP8/FP4 weights: every stored weight (E4M3 or E2M1 code x power-of-two
// UE8M0 scale) and every FP8-fake-quantised activation is exactly representable in BF16, and BF16 x
// BF16 products are exact in F32, so this computes the reference's block-scaled FP8 GEMM exactly up
// to F32 summation order — the canonical order of gemm_common.cuh, shared with dequant_gemv.
//
// Tiling: CTA tile 64 x 64 x kGemmBK, 4 warps (2 x 2, 32 x 32 each). The A tile [64][BK] and the
// dequantised W tile [64][BK] live in shared memory (K contiguous, padded against bank conflicts);
// fragments are read in the canonical lane-run order.
// Grid: x = N tiles, y = M tiles x groups (or experts). Rows: optional indirections for MoE —
// A row = perm[i] / a_div, C row = perm[i].
// Also here: the plain F32 GEMMs (the CPU reference's sequential sums) used by plain numerics.
#pragma once

#include "kernels/gemm/gemm_common.cuh"

namespace deepinfer::kernels {

inline constexpr int kGemmBM = 64, kGemmBN = 64, kGemmPad = 8;

// Dequantises 16 stored bytes of weight row n starting at element k into BF16 at dst.
__device__ __forceinline__ int dequant_chunk(const WeightDesc& w, int64_t n, int64_t k, __nv_bfloat16* dst) {
  const uint4 raw = *reinterpret_cast<const uint4*>(w.w + n * w.row_bytes +
                                                    (w.fmt == WeightFmt::kBF16 ? 2 * k : (w.fmt == WeightFmt::kFp8Block ? k : k / 2)));
  uint32_t* out = reinterpret_cast<uint32_t*>(dst);
  if (w.fmt == WeightFmt::kBF16) {
    dequant_run<WeightFmt::kBF16>(w, n, k, raw, out);
    return 8;
  }
  if (w.fmt == WeightFmt::kFp8Block) {
    dequant_run<WeightFmt::kFp8Block>(w, n, k, raw, out);
    return 16;
  }
  dequant_run<WeightFmt::kFp4Block>(w, n, k, raw, out);
  return 32;
}

__global__ void __launch_bounds__(128) dequant_gemm_kernel(GemmParams p, int m_tiles) {
  pdl_prologue();
  constexpr int BM = kGemmBM, BN = kGemmBN, BK = kGemmBK, LD = BK + kGemmPad;
  constexpr int WM = 32, WN = 32, MT = WM / 16, NT = WN / 8;
  __shared__ __align__(16) __nv_bfloat16 sA[BM][LD];
  __shared__ __align__(16) __nv_bfloat16 sB[BN][LD];
  __shared__ int32_t a_row[BM], c_row[BM];

  const int group = blockIdx.y / m_tiles, m_tile = blockIdx.y % m_tiles;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * BN;

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
  const int wm = (warp >> 1) * WM, wn = (warp & 1) * WN;
  const int g = lane >> 2, c = lane & 3;
  float acc[MT][NT][4] = {}, total[MT][NT][4] = {};

  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
  // 16-byte vector loads when every row start is 16-byte aligned (else the scalar path).
  const bool a_vec = (p.lda % 8 == 0) && ((a_col0 % 8) == 0) && (reinterpret_cast<uintptr_t>(A) % 16 == 0);
  const int L = run_elems(w.fmt);
  const bool b_vec = weight_runs_vectorisable(w);
  const int64_t R = gemm_subrange(p.K);
  for (int64_t k0 = 0; k0 < p.K; k0 += BK) {
    if (k0 > 0 && k0 % R == 0) {  // a sub-range ends: fold it into the total (canonical order)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) total[mt][nt][e] += acc[mt][nt][e], acc[mt][nt][e] = 0.0f;
    }
    const bool full_k = k0 + BK <= p.K;
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
        sA[r][kk] = (a_row[r] >= 0 && k < p.K) ? A[a_row[r] * p.lda + a_col0 + k] : __float2bfloat16_rn(0.0f);
      }
    }
    if (b_vec && full_k && n0 + BN <= p.N) {
      for (int i = threadIdx.x; i < BN * (BK / L); i += blockDim.x) {
        const int r = i / (BK / L), kk = (i % (BK / L)) * L;
        dequant_chunk(w, w_row0 + n0 + r, k0 + kk, &sB[r][kk]);
      }
    } else {
      for (int i = threadIdx.x; i < BN * BK; i += blockDim.x) {
        const int r = i / BK, kk = i % BK;
        const int64_t n = n0 + r, k = k0 + kk;
        sB[r][kk] = (n < p.N && k < p.K) ? dequant_weight_bf16(w, w_row0 + n, k) : __float2bfloat16_rn(0.0f);
      }
    }
    __syncthreads();
    // Windows of 4L elements, L/4 mma steps each; step j of the window at kw reads the lane's
    // run at kw + c L + 4j (gemm_common.cuh).
    for (int kw = 0; kw < BK; kw += 4 * L) {
      for (int j = 0; j < L / 4; ++j) {
        const int kb = kw + c * L + 4 * j;
        uint32_t af[MT][4], bf[NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const int r = wm + mt * 16 + g;
          const uint2 lo = *reinterpret_cast<const uint2*>(&sA[r][kb]);
          const uint2 hi = *reinterpret_cast<const uint2*>(&sA[r + 8][kb]);
          af[mt][0] = lo.x, af[mt][2] = lo.y, af[mt][1] = hi.x, af[mt][3] = hi.y;
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const uint2 b = *reinterpret_cast<const uint2*>(&sB[wn + nt * 8 + g][kb]);
          bf[nt][0] = b.x, bf[nt][1] = b.y;
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(acc[mt][nt], af[mt], bf[nt]);
      }
    }
    __syncthreads();
  }

  // Epilogue: each accumulator (row g / g+8, cols 2c, 2c+1) goes to C.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = wm + mt * 16 + g + (e >= 2 ? 8 : 0);
        const int64_t n = n0 + wn + nt * 8 + 2 * c + (e & 1);
        if (r >= m_count || n >= p.N) continue;
        const float v = total[mt][nt][e] + acc[mt][nt][e];
        const int64_t row = c_row[r];
        const int64_t col = static_cast<int64_t>(p.experts ? 0 : group) * p.N + n;
        store_out(p.C, p.c_bf16, row * p.ldc + col, v);
      }
}

// Plain F32 reference GEMM (F32 activations: the CPU-matching "plain" numerics), one thread per
// output, sequential K loop: the CPU reference's dot() — eight interleaved double partial sums of
// exact F32 products, combined in a fixed order and rounded once. Slow by design; only used for
// validation runs.
__global__ void f32_gemm_kernel(const float* A, int64_t lda, WeightDesc w, int64_t M, int64_t N, int64_t K,
                                int n_groups, float* C, int64_t ldc) {
  pdl_prologue();
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t m = blockIdx.y;
  const int g = blockIdx.z;
  if (n >= N) return;
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const float* a = A + m * lda + static_cast<int64_t>(g) * K;
  // Products of two F32 values are exact in double; no FMA contraction in the sums.
  for (int64_t k = 0; k < K; ++k)
    acc[k % 8] = __dadd_rn(acc[k % 8], __dmul_rn(a[k], dequant_weight(w, static_cast<int64_t>(g) * N + n, k)));
  C[m * ldc + static_cast<int64_t>(g) * N + n] =
      static_cast<float>(__dadd_rn(__dadd_rn(__dadd_rn(acc[0], acc[4]), __dadd_rn(acc[1], acc[5])),
                                   __dadd_rn(__dadd_rn(acc[2], acc[6]), __dadd_rn(acc[3], acc[7]))));
}

// Expert-mode variant of f32_gemm_kernel: grid (N tiles, max rows per expert, E); block row i of
// expert e computes C[perm[off[e] + i]] from A row perm[...] / a_div.
__global__ void f32_expert_gemm_kernel(const float* A, int64_t lda, const WeightDesc* experts, const int32_t* offsets,
                                       const int32_t* perm, int a_div, int64_t N, int64_t K, float* C, int64_t ldc) {
  pdl_prologue();
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int e = blockIdx.z;
  const int32_t i = offsets[e] + static_cast<int32_t>(blockIdx.y);
  if (n >= N || i >= offsets[e + 1]) return;
  const int32_t row = perm[i];
  const float* a = A + static_cast<int64_t>(row / a_div) * lda;
  const WeightDesc w = experts[e];
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < K; ++k) acc[k % 8] = __dadd_rn(acc[k % 8], __dmul_rn(a[k], dequant_weight(w, n, k)));
  C[static_cast<int64_t>(row) * ldc + n] =
      static_cast<float>(__dadd_rn(__dadd_rn(__dadd_rn(acc[0], acc[4]), __dadd_rn(acc[1], acc[5])),
                                   __dadd_rn(__dadd_rn(acc[2], acc[6]), __dadd_rn(acc[3], acc[7]))));
}

}  // namespace deepinfer::kernels
