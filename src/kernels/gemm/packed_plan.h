// The packed large-M GEMM path (packed_gemm.cuh) as plain C++: its operand layout and when a
// launch takes it. Shared by the kernels and the launcher, tested on the CPU (packed_plan_test).
//
// Packed operands: the activations and the dequantised BF16 weights are rewritten, once per
// launch, into 32 KB blocks of 128 rows x one 128-element K tile, each block already in the
// layout wgmma reads from shared memory (K-major core matrices of 8 rows x 16 bytes, no swizzle)
// and already in the canonical k permutation of the weight format (gemm_common.cuh). The GEMM
// kernel then only moves whole blocks (one bulk copy each) and issues wgmma: no per-element work
// in its main loop, which is what limits the dequantising kernel (dequant_gemm_wgmma.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/gemm/canonical_k.h"

namespace deepinfer::kernels {

inline constexpr int kPackRows = 128;                          // rows (A) or columns (W) per block
inline constexpr int kPackStepBytes = kPackRows * 32;          // one k16 step: 128 rows x 32 bytes
inline constexpr int kPackBlockBytes = kPackRows * kGemmBK * 2;  // 32 KB: 8 steps
static_assert(kPackBlockBytes == 8 * kPackStepBytes);

// Byte offset inside a block of element (row r, tile-local physical k) for a weight format whose
// 16-byte runs hold `run_elems` elements (BF16 8, FP8 16, FP4 32). The canonical step j of the
// window at kw takes k = kw + c L + 4 j + e (c, e = 0..3) as logical k 2c + (e & 1) + 8 (e >> 1);
// a step's operand is 16 row groups of two 128-byte core matrices (logical k 0-7, 8-15), each
// 8 rows x 16 bytes.
// Blocks of fewer rows (`rows`, a multiple of 8: the small token tiles of the swapped expert GEMM)
// have the same layout with steps of rows x 32 bytes.
DI_HOST_DEVICE inline int packed_offset(int r, int k, int run_elems, int rows = kPackRows) {
  const int L = run_elems, spw = L / 4;                 // steps per window of 4 L elements
  const int window = k / (4 * L), t = k % (4 * L);
  const int c = t / L, u = t % L, j = u / 4, e = u % 4;
  const int step = window * spw + j;
  return step * rows * 32 + (r / 8) * 256 + (e >> 1) * 128 + (r % 8) * 16 + c * 4 + (e & 1) * 2;
}

struct PackedGemmDims {
  int64_t M = 0, N = 0, K = 0;  // one weight set: N columns per group
  int64_t N1 = 0;               // a second weight set's columns (0: none)
  int groups = 1;               // block-diagonal groups
  bool experts = false;
  bool w_packed = false, w1_packed = false;  // a set's weight already packed (one group): not staged
};

struct PackedGemmPlan {
  int64_t m_tiles = 0, n_tiles = 0, n1_tiles = 0, k_tiles = 0;
  int64_t a_bytes = 0;        // packed activations: [groups][m_tiles][k_tiles] blocks
  int64_t b_bytes = 0;        // packed weights of set 0: [groups][n_tiles][k_tiles] blocks (0: packed already)
  int64_t b1_bytes = 0;       // ... of set 1
  int64_t staging_bytes() const { return a_bytes + b_bytes + b1_bytes; }
};

// Whether a dense launch takes the packed path: at least `min_rows` rows (0: never), whole K
// tiles, no experts, and at least one wave of output tiles per set on `sms` SMs (the packed
// kernel does not split K; smaller launches keep the dequantising kernel's split-K).
inline bool plan_packed_gemm(const PackedGemmDims& d, int64_t min_rows, int64_t sms, PackedGemmPlan& plan) {
  if (min_rows <= 0 || d.experts || d.M < min_rows || d.K <= 0 || d.K % kGemmBK != 0 || d.N <= 0) return false;
  plan.m_tiles = (d.M + kPackRows - 1) / kPackRows;
  plan.n_tiles = (d.N + kPackRows - 1) / kPackRows;
  plan.n1_tiles = d.N1 > 0 ? (d.N1 + kPackRows - 1) / kPackRows : 0;
  plan.k_tiles = d.K / kGemmBK;
  const int64_t tiles = plan.m_tiles * d.groups * std::min(plan.n_tiles, d.N1 > 0 ? plan.n1_tiles : plan.n_tiles);
  if (tiles < sms) return false;
  const int64_t per_k = plan.k_tiles * kPackBlockBytes * d.groups;
  plan.a_bytes = plan.m_tiles * per_k;
  plan.b_bytes = d.w_packed && d.groups == 1 ? 0 : plan.n_tiles * per_k;
  plan.b1_bytes = d.w1_packed && d.groups == 1 ? 0 : plan.n1_tiles * per_k;
  return true;
}

// MoE expert launches (packed_expert_gemm.cuh, expert_swap_gemm.cuh): M (token, slot) pairs
// routed to E experts of N (and a second set's N1 = N) output columns over K. A is packed per
// (expert, tile of `tile_rows` pairs: 128, or 32 for the swapped kernel's small token tiles) in
// the tile enumeration of gemm_tile_rows.cuh, bounded by ceil(M / tile_rows) + min(E, M) tiles;
// the weights are dequantised inside the GEMM kernel, so only A and the tile table are staged.
struct PackedExpertPlan {
  int tile_rows = kPackRows;  // pairs per A tile (block rows)
  int64_t y_tiles = 0;        // bound on the (expert, m tile) pairs
  int64_t n_tiles = 0, k_tiles = 0;
  int64_t table_bytes = 0;  // int32 [3][y_tiles] (expert, first pair, rows), 256-byte rounded
  int64_t a_bytes = 0;      // [y_tiles][k_tiles] blocks of tile_rows x kGemmBK BF16
  int64_t block_bytes() const { return int64_t{tile_rows} * kGemmBK * 2; }
  int64_t staging_bytes() const { return table_bytes + a_bytes; }
};

// Whether an expert launch takes the packed path: at least `min_tokens` tokens (0: never; the
// launcher asks for the launches its rules give this path), whole K tiles; A tiles of `tile_rows`
// pairs (128 or 32).
inline bool plan_packed_experts(int64_t tokens, int64_t M, int64_t E, int64_t N, int64_t K, int64_t min_tokens,
                                PackedExpertPlan& plan, int tile_rows = kPackRows) {
  if (min_tokens <= 0 || tokens < min_tokens || M <= 0 || E <= 0 || N <= 0 || K <= 0 || K % kGemmBK != 0)
    return false;
  if (E > 1024) return false;  // the tile table is one 1024-thread block's scan
  if (tile_rows != kPackRows && tile_rows != 32) return false;
  plan.tile_rows = tile_rows;
  plan.y_tiles = (M + tile_rows - 1) / tile_rows + std::min(E, M);
  plan.n_tiles = (N + kPackRows - 1) / kPackRows;
  plan.k_tiles = K / kGemmBK;
  plan.table_bytes = (3 * plan.y_tiles * 4 + 255) / 256 * 256;
  plan.a_bytes = plan.y_tiles * plan.k_tiles * plan.block_bytes();
  return true;
}

}  // namespace deepinfer::kernels
