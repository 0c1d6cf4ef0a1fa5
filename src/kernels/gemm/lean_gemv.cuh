// Lean small-M GEMM for decode: FP8 (UE8M0 block scales), BF16 or FP4 weights, dense launches of at
// most 8 rows and MoE expert launches (any rows per expert, in chunks of 8).
// The general streaming kernel (dequant_gemv.cuh) handles experts, up to 32 rows, several tiles and
// sub-ranges per CTA and a global split-K fold; on the H200 its batch-1 projections were
// instruction-issue bound (~0.21 warp-instructions per weight byte: per-window tile / sub-range
// bookkeeping, a cp.async ring read back through shared memory, a prologue of 64-bit index math,
// and a split-K fold through global partials with a fence and a counter). This kernel keeps only
// what a decode launch needs:
//   * CTA = kLeanCols (16) columns of one weight set and group x every K sub-range, one warp per
//     sub-range (x G column groups when there are fewer than 8 sub-ranges; x TILES column groups
//     each warp streams in turn, sharing the CTA's activation staging), so the canonical fold
//     ((0 + s_0) + s_1) + ... of gemm_common.cuh happens in shared memory, without partials;
//   * the weight windows stream straight into registers (S in flight per lane), issued before the
//     wait for the previous kernel, with the L2 fetching whole 128-byte lines;
//   * FP8: one scale code per window for the whole warp (its 16 columns lie in one FP8 block of
//     >= 16 rows and a window in one block of >= 64 inputs): lane i holds window i's, shuffled
//     out; FP4 (per column and 32 inputs): each lane streams its runs' codes with the runs;
//   * experts: a CTA per (column group, active expert) as in the general kernel, rows through the
//     routing's permutation;
//   * the same mma.m16n8k16 steps as the transposed one-row-tile streaming kernel (weights as the A
//     operand, the rows as B), in the same order: the same bits, whatever kernel takes a launch.
// The launcher (launch_gemm.cu) takes it when the shape allows (plan_lean_gemv, lean_plan.h: the
// geometry, tested on the CPU) and falls back to the general kernel otherwise.
#pragma once

#include <type_traits>

#include "kernels/gemm/dequant_gemv.cuh"
#include "kernels/gemm/lean_plan.h"
#include "kernels/gemm/weight_loads.cuh"

