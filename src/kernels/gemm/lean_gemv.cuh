// Lean small-M GEMM for decode: dense FP8 (UE8M0 block scales) or BF16 weights, at most 8 rows.
// The general streaming kernel (dequant_gemv.cuh) handles experts, up to 32 rows, several tiles and
// sub-ranges per CTA and a global split-K fold; on the H200 its batch-1 projections were
// instruction-issue bound (~0.21 warp-instructions per weight byte: per-window tile / sub-range
// bookkeeping, a cp.async ring read back through shared memory, a prologue of 64-bit index math,
// and a split-K fold through global partials with a fence and a counter). This kernel keeps only
// what a decode launch needs:
//   * CTA = kLeanCols (16) columns of one weight set and group x every K sub-range, one warp per
//     sub-range (x G column groups when there are fewer than 8 sub-ranges), so the canonical fold
//     ((0 + s_0) + s_1) + ... of gemm_common.cuh happens in shared memory, without partials;
//   * the weight windows stream straight into registers (S in flight per lane), issued before the
//     wait for the previous kernel, with the L2 fetching whole 128-byte lines;
//   * one scale code per window for the whole warp (its 16 columns lie in one FP8 block of >= 16
//     rows and a window in one block of >= 64 inputs): lane i holds window i's, shuffled out;
//   * the same mma.m16n8k16 steps as the transposed one-row-tile streaming kernel (weights as the A
//     operand, the rows as B), in the same order: the same bits, whatever kernel takes a launch.
// The launcher (launch_gemm.cu) takes it when the shape allows (lean_gemv_plan) and falls back to
// the general kernel otherwise.
#pragma once

#include <type_traits>

#include "kernels/gemm/dequant_gemv.cuh"

