// The FP8-order expert launches (fp8_expert_gemm.cuh; DEEPINFER_GEMM_FP8_EXPERTS=1) as plain C++:
// their tile geometry and staging, shared by the launcher and a CPU test (fp8_gemv_plan_test).
//
// Every FP4 expert launch takes this path when the knob is on, whatever its size — the weights
// are then stored in the fold layout (fp4_fold_layout.h), which no other kernel reads, and one
// kernel for every M is what keeps a token's bits independent of its batch (a tile's size does not
// change a pair's sums: the wgmma forms of any N give the same bits, wgmma_fp8_probe). Token tiles
// of 128 pairs where the experts average 64 pairs or more (prefill), else of 32 (decode batches:
// ~1.5 pairs per expert at batch 64, 12 at 512), the MMAs covering the whole tile either way.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/gemm/canonical_k.h"

namespace deepinfer::kernels {

inline constexpr int kFp8ExpertRows = 128;  // weight rows (output columns) per tile: two warpgroups of 64
// The lean form (fp8_expert_gemv.cuh): a warpgroup's 64 weight rows x the whole K per CTA, an
// expert's pairs in chunks of 8, the staged codes [K / 128][4][8 x 32] in shared memory (K <= 8192).
inline constexpr int kFp8ExpertLeanCols = 64;
inline constexpr int kFp8ExpertLeanRows = 8;
inline constexpr int64_t kFp8ExpertLeanMaxK = 8192;

// A code block of an expert tile: nt pairs x 128 E4M3 codes in the FP8 order's image
// (fp8_tile_offset with rows = nt), then the nt pairs' F32 block scales as [c][2 j + e] for pair
// 8 j + 2 c + e, each c's row padded by 16 bytes: consumer lane c (fp8_expert_gemm.cuh: its
// accumulators are pairs 8 j + 2 c + e) reads its scales as float4s, the four c without a bank
// conflict (rows of nt / 4 + 4 floats start 4 banks apart).
inline constexpr int fp8_expert_scale_stride(int nt) { return nt / 4 + 4; }  // floats per c
inline constexpr int fp8_expert_scale_slot(int nt, int pair) {
  return (pair % 8) / 2 * fp8_expert_scale_stride(nt) + (pair / 8) * 2 + pair % 2;
}
inline constexpr int64_t fp8_expert_codes_block_bytes(int nt) {
  return int64_t{nt} * 128 + 4 * 4 * int64_t{fp8_expert_scale_stride(nt)};
}
static_assert(fp8_expert_codes_block_bytes(128) % 16 == 0 && fp8_expert_codes_block_bytes(32) % 16 == 0);

// Shared memory of the lean form (plan.lean) with `groups` 64-row groups per CTA: the staged codes
// [kb][4 steps][8 x 32] E4M3, the pairs' scales [kb][8] F32 and the rows' scale words
// [groups x 64][fp8_expert_gemv_word_stride(kb)].
inline constexpr int fp8_expert_gemv_word_stride(int64_t kb) { return static_cast<int>(kb | 1); }  // odd: no conflicts
inline constexpr int64_t fp8_expert_gemv_smem_bytes(int64_t kb, int groups = 1) {
  return kb * 4 * kFp8ExpertLeanRows * 32 + kFp8ExpertLeanRows * kb * 4 +
         int64_t{groups} * kFp8ExpertLeanCols * fp8_expert_gemv_word_stride(kb) * 4;
}

struct Fp8ExpertPlan {
  int nt = 128;          // pairs per token tile
  int64_t y_tiles = 0;   // bound on the (expert, token tile) pairs: ceil(M / nt) + min(E, M)
  int64_t n_tiles = 0;   // 128-column weight tiles
  int64_t kb = 0;        // 128-input blocks
  int64_t table_bytes = 0;  // int32 [3][y_tiles], 256-byte rounded
  int64_t codes_bytes = 0;  // [y_tiles][kb] code blocks
  int split = 1;            // CTAs per output tile (the split form: one K sub-range each), else 1
  // The lean form instead (decode launches): no staging; grid lean_groups per set x lean_z slots
  // of the routing's active experts. The tiled fields above are then unset.
  bool lean = false;
  int64_t lean_groups = 0;  // 64-column groups of a set
  int64_t lean_z = 0;       // min(E, M): the most experts M pairs reach
  int lean_per_cta = 1;     // groups each CTA takes in turn (1 or 2)
  int64_t lean_ctas() const { return (lean_groups + lean_per_cta - 1) / lean_per_cta; }  // per set
  int64_t staging_bytes() const { return table_bytes + codes_bytes; }
};

// M (token, slot) pairs routed to E experts (E <= 1024: the tile table is one block's scan) of N
// columns over K (whole 128-input blocks). 32-pair launches of fewer output tiles than
// split_below (the launcher passes two per SM under DEEPINFER_GEMM_FP8_SPLIT=1, else 0: never)
// take the split form: with one CTA streaming a tile's whole K, a decode step's few tiles (6 pairs
// x 16 gate/up tiles at batch 1) leave SMs idle or run in two uneven waves; a cluster of
// gemm_n_subranges(K) CTAs per tile streams them in parallel and folds the sub-ranges in order
// (the same bits) — on the H100 38% slower at batch 1 (session 49: ~7 waves of clusters at one
// CTA per SM), hence off by default. Launches of at most lean_pairs pairs (the launcher passes
// DEEPINFER_GEMM_FP8_EXPERTS_LEAN, default 512; 0: none) over K <= kFp8ExpertLeanMaxK take the
// lean form instead (one launch for both sets; the same bits), its CTAs taking lean_per_cta (1 or
// 2: DEEPINFER_GEMM_FP8_EXPERTS_LEAN_GROUPS) 64-row groups in turn where a set has two or more.
inline bool plan_fp8_experts(int64_t M, int64_t E, int64_t N, int64_t K, int64_t split_below, Fp8ExpertPlan& plan,
                             int64_t lean_pairs = 0, int lean_per_cta = 1) {
  plan = Fp8ExpertPlan{};
  if (M <= 0 || E <= 0 || E > 1024 || N <= 0 || K <= 0 || K % kGemmBK != 0) return false;
  if (M <= lean_pairs && K <= kFp8ExpertLeanMaxK) {
    plan.lean = true;
    plan.lean_groups = (N + kFp8ExpertLeanCols - 1) / kFp8ExpertLeanCols;
    plan.lean_z = std::min(E, M);
    plan.lean_per_cta = lean_per_cta == 2 && plan.lean_groups >= 2 ? 2 : 1;
    plan.kb = K / kGemmBK;
    return true;
  }
  plan.nt = M >= 64 * E ? 128 : 32;
  plan.y_tiles = (M + plan.nt - 1) / plan.nt + std::min(E, M);
  plan.n_tiles = (N + kFp8ExpertRows - 1) / kFp8ExpertRows;
  plan.kb = K / kGemmBK;
  plan.table_bytes = (3 * plan.y_tiles * 4 + 255) / 256 * 256;
  plan.codes_bytes = plan.y_tiles * plan.kb * fp8_expert_codes_block_bytes(plan.nt);
  if (plan.nt == 32 && plan.y_tiles * plan.n_tiles < split_below) plan.split = gemm_n_subranges(K);
  return true;
}

}  // namespace deepinfer::kernels