namespace deepinfer::kernels {

// TILES: column groups per warp (LeanGemvShape::tiles), a template parameter so that one-tile
// launches (dense batch 1) keep the registers of 3 resident CTAs per SM (80); with 3 windows in
// flight FP8 / BF16 fit 4 (64 registers): one wave for the 512-CTA projections instead of 1.3
// (FP4's decode would spill there). Four- and six-tile warps (six: FP4 expert launches that fit one
// round so, lean_wide_tiles) take 2 (<= 128). Deep rings (S > 4: launches of
// few CTAs, every window of a warp in flight at once) take 1. Six tiles with 3 windows in flight
// (the compact wide form, DEEPINFER_GEMV_LEAN_WIDE_COMPACT) are bounded as if of 320 threads: 96
// registers (65,536 / (2 x 320), no spills at S = 3; ptxas), so that beside two of its eight-warp
// CTAs an SM holds a four-warp CTA of the next launch (batch 1's down projection, 110 registers),
// which then waits there for the gate/up round instead of starting after it retires.
// PF: every tile's weight rows requested into the L2 up front (l2_prefetch_weights; FP4 expert
// launches of several tiles under DEEPINFER_GEMM_L2_PREFETCH): a template parameter because the
// prefetch's addresses grew the other forms' registers even when off (80-95 -> 107-116, ptxas).
template <WeightFmt F, int S, bool EXPERTS, int TILES, bool PF = false>
__global__ void __launch_bounds__(TILES == kLeanWideTiles && S == 3 ? kLeanWideCompactBound : kLeanMaxWarps * 32,
                                  TILES != 1 ? 2 : (S > 4 ? 1 : (S == 3 && F != WeightFmt::kFp4Block ? 4 : 3)))
    lean_gemv_kernel(GemmParams p, LeanGemvShape sh) {
  constexpr int L = run_elems(F), W = 4 * L;  // elements per lane run and per window
  // FP4 scales differ per column and 32 inputs: each lane streams its runs' codes with the runs.
  constexpr bool kLaneCodes = F == WeightFmt::kFp4Block;
  extern __shared__ __align__(16) uint8_t smem[];
  __nv_bfloat16* sA = reinterpret_cast<__nv_bfloat16*>(smem);  // [<= 8 rows][lda_s]: all of K
  // Each warp's sub-range sums per tile: [tile][warp][row][column].
  __shared__ float red[TILES][kLeanMaxWarps][kLeanMaxRows][kLeanCols];
  __shared__ int32_t a_row[kLeanMaxRows], c_row[kLeanMaxRows];

  griddep_launch_dependents();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  // sub = warp % P, cg = warp / P without a division (warps <= 8): the prologue's integer divisions
  // were ~12% of a batch-1 expert launch's instructions.
  const int P = sh.P;
  int sub = warp, cg = 0;
  while (sub >= P) sub -= P, ++cg;
  const int set = p.n_sets > 1 && static_cast<int>(blockIdx.x) >= sh.x_ctas0 ? 1 : 0;
  const int64_t N = set == 0 ? p.N : p.N1, ldc = set == 0 ? p.ldc : p.ldc1;
  const int64_t cta_n0 = (static_cast<int64_t>(blockIdx.x) - set * sh.x_ctas0) * TILES * sh.groups * kLeanCols;
  const int64_t tile_cols = static_cast<int64_t>(sh.groups) * kLeanCols;  // column step between a warp's tiles
  const int64_t n0 = cta_n0 + cg * kLeanCols;                             // the warp's first column
  const int k0 = sub * sh.R;                                              // the warp's sub-range
  const int nw = min(sh.R, static_cast<int>(p.K) - k0) / W;               // windows per tile
  // Tiles with columns (warp-uniform), and the windows of all of them.
  const int n_tiles =
      n0 >= N ? 0 : (TILES == 1 ? 1 : min(TILES, static_cast<int>((N - n0 + tile_cols - 1) / tile_cols)));
  const int n_win = n_tiles * nw;
  // Dense: the group's weight rows and output columns start at blockIdx.z N. Experts: the CTA's
  // active expert (known once the routing kernel is done, so its weights are not streamed early).
  WeightDesc w;
  int64_t w_row0 = 0, rows_begin = 0, m_count = p.M;
  if constexpr (EXPERTS) {
    griddep_wait();
    if (static_cast<int>(blockIdx.z) >= p.active[p.n_experts]) return;  // fewer active experts
    const int e = p.active[blockIdx.z];
    w = p.experts[set * p.n_experts + e];
    rows_begin = p.offsets[e];
    m_count = p.offsets[e + 1] - rows_begin;
  } else {
    w = set == 0 ? p.w : p.w1;
    w_row0 = static_cast<int64_t>(blockIdx.z) * p.N;
  }

  // The next window to load: window ld_win of tile ld_tile, whose lane rows (columns n + g and
  // n + 8 + g; past N: row N - 1, outputs dropped) start at wb (weights, at the lane's run of the
  // sub-range) and sb (FP4 scale codes).
  const int k_lane = k0 + c * L;
  const int64_t k_byte = F == WeightFmt::kBF16 ? 2 * k_lane : (F == WeightFmt::kFp8Block ? k_lane : k_lane / 2);
  const uint8_t* wb[2];
  const uint8_t* sb[2];
  int ld_tile = 0, ld_win = 0;
  auto set_tile = [&](int t) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t n = w_row0 + min64(n0 + t * tile_cols + r * 8 + g, N - 1);
      wb[r] = w.w + n * w.row_bytes + k_byte;
      if constexpr (kLaneCodes) sb[r] = w.scale + n * w.scale_cols + (k_lane >> 5);
    }
  };
  uint4 buf[S][2];
  uint8_t cbuf[S][2];  // FP4: the runs' scale codes
  const uint64_t l2_policy = weight_l2_policy(sh.evict_first);
  // PF: lane i < 16 asks the L2 for column i's run of the warp's sub-range in every tile (k0's
  // byte offset is a multiple of 64: R is of 128 inputs), so the ring's loads of the later tiles
  // find their lines on the way; rows not 16-byte aligned are left to the ring.
  auto prefetch_tiles = [&] {
    if (w.row_bytes % 16 != 0 || reinterpret_cast<uintptr_t>(w.w) % 16 != 0 || nw == 0 || lane >= 16) return;
    const int64_t k0_byte = F == WeightFmt::kBF16 ? 2 * k0 : (F == WeightFmt::kFp8Block ? k0 : k0 / 2);
    for (int t = 0; t < n_tiles; ++t) {
      const int64_t n = w_row0 + min64(n0 + t * tile_cols + lane, N - 1);
      l2_prefetch_weights(w.w + n * w.row_bytes + k0_byte, static_cast<uint32_t>(nw * kLeanWindowBytes), l2_policy);
    }
  };
  auto load = [&](int slot) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      buf[slot][r] = ldg_weight16(wb[r] + ld_win * kLeanWindowBytes, l2_policy);
      if constexpr (kLaneCodes) cbuf[slot][r] = __ldg(sb[r] + ld_win * (W / 32));
    }
    if (++ld_win == nw) {  // on to the next tile
      ld_win = 0;
      if (TILES > 1 && ++ld_tile < n_tiles) set_tile(ld_tile);
    }
  };
  auto prime = [&] {  // the first S windows
    ld_tile = 0, ld_win = 0;
    set_tile(0);
#pragma unroll
    for (int d = 0; d < S; ++d)
      if (d < n_win) load(d);
  };
  if constexpr (PF) prefetch_tiles();
  prime();
  // FP8: window i's scale code in lane i (tile i / nw; a warp's 16 columns share an FP8 block);
  // the warp takes the fast decoder unless a code is beyond it.
  uint8_t my_code = 0;
  if constexpr (F == WeightFmt::kFp8Block) {
    if (lane < n_win) {
      const int t = lane / nw, wi = lane - t * nw;
      my_code = w.scale[((w_row0 + n0 + t * tile_cols) >> sh.out_shift) * w.scale_cols + ((k0 + wi * W) >> sh.in_shift)];
    }
  }
  const uint32_t my_scale = quad_scale<F>(my_code);
  const bool exact = F != WeightFmt::kFp8Block || __all_sync(0xffffffffu, quad_scale_exact<F>(my_code));
  if constexpr (!EXPERTS) griddep_wait();  // the activations come from the previous kernel

  const int64_t a_col0 = EXPERTS ? 0 : static_cast<int64_t>(blockIdx.z) * p.K;
  const bool a_vec = p.lda % 8 == 0 && a_col0 % 8 == 0 && reinterpret_cast<uintptr_t>(p.A) % 16 == 0;
  const int chunks = static_cast<int>(p.K / 8);
  void* const C = set == 0 ? p.C : p.C1;
  // Rows in chunks of 8 (an expert may hold more at larger batch: its weights stream again, from L2).
  for (int64_t m0 = 0; m0 < m_count; m0 += kLeanMaxRows) {
    const int rows = static_cast<int>(min64(kLeanMaxRows, m_count - m0));
    if (m0 > 0) {
      __syncthreads();  // the previous chunk is done with a_row / c_row / sA / red
      prime();
    }
    if (threadIdx.x < kLeanMaxRows) {
      const int r = static_cast<int>(threadIdx.x);
      int32_t cr = -1;
      if (r < rows) cr = EXPERTS ? p.perm[rows_begin + m0 + r] : static_cast<int32_t>(m0 + r);
      c_row[r] = cr;
      a_row[r] = cr < 0 ? -1 : (EXPERTS ? cr / p.a_div : cr);
    }
    __syncthreads();
    if (p.a_quant_block > 0) {
      stage_quantised_a<1>(p, a_row, a_col0, a_vec, rows, rows, chunks, sA, sh.lda_s);
    } else {
      stage_plain_a(p, a_row, a_col0, a_vec, rows, chunks, sA, sh.lda_s);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    // acc element e: row 2c + (e & 1), column (e >= 2 ? 8 : 0) + g of the tile (transposed mma).
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // Lane group g reads row g of the B operand: staged row min(g, rows - 1), so that every lane
    // reads staged data without a predicate (and the compiler keeps one shared-memory address in
    // a register instead of rebuilding it, zeroing and predicating four loads per window: ~20% of
    // a batch-1 FP4 window's instructions, ncu on the H100, session 41). Rows >= `rows` only feed
    // accumulator columns the fold never stores. The address comes through launder_u32 after the
    // staging's barrier, so the plain (non-volatile) loads below cannot be hoisted above it.
    const uint32_t a_lane = launder_u32(
        smem_addr(sA + static_cast<int64_t>(min(g, rows - 1)) * sh.lda_s + k0 + c * L));
    int w_in = 0, tile = 0;          // the window being computed: its index in the tile, the tile
    // One window's mma steps with the weights decoded by `decode(t, j, b0, b1)` (run of n8 tile t):
    // one 16-byte A read per row serves two steps (as in dequant_gemv_kernel's transposed tiles).
    auto window = [&](auto decode) {
#pragma unroll
      for (int j = 0; j < L / 4; j += 2) {
        const uint4 x = lds128(a_lane + 2 * (w_in * W + 4 * j));
        transposed_mma_pair(acc, decode, j, x);
      }
    };
    // The stream: window fi (of all tiles) decoded from buf[fi % S], which then takes window fi + S.
    auto stream = [&](auto fast) {
      for (int f0 = 0; f0 < n_win; f0 += S) {
#pragma unroll
        for (int u = 0; u < S; ++u) {
          const int fi = f0 + u;
          if (fi >= n_win) break;  // warp-uniform
          const uint4(&cur)[2] = buf[u];
          if constexpr (kLaneCodes) {
            const uint8_t c0 = cbuf[u][0], c1 = cbuf[u][1];
            // Warp-uniform (the lanes of an mma.sync run the same instruction).
            if (__all_sync(0xffffffffu, quad_scale_exact<F>(c0) && quad_scale_exact<F>(c1))) {
              const uint32_t s0 = quad_scale<F>(c0), s1 = quad_scale<F>(c1);
              window([&](int t, int j, uint32_t& b0, uint32_t& b1) { decode_quad_scaled<F>(cur[t], t ? s1 : s0, j, b0, b1); });
            } else {
              window([&](int t, int j, uint32_t& b0, uint32_t& b1) { decode_quad<F>(cur[t], t ? c1 : c0, j, b0, b1); });
            }
          } else if constexpr (decltype(fast)::value) {
            const uint32_t sc = F == WeightFmt::kBF16 ? 0u : __shfl_sync(0xffffffffu, my_scale, fi);
            window([&](int t, int j, uint32_t& b0, uint32_t& b1) { decode_quad_scaled<F>(cur[t], sc, j, b0, b1); });
          } else {
            const uint8_t code = static_cast<uint8_t>(__shfl_sync(0xffffffffu, my_code, fi));
            window([&](int t, int j, uint32_t& b0, uint32_t& b1) { decode_quad<F>(cur[t], code, j, b0, b1); });
          }
          if (fi + S < n_win) load(u);
          if (++w_in == nw) {  // the tile's sub-range sum is complete
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              red[tile][warp][2 * c + (e & 1)][(e >= 2 ? 8 : 0) + g] = acc[e];
              acc[e] = 0.0f;
            }
            w_in = 0;
            if (TILES > 1) ++tile;
          }
        }
      }
    };
    if constexpr (F != WeightFmt::kFp8Block) {
      stream(std::true_type{});
    } else if (exact) {  // warp-uniform
      stream(std::true_type{});
    } else {
      stream(std::false_type{});
    }

    // The fold: each output is ((0 + s_0) + s_1) + ... over the sub-range warps of its column group.
    __syncthreads();
    const int per_tile = sh.groups * rows * kLeanCols;
    for (int i = threadIdx.x; i < TILES * per_tile; i += blockDim.x) {
      const int t = TILES == 1 ? 0 : i / per_tile, rem = i - t * per_tile;
      // rem = (gi rows + r) kLeanCols + col; one row (batch 1) without the divisions.
      const int gr = rem / kLeanCols, col = rem % kLeanCols;
      const int gi = rows == 1 ? gr : gr / rows, r = gr - gi * rows;
      const int64_t n = cta_n0 + t * tile_cols + gi * kLeanCols + col;
      if (n >= N) continue;
      float total = 0.0f;
      for (int q = 0; q < P; ++q) total += red[t][gi * P + q][r][col];
      store_out(C, p.c_bf16, c_row[r] * ldc + (EXPERTS ? 0 : static_cast<int64_t>(blockIdx.z) * p.N) + n, total);
    }
  }
}

}  // namespace deepinfer::kernels