namespace deepinfer::kernels {

inline constexpr int kLeanCols = 16;         // columns per warp: two n8 tiles
inline constexpr int kLeanMaxRows = 8;       // one n8 row tile (the mma's B operand)
inline constexpr int kLeanMaxWarps = 8;      // sub-ranges (<= 8) x column groups
inline constexpr int kLeanMaxWindows = 32;   // windows per warp: one scale code per lane
inline constexpr int kLeanWindowBytes = 64;  // a window's bytes of one weight row (FP8 64, BF16 32 x 2)

// Launch geometry, computed on the host once per launch.
struct LeanGemvShape {
  int R = 0, P = 0;    // gemm_subrange(K), gemm_n_subranges(K): one warp each
  int groups = 1;      // column groups of kLeanCols per CTA (warps = groups P)
  int x_ctas0 = 0;     // CTAs along x of weight set 0 (set 1's follow)
  int a_rows = 0;      // staged activation rows (= M <= 8)
  int lda_s = 0;       // staged row stride in elements: K + kGemvPad
  int in_shift = 0;    // log2 of the FP8 scale block (inputs, outputs)
  int out_shift = 0;
};

// 16 weight bytes a lane streams: read once (no L1 allocation), the L2 fetching the whole 128-byte
// line so the next window of the row is an L2 hit. Volatile: the issue order is the prefetch.
__device__ __forceinline__ uint4 ldg_weight16(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <WeightFmt F, int S>
__global__ void __launch_bounds__(kLeanMaxWarps * 32, S <= 4 ? 3 : 2) lean_gemv_kernel(GemmParams p, LeanGemvShape sh) {
  static_assert(F != WeightFmt::kFp4Block, "FP4 weights (experts) take the general kernel");
  constexpr int L = run_elems(F), W = 4 * L;  // elements per lane run and per window
  extern __shared__ __align__(16) uint8_t smem[];
  __nv_bfloat16* sA = reinterpret_cast<__nv_bfloat16*>(smem);  // [a_rows][lda_s]: all of K
  __shared__ float red[kLeanMaxWarps][kLeanMaxRows][kLeanCols];  // each warp's sub-range sums
  __shared__ int32_t a_row[kLeanMaxRows];

  griddep_launch_dependents();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int P = sh.P, sub = warp % P, cg = warp / P;
  const int set = p.n_sets > 1 && static_cast<int>(blockIdx.x) >= sh.x_ctas0 ? 1 : 0;
  const WeightDesc& w = set == 0 ? p.w : p.w1;
  const int64_t N = set == 0 ? p.N : p.N1, ldc = set == 0 ? p.ldc : p.ldc1;
  const int64_t cta_n0 = (static_cast<int64_t>(blockIdx.x) - set * sh.x_ctas0) * sh.groups * kLeanCols;
  const int64_t n0 = cta_n0 + cg * kLeanCols;   // the warp's first column
  const int64_t w_row0 = blockIdx.z * p.N;      // group offset (rows and output columns)
  const int k0 = sub * sh.R;                    // the warp's sub-range
  const int nw = n0 < N ? min(sh.R, static_cast<int>(p.K) - k0) / W : 0;  // windows (0: no columns)

  // The lane's two weight rows (columns n0 + g, n0 + 8 + g; past N: row N - 1, outputs dropped) at
  // its run of the sub-range's first window.
  const uint8_t* wp[2];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const int64_t n = min64(n0 + t * 8 + g, N - 1);
    wp[t] = w.w + (w_row0 + n) * w.row_bytes + static_cast<int64_t>(k0 + c * L) * (F == WeightFmt::kBF16 ? 2 : 1);
  }
  uint4 buf[S][2];
#pragma unroll
  for (int d = 0; d < S; ++d)
    if (d < nw) {
      buf[d][0] = ldg_weight16(wp[0] + d * kLeanWindowBytes);
      buf[d][1] = ldg_weight16(wp[1] + d * kLeanWindowBytes);
    }
  // Window i's scale code in lane i (FP8); the warp takes the fast decoder unless a code is beyond it.
  uint8_t my_code = 0;
  if constexpr (F == WeightFmt::kFp8Block) {
    if (lane < nw)
      my_code = w.scale[((w_row0 + n0) >> sh.out_shift) * w.scale_cols + ((k0 + lane * W) >> sh.in_shift)];
  }
  const uint32_t my_scale = quad_scale<F>(my_code);
  const bool exact = F == WeightFmt::kBF16 || __all_sync(0xffffffffu, quad_scale_exact<F>(my_code));

  griddep_wait();  // the activations come from the previous kernel
  if (threadIdx.x < kLeanMaxRows) {
    const int r = static_cast<int>(threadIdx.x);
    a_row[r] = r < sh.a_rows ? r : -1;
  }
  __syncthreads();
  const int64_t a_col0 = static_cast<int64_t>(blockIdx.z) * p.K;
  const bool a_vec = p.lda % 8 == 0 && a_col0 % 8 == 0 && reinterpret_cast<uintptr_t>(p.A) % 16 == 0;
  const int chunks = static_cast<int>(p.K / 8);
  if (p.a_quant_block > 0) {
    stage_quantised_a<1>(p, a_row, a_col0, a_vec, sh.a_rows, sh.a_rows, chunks, sA, sh.lda_s);
  } else {
    stage_plain_a(p, a_row, a_col0, a_vec, sh.a_rows, chunks, sA, sh.lda_s);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // acc element e: row 2c + (e & 1), column n0 + (e >= 2 ? 8 : 0) + g (the transposed tile).
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const bool has_row = g < sh.a_rows;  // row g of the B operand holds data
  const __nv_bfloat16* a_lane = sA + g * sh.lda_s + k0 + c * L;
  // One window's mma steps with the weights decoded by `decode(run, j, b0, b1)`: one 16-byte A read
  // per row serves two steps (as in dequant_gemv_kernel's transposed tiles).
  auto window = [&](const uint4 (&cur)[2], int wi, auto decode) {
#pragma unroll
    for (int j = 0; j < L / 4; j += 2) {
      uint4 x = make_uint4(0, 0, 0, 0);
      if (has_row) x = *reinterpret_cast<const uint4*>(a_lane + wi * W + 4 * j);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        uint32_t w0[2], w1[2];
        decode(cur[0], j + jj, w0[0], w0[1]);
        decode(cur[1], j + jj, w1[0], w1[1]);
        const uint32_t af[4] = {w0[0], w1[0], w0[1], w1[1]};
        const uint32_t bx[2] = {jj ? x.z : x.x, jj ? x.w : x.y};
        mma_bf16_16816(acc, af, bx);
      }
    }
  };
  // The stream: window wi decoded from buf[wi % S], which then takes window wi + S.
  auto stream = [&](auto fast) {
    for (int w0 = 0; w0 < nw; w0 += S) {
#pragma unroll
      for (int u = 0; u < S; ++u) {
        const int wi = w0 + u;
        if (wi >= nw) break;  // warp-uniform
        if constexpr (decltype(fast)::value) {
          const uint32_t sc = F == WeightFmt::kBF16 ? 0u : __shfl_sync(0xffffffffu, my_scale, wi);
          window(buf[u], wi, [&](const uint4& r, int j, uint32_t& b0, uint32_t& b1) {
            decode_quad_scaled<F>(r, sc, j, b0, b1);
          });
        } else {
          const uint8_t code = static_cast<uint8_t>(__shfl_sync(0xffffffffu, my_code, wi));
          window(buf[u], wi, [&](const uint4& r, int j, uint32_t& b0, uint32_t& b1) {
            decode_quad<F>(r, code, j, b0, b1);
          });
        }
        if (wi + S < nw) {
          buf[u][0] = ldg_weight16(wp[0] + (wi + S) * kLeanWindowBytes);
          buf[u][1] = ldg_weight16(wp[1] + (wi + S) * kLeanWindowBytes);
        }
      }
    }
  };
  if constexpr (F == WeightFmt::kBF16) {
    stream(std::true_type{});
  } else if (exact) {  // warp-uniform
    stream(std::true_type{});
  } else {
    stream(std::false_type{});
  }

  // The fold: each output is ((0 + s_0) + s_1) + ... over the sub-range warps of its column group.
#pragma unroll
  for (int e = 0; e < 4; ++e) red[warp][2 * c + (e & 1)][(e >= 2 ? 8 : 0) + g] = acc[e];
  __syncthreads();
  const int M = sh.a_rows;
  void* const C = set == 0 ? p.C : p.C1;
  for (int i = threadIdx.x; i < sh.groups * M * kLeanCols; i += blockDim.x) {
    const int gi = i / (M * kLeanCols), r = i / kLeanCols % M, col = i % kLeanCols;
    const int64_t n = cta_n0 + gi * kLeanCols + col;
    if (n >= N) continue;
    float total = 0.0f;
    for (int q = 0; q < P; ++q) total += red[gi * P + q][r][col];
    store_out(C, p.c_bf16, r * ldc + w_row0 + n, total);
  }
}

}  // namespace deepinfer::kernels
