// What the large-M GEMM kernels (pipelined, wgmma) share about their output tiles: which rows a
// tile covers — plain rows of one block-diagonal group, or one expert's permuted (token, slot)
// pairs, in the enumeration the launcher sizes the grid for (pipe_tiles) — and the split-K fold.
#pragma once

#include "kernels/gemm/gemm_common.cuh"

namespace deepinfer::kernels {

inline constexpr int kPipeMaxExperts = 1024;

struct TileRows {
  int64_t m_count = 0;  // rows of this tile (<= 0: the CTA has nothing to do)
  int group = 0;        // block-diagonal group or expert
  WeightDesc w;         // the group's weight (its expert's in expert mode)
};

// Fills a_row[BM] (A row, -1 past m_count) and c_row[BM] (C row) for tile `y` and returns the
// tile's rows. Dense: y = group * m_tiles + m tile. Experts: y enumerates the (expert, BM-row
// tile) pairs that hold rows in expert order — the CTA finds its own from the offsets, so no CTA
// is launched per empty expert tile. Called by every thread; ends with a barrier.
template <int BM>
__device__ TileRows gemm_tile_rows(const GemmParams& p, int m_tiles, int y, int32_t* a_row, int32_t* c_row) {
  __shared__ int32_t s_tiles[kPipeMaxExperts];
  __shared__ int32_t s_expert, s_mtile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  TileRows t;
  t.w = p.w;
  if (p.experts != nullptr) {
    for (int e = threadIdx.x; e < p.n_experts; e += blockDim.x)
      s_tiles[e] = (p.offsets[e + 1] - p.offsets[e] + BM - 1) / BM;
    if (threadIdx.x == 0) s_expert = -1;
    __syncthreads();
    if (warp == 0) {
      int base = 0;
      for (int e0 = 0; e0 < p.n_experts && base <= y; e0 += 32) {
        const int e = e0 + lane;
        const int n = e < p.n_experts ? s_tiles[e] : 0;
        int incl = n;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
          const int v = __shfl_up_sync(0xffffffffu, incl, off);
          if (lane >= off) incl += v;
        }
        const int first = base + incl - n;
        if (n > 0 && y >= first && y < first + n) {
          s_expert = e;
          s_mtile = y - first;
        }
        base += __shfl_sync(0xffffffffu, incl, 31);
      }
    }
    __syncthreads();
    if (s_expert < 0) return t;  // past the last tile with rows (uniform: m_count 0)
    t.group = s_expert;
    t.w = p.experts[t.group];
    const int32_t begin = p.offsets[t.group] + s_mtile * BM;
    t.m_count = min(p.offsets[t.group + 1] - begin, BM);
    for (int i = threadIdx.x; i < BM; i += blockDim.x) {
      const int32_t pr = i < t.m_count ? p.perm[begin + i] : -1;
      a_row[i] = pr < 0 ? -1 : pr / p.a_div;
      c_row[i] = pr;
    }
  } else {
    t.group = y / m_tiles;
    const int m_tile = y % m_tiles;
    t.m_count = min64(BM, p.M - static_cast<int64_t>(m_tile) * BM);
    if (t.m_count <= 0) return t;
    for (int i = threadIdx.x; i < BM; i += blockDim.x) {
      a_row[i] = i < t.m_count ? m_tile * BM + i : -1;
      c_row[i] = a_row[i];
    }
  }
  __syncthreads();
  return t;
}

// The K tiles (of kGemmBK) a CTA of a large-M launch covers: sub-ranges [z spc, (z + 1) spc) of
// the canonical order (all of K without a split, spc = P).
struct KTiles {
  bool split = false;  // several CTAs share an output tile (partials folded by fold_split_tile)
  int begin = 0, end = 0;
};
__device__ inline KTiles k_tiles_of(const GemmParams& p, int spc) {
  const int64_t R = gemm_subrange(p.K);
  KTiles t;
  t.split = spc < gemm_n_subranges(p.K);
  const int sub0 = static_cast<int>(blockIdx.z) * spc;
  t.begin = static_cast<int>(sub0 * R / kGemmBK);
  t.end = static_cast<int>(min64(p.K, (sub0 + spc) * R) / kGemmBK);
  return t;
}

// Split-K launches of the large-M kernels, after this CTA stored its sub-range partials: the last
// CTA of output tile (blockIdx.y, blockIdx.x) to finish folds them in sub-range order into C
// (arrival order decides only who folds) and re-arms the counter; without counters
// gemv_reduce_kernel folds them. Called by every thread.
template <int BN>
__device__ void fold_split_tile(const GemmParams& p, const int32_t* c_row, int64_t m_count, int64_t n0,
                                int64_t col_off) {
  if (p.tile_counters == nullptr) return;
  int32_t* counter = p.tile_counters + static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
  if (!last_to_arrive(counter, static_cast<int>(gridDim.z))) return;
  const int P = gemm_n_subranges(p.K);
  const int64_t n_cols = min64(BN, p.N - n0);
  // Output i of the tile: row c_row[i / n_cols], column col_off + n0 + i % n_cols.
  auto at = [&](int64_t i) { return static_cast<int64_t>(c_row[i / n_cols]) * p.ldc + col_off + n0 + i % n_cols; };
  fold_in_order(p.partial, p.M * p.ldc, P, m_count * n_cols, at,
                [&](int64_t off, float v) { store_out(p.C, p.c_bf16, off, v); });
  if (threadIdx.x == 0) *counter = 0;
}

}  // namespace deepinfer::kernels
