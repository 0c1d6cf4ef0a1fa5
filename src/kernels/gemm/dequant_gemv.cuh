// Small-M dequantising GEMM (M <= 32 rows per weight: decode steps, MoE experts at small batch).
// Memory bound: the weight is read once, straight from global memory into registers as 16-byte
// runs (one vector load per lane per 8 columns), dequantised there and fed to mma.m16n8k16 in the
// canonical order of gemm_common.cuh — so the result is bitwise the one dequant_gemm gives for the
// same rows, whatever M is.
//
// Work split: a warp owns 32 columns (4 n8 tiles) x one K sub-range; a CTA holds the P sub-ranges
// of G column groups (P x G <= 8 warps), and the sub-range sums are added in order through shared
// memory. A (<= 32 BF16 rows) is read per lane straight from global/L1 (absent rows are skipped).
// Grid: x = column-group tiles, y = groups, or the active experts (those with rows).
#pragma once

#include "kernels/gemm/gemm_common.cuh"

namespace deepinfer::kernels {

inline constexpr int kGemvWarpCols = 32;  // 4 n8 tiles per warp
inline constexpr int kGemvMaxWarps = 8;
inline constexpr int kGemvMaxRows = 32;   // MT <= 2 m16 tiles

// A 16-byte run of a weight row at the edges of the matrix or of an unaligned row: byte loads,
// zero beyond K and for rows >= N (whose scale is then never read).
template <WeightFmt F>
__device__ __forceinline__ uint4 gemv_edge_run(const WeightDesc& w, int64_t row, int64_t k, int64_t K) {
  uint32_t words[4] = {0, 0, 0, 0};
  const int64_t b0 = weight_byte<F>(k), b_end = F == WeightFmt::kFp4Block ? (K + 1) / 2 : weight_byte<F>(K);
  for (int i = 0; i < 16; ++i)
    if (b0 + i < b_end) words[i / 4] |= static_cast<uint32_t>(w.w[row * w.row_bytes + b0 + i]) << (8 * (i % 4));
  if (F == WeightFmt::kFp4Block && (K & 1) && b0 + 15 >= b_end - 1 && b_end - 1 >= b0) {
    const int64_t i = b_end - 1 - b0;  // odd K: the last byte's high nibble lies beyond K
    words[i / 4] &= ~(0xf0u << (8 * (i % 4)));
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

template <WeightFmt F, int MT>
__global__ void __launch_bounds__(256, 2) dequant_gemv_kernel(GemmParams p, int P, int G) {
  constexpr int NT = kGemvWarpCols / 8, L = run_elems(F), W = 4 * L, NACC = MT * NT * 4;
  // Sub-range partials, [warp][acc][lane] (lane fastest: no bank conflicts).
  __shared__ float s_part[kGemvMaxWarps][NACC][32];
  __shared__ int32_t a_row[MT * 16], c_row[MT * 16];

  int64_t rows_begin = 0, rows_count = 0;
  int group = blockIdx.y;
  WeightDesc w = p.w;
  if (p.experts != nullptr) {
    if (static_cast<int>(blockIdx.y) >= p.active[p.n_experts]) return;  // fewer active experts
    group = p.active[blockIdx.y];
    w = p.experts[group];
    rows_begin = p.offsets[group];
    rows_count = p.offsets[group + 1] - rows_begin;
  } else {
    rows_count = p.M;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c = lane & 3;
  const int sub = warp % P, cg = warp / P;
  const int64_t n_base = (static_cast<int64_t>(blockIdx.x) * G + cg) * kGemvWarpCols;
  const int64_t a_col0 = p.experts ? 0 : static_cast<int64_t>(group) * p.K;
  const int64_t w_row0 = p.experts ? 0 : static_cast<int64_t>(group) * p.N;
  const int64_t R = gemm_subrange(p.K);
  const int64_t k_sub = sub * R;
  const int64_t k_len = min64(p.K, k_sub + R) - k_sub;
  // Same windows as dequant_gemm: whole BK tiles, zero beyond K.
  const int64_t n_windows = (k_len + kGemmBK - 1) / kGemmBK * (kGemmBK / W);
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
  const bool a_vec = (p.lda % 4 == 0) && (a_col0 % 4 == 0) && (reinterpret_cast<uintptr_t>(A) % 8 == 0);
  const bool b_vec = weight_runs_vectorisable(w);

  for (int64_t m0 = 0; m0 < rows_count; m0 += MT * 16) {
    const int64_t m_count = min64(MT * 16, rows_count - m0);
    __syncthreads();  // the previous chunk's a_row / s_part are no longer read
    for (int i = threadIdx.x; i < MT * 16; i += blockDim.x) {
      int32_t ar = -1, cr = -1;
      if (i < m_count) {
        if (p.experts) {
          cr = p.perm[rows_begin + m0 + i];
          ar = cr / p.a_div;
        } else {
          ar = cr = static_cast<int32_t>(m0 + i);
        }
      }
      a_row[i] = ar;
      c_row[i] = cr;
    }
    __syncthreads();
    // The lane's A rows (g, g + 8 of each m16 tile): base pointers, null when absent.
    const __nv_bfloat16* arow[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int32_t r = a_row[mt * 16 + g + 8 * h];
        arow[mt][h] = r >= 0 ? A + static_cast<int64_t>(r) * p.lda + a_col0 : nullptr;
      }

    float acc[MT][NT][4] = {};
    // Raw 16-byte runs of the next window are loaded before the current one is consumed, so a
    // lane keeps NT loads in flight while it dequantises and multiplies.
    // Every lane's run is converted by run_quad; edge runs are assembled byte-wise (zeros outside).
    auto load_runs = [&](int64_t wi, uint4* raw) {
      const int64_t k = k_sub + wi * W + c * L;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int64_t n = n_base + nt * 8 + g;
        raw[nt] = make_uint4(0, 0, 0, 0);
        if (wi >= n_windows || n >= p.N || k >= p.K) continue;
        if (b_vec && k + L <= p.K) {
          raw[nt] = __ldg(reinterpret_cast<const uint4*>(w.w + (w_row0 + n) * w.row_bytes + weight_byte<F>(k)));
        } else {
          raw[nt] = gemv_edge_run<F>(w, w_row0 + n, k, p.K);
        }
      }
    };
    uint4 raw[NT];
    load_runs(0, raw);
    for (int64_t wi = 0; wi < n_windows; ++wi) {
      const int64_t k_run = k_sub + wi * W + c * L;  // this lane's run
      uint4 cur[NT];
      float scale[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int64_t n = n_base + nt * 8 + g;
        cur[nt] = raw[nt];
        scale[nt] = (F != WeightFmt::kBF16 && n < p.N && k_run < p.K) ? weight_scale(w, w_row0 + n, k_run) : 1.0f;
      }
      load_runs(wi + 1, raw);
#pragma unroll
      for (int j = 0; j < L / 4; ++j) {
        const int64_t k = k_run + 4 * j;
        uint32_t bf[NT][2];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) run_quad<F>(cur[nt], scale[nt], j, bf[nt][0], bf[nt][1]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          uint32_t af[4];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            uint2 v = make_uint2(0, 0);
            const __nv_bfloat16* ar = arow[mt][h];
            if (ar != nullptr) {
              if (a_vec && k + 4 <= p.K) {
                v = *reinterpret_cast<const uint2*>(ar + k);
              } else {
                uint16_t e[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) e[q] = k + q < p.K ? __bfloat16_as_ushort(ar[k + q]) : 0;
                v = make_uint2(e[0] | (static_cast<uint32_t>(e[1]) << 16), e[2] | (static_cast<uint32_t>(e[3]) << 16));
              }
            }
            af[h] = v.x;      // a0 (row g) / a1 (row g + 8): logical k 2c, 2c+1
            af[2 + h] = v.y;  // a2 / a3: logical k 2c+8, 2c+9
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(acc[mt][nt], af, bf[nt]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s_part[warp][(mt * NT + nt) * 4 + e][lane] = acc[mt][nt][e];
    __syncthreads();
    if (sub == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = (mt * NT + nt) * 4 + e;
            float v = 0.0f;  // ((0 + s_0) + s_1) + ...: the canonical sub-range order
            for (int s = 0; s < P; ++s) v += s_part[cg * P + s][i][lane];
            const int r = mt * 16 + g + (e >= 2 ? 8 : 0);
            const int64_t n = n_base + nt * 8 + 2 * c + (e & 1);
            if (r >= m_count || n >= p.N) continue;
            const int64_t row = c_row[r];
            const int64_t col = static_cast<int64_t>(p.experts ? 0 : group) * p.N + n;
            if (p.c_bf16) {
              reinterpret_cast<__nv_bfloat16*>(p.C)[row * p.ldc + col] = __float2bfloat16_rn(v);
            } else {
              reinterpret_cast<float*>(p.C)[row * p.ldc + col] = v;
            }
          }
    }
  }
}

}  // namespace deepinfer::kernels
