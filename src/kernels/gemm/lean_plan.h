// Launch geometry of the lean decode GEMM kernel (lean_gemv.cuh), as plain C++ (no CUDA: tested on
// the CPU). The kernel's CTA covers kLeanCols (16) columns x every canonical K sub-range (one warp
// each), times `groups` column groups side by side (warps = groups x P <= 8) and `tiles` column
// groups each warp streams in turn; CTAs along x cover weight set 0's columns, then set 1's, and z
// is the group (dense) or active-expert slot. The launcher (launch_gemm.cu) checks what this
// cannot see — formats, alignment, which kernel family the launch belongs to — and asks here
// whether the shape fits and with what geometry.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/gemm/canonical_k.h"

namespace deepinfer::kernels {

inline constexpr int kLeanCols = 16;         // columns per warp: two n8 tiles
inline constexpr int kLeanMaxRows = 8;       // one n8 row tile (the mma's B operand)
inline constexpr int kLeanMaxWarps = 8;      // sub-ranges (<= 8) x column groups
inline constexpr int kLeanMaxTiles = 4;      // column groups one warp streams in turn
inline constexpr int kLeanExpertMidTiles = 2;  // expert launches only: 1, 2 or 4 tiles
inline constexpr int kLeanMaxWindows = 32;   // FP8: windows per warp (all tiles), a scale code per lane
inline constexpr int kLeanWindowBytes = 64;  // a window's bytes of one weight row (FP8 64, BF16 32 x 2)
inline constexpr int kLeanStagePad = 8;      // BF16 elements of padding per staged activation row

// What the kernel reads from the host, once per launch.
struct LeanGemvShape {
  int R = 0, P = 0;    // gemm_subrange(K), gemm_n_subranges(K): one warp each
  int groups = 1;      // column groups of kLeanCols side by side per CTA (warps = groups P)
  int tiles = 1;       // column groups each warp streams in turn (1, 4; experts also 2): the CTA's columns are
                       // tiles x groups x kLeanCols, its staged activations shared by all of them
  int x_ctas0 = 0;     // CTAs along x of weight set 0 (set 1's follow)
  int a_rows = 0;      // staged activation rows (<= 8)
  int lda_s = 0;       // staged row stride in elements: K + kLeanStagePad
  int in_shift = 0;    // log2 of the FP8 scale block (inputs, outputs)
  int out_shift = 0;
};

// A launch as the plan sees it.
struct LeanGemmDims {
  int64_t rows = 0;        // dense: M; experts: the most tokens one expert can hold
  int64_t N = 0, N1 = 0;   // columns of weight set 0 and 1 (N1 = 0: one set)
  int64_t K = 0;
  int64_t outer = 1;       // z: groups (dense) or active-expert slots
  bool experts = false;
  bool grouped = false;    // dense block-diagonal groups (weight rows g N ..)
  int run_elems = 16;      // weight elements per 16 stored bytes: 8 BF16, 16 FP8, 32 FP4
  bool fp8 = false;        // UE8M0 scale blocks of block_in x block_out
  int block_in = 0, block_out = 0;
};

// The tuning knobs (launch_gemm.cu reads them from the environment).
struct LeanKnobs {
  int max_rows = 8;            // dense launches of at most this many rows (0: none)
  int max_expert_tokens = 256; // expert launches of at most this many tokens (0: none)
  int tiles = 0;               // 1, 4, or 0 = auto: for expert launches 4, or 2 where that
                               // spreads the weight bytes more evenly over the SMs (lean_expert_tiles);
                               // dense launches 4 where >= 4 waves of CTAs remain, else 1
  size_t max_smem = 80 << 10;  // staged activation bytes a CTA may hold
  int64_t sms = 132;           // for `auto`: CTA waves at 2 CTAs per SM
};

struct LeanLaunchPlan {
  LeanGemvShape shape;
  int64_t grid_x = 0, grid_z = 0;
  int threads = 0;
  size_t smem = 0;  // dynamic shared memory: the staged rows
};

inline bool lean_pow2_at_least(int v, int least) { return v >= least && (v & (v - 1)) == 0; }

// Column groups per warp for an expert launch, given its CTA count at t tiles (ctas_at(t)): the
// CTAs are alike (one expert's columns each), so the busiest SM streams ceil(CTAs / SMs) of them,
// t column groups each. Four tiles unless two leave that busiest SM at most 90% of the bytes:
// batch 1's FP4 down projection (6 experts x 4,096 columns) has 192 four-tile CTAs, two on 60
// SMs and one on 72 (8 column groups on the busiest SMs, where 384 two-tile CTAs put 6), while
// its gate/up launch (384 four-tile CTAs, about 3 on every SM) keeps 4. Fewer tiles also mean
// more CTAs paying the routing wait and the expert-pointer loads (one tile measured slower at
// batch 1, session 17), hence the margin and no single tiles.
template <typename CtasAt>
int lean_expert_tiles(CtasAt ctas_at, int64_t sms) {
  auto busiest = [&](int t) { return (ctas_at(t) + sms - 1) / sms * t; };
  return busiest(kLeanExpertMidTiles) * 10 <= busiest(kLeanMaxTiles) * 9 ? kLeanExpertMidTiles : kLeanMaxTiles;
}

// Whether the lean kernel takes the launch, and its geometry.
inline bool plan_lean_gemv(const LeanGemmDims& d, const LeanKnobs& knobs, LeanLaunchPlan& plan) {
  if (d.rows < 1 || d.N < 1 || d.K < 1 || d.K % kGemmBK != 0 || d.K > (int64_t{1} << 24) || d.outer < 1) return false;
  if (d.experts ? d.rows > knobs.max_expert_tokens : d.rows > std::min(knobs.max_rows, kLeanMaxRows)) return false;
  const int W = 4 * d.run_elems;  // elements per window
  // FP8: a warp's 16 columns in one scale block of outputs, a window in one block of inputs.
  if (d.fp8 && (!lean_pow2_at_least(d.block_in, W) || !lean_pow2_at_least(d.block_out, kLeanCols))) return false;
  if (d.grouped && d.N % kLeanCols != 0) return false;  // each group's rows start a column group
  LeanGemvShape& sh = plan.shape;
  sh.R = static_cast<int>(gemm_subrange(d.K));
  sh.P = gemm_n_subranges(d.K);
  const int windows = sh.R / W;
  if (windows > kLeanMaxWindows || sh.P > kLeanMaxWarps) return false;
  sh.groups = std::max(1, kLeanMaxWarps / sh.P);
  sh.a_rows = static_cast<int>(std::min<int64_t>(d.rows, kLeanMaxRows));
  sh.lda_s = static_cast<int>(d.K) + kLeanStagePad;
  plan.smem = static_cast<size_t>(sh.a_rows) * sh.lda_s * 2;
  if (plan.smem > knobs.max_smem) return false;
  sh.in_shift = d.fp8 ? __builtin_ctz(static_cast<unsigned>(d.block_in)) : 0;
  sh.out_shift = d.fp8 ? __builtin_ctz(static_cast<unsigned>(d.block_out)) : 0;
  auto x_ctas = [&](int64_t n, int tiles) {
    const int64_t cols = static_cast<int64_t>(tiles) * sh.groups * kLeanCols;
    return (n + cols - 1) / cols;
  };
  auto ctas_at = [&](int tiles) { return (x_ctas(d.N, tiles) + (d.N1 > 0 ? x_ctas(d.N1, tiles) : 0)) * d.outer; };
  sh.tiles = knobs.tiles;
  if (sh.tiles == 0) {
    // Expert launches take 4 unless that leaves the SMs' bytes uneven (lean_expert_tiles): with
    // fewer CTAs fewer of them pay the routing wait and the expert-pointer loads before their
    // first weight load (batch 1's FP4 gate/up: 384 CTAs instead of 1,536, +1.3% per decode step
    // on the H200, session 17); larger batches have enough CTAs for 4 to stay even.
    sh.tiles = d.experts                                           ? lean_expert_tiles(ctas_at, knobs.sms)
               : ctas_at(1) / kLeanMaxTiles >= 4 * 2 * knobs.sms ? kLeanMaxTiles
                                                                   : 1;
  }
  if (sh.tiles != 1 && sh.tiles != kLeanMaxTiles && !(d.experts && sh.tiles == kLeanExpertMidTiles)) return false;
  if (d.fp8 && sh.tiles * windows > kLeanMaxWindows) sh.tiles = 1;  // a code per window in a lane
  sh.x_ctas0 = static_cast<int>(x_ctas(d.N, sh.tiles));
  plan.grid_x = sh.x_ctas0 + (d.N1 > 0 ? x_ctas(d.N1, sh.tiles) : 0);
  plan.grid_z = d.outer;
  plan.threads = sh.groups * sh.P * 32;
  return true;
}

}  // namespace deepinfer::kernels
