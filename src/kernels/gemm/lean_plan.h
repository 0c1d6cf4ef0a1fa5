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
inline constexpr int kLeanWideTiles = 6;     // ... in FP4 expert launches that fit one round (below)
inline constexpr int kLeanWideCompactBound = 320;  // the compact wide form's launch bound (lean_gemv.cuh)
inline constexpr int kLeanMaxWindows = 32;   // FP8: windows per warp (all tiles), a scale code per lane
inline constexpr int kLeanWindowBytes = 64;  // a window's bytes of one weight row (FP8 64, BF16 32 x 2)
inline constexpr int kLeanStagePad = 8;      // BF16 elements of padding per staged activation row

// What the kernel reads from the host, once per launch.
struct LeanGemvShape {
  int R = 0, P = 0;    // gemm_subrange(K), gemm_n_subranges(K): one warp each
  int groups = 1;      // column groups of kLeanCols side by side per CTA (warps = groups P)
  int tiles = 1;       // column groups each warp streams in turn (1, 4 or 6): the CTA's columns are
                       // tiles x groups x kLeanCols, its staged activations shared by all of them
  int x_ctas0 = 0;     // CTAs along x of weight set 0 (set 1's follow)
  int a_rows = 0;      // staged activation rows (<= 8)
  int lda_s = 0;       // staged row stride in elements: K + kLeanStagePad
  int in_shift = 0;    // log2 of the FP8 scale block (inputs, outputs)
  int out_shift = 0;
  // The weight loads marked first to evict from the L2 (a fractional evict_first policy): a decode
  // step streams ~1 GB of weights through the 50 MB L2 once each, which otherwise also evicts what
  // the step's small kernels re-read (their code, activations, the KV rows, split partials).
  bool evict_first = false;
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
  int tiles = 0;               // 1, 4, or 0 = auto: 4 for expert launches (with fewer column
                               // groups side by side where that evens out the SMs' bytes:
                               // lean_expert_groups; 6 for FP4 ones where that takes fewer
                               // rounds: lean_wide_tiles) and where >= 4 waves of CTAs remain,
                               // else 1; 6: FP4 expert launches take 6, the others as for 4
  int resident_warps = 16;     // warps of the expert kernel that fit on an SM at once (the
                               // launcher asks the CUDA occupancy API; 0: never 6 tiles)
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

// Column groups side by side per CTA for an expert launch (of `groups` at most, one warp per K
// sub-range each), given its CTA count at g groups (ctas_at(g)): the CTAs are alike (one expert's
// columns each), so the busiest SM streams ceil(CTAs / SMs) of them, g column groups per tile
// each. Half as many groups (so twice the CTAs, each of fewer warps) where that leaves the busiest
// SM at most 90% of the column groups: batch 1's FP4 down projection (6 experts x 4,096 columns,
// four sub-ranges, so two groups) has 192 eight-warp CTAs, 2 on 60 SMs and 1 on 72 (ncu: 1.43
// TB/s, where the gate/up launch, ~3 CTAs on every SM, reads 1.88), and 384 four-warp CTAs put 3
// (12 warps instead of 16 on the busiest SMs). Fewer groups but the same four tiles per warp: two
// tiles (twice the CTAs of eight warps, two resident per SM: a second wave) ran that launch
// slower, 21.5 vs 18.7 us (ncu, session 19).
template <typename CtasAt>
int lean_expert_groups(CtasAt ctas_at, int groups, int64_t sms) {
  auto busiest = [&](int g) { return (ctas_at(g) + sms - 1) / sms * g; };
  int best = groups;
  for (int g = groups / 2; g >= 1; g /= 2)
    if (busiest(g) * 10 <= busiest(best) * 9) best = g;
  return best;
}

// Whether an FP4 expert launch takes six tiles per warp instead of four: the launch runs in rounds
// of `per_round(groups)` resident CTAs, each warp streaming its tiles, so its time goes as rounds
// x tiles — six where that is less. Batch 1's gate/up launch (6 experts x 2 x 2,048 columns, K =
// 4,096: eight-warp CTAs, 111 registers, 2 per SM) has 384 four-tile CTAs, a round of 264 and a
// last one of 120 on 120 SMs, whose 8 warps each (ncu on the H100: 1.45 waves, 3.5 warps per
// scheduler issuing in half the cycles) stream at a lower rate; with six tiles it is 264 CTAs,
// one round (cost 6 against 8). Its down projection (384 four-warp CTAs, 4 resident per SM: one
// round) keeps four.
template <typename CtasAt, typename PerRound>
bool lean_wide_tiles(CtasAt ctas_at, PerRound per_round, int groups4, int groups6) {
  auto cost = [&](int tiles, int g) { return (ctas_at(tiles, g) + per_round(g) - 1) / per_round(g) * tiles; };
  return cost(kLeanWideTiles, groups6) < cost(kLeanMaxTiles, groups4);
}

// Whether the lean kernel takes the launch, and its geometry.
inline bool plan_lean_gemv(const LeanGemmDims& d, const LeanKnobs& knobs, LeanLaunchPlan& plan) {
  plan = LeanLaunchPlan{};  // nothing of an earlier plan carries over
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
  auto x_ctas = [&](int64_t n, int tiles, int groups) {
    const int64_t cols = static_cast<int64_t>(tiles) * groups * kLeanCols;
    return (n + cols - 1) / cols;
  };
  auto ctas_at = [&](int tiles, int groups) {
    return (x_ctas(d.N, tiles, groups) + (d.N1 > 0 ? x_ctas(d.N1, tiles, groups) : 0)) * d.outer;
  };
  // FP4 expert launches may take six tiles (lean_wide_tiles; the kernel is instantiated for them).
  const bool wide_ok = d.experts && d.run_elems == 32 && !d.fp8;
  sh.tiles = knobs.tiles == kLeanWideTiles && !wide_ok ? kLeanMaxTiles : knobs.tiles;
  if (sh.tiles == 0) {
    // Expert launches always take 4: with fewer CTAs fewer of them pay the routing wait and the
    // expert-pointer loads before their first weight load (batch 1's FP4 gate/up: 384 CTAs instead
    // of 1,536, +1.3% per decode step on the H200, session 17); larger batches had 4 already.
    sh.tiles = d.experts || ctas_at(1, sh.groups) / kLeanMaxTiles >= 4 * 2 * knobs.sms ? kLeanMaxTiles : 1;
  }
  if (sh.tiles != 1 && sh.tiles != kLeanMaxTiles && sh.tiles != kLeanWideTiles) return false;
  if (d.fp8 && sh.tiles * windows > kLeanMaxWindows) sh.tiles = 1;  // a code per window in a lane
  if (knobs.tiles == 0 && d.experts) {
    const int max_groups = sh.groups;
    auto groups_at = [&](int tiles) {
      return lean_expert_groups([&](int g) { return ctas_at(tiles, g); }, max_groups, knobs.sms);
    };
    sh.groups = groups_at(sh.tiles);
    if (wide_ok && knobs.resident_warps > 0) {
      const int g6 = groups_at(kLeanWideTiles);
      auto per_round = [&](int g) { return knobs.sms * std::max(1, knobs.resident_warps / (g * sh.P)); };
      if (lean_wide_tiles(ctas_at, per_round, sh.groups, g6)) sh.tiles = kLeanWideTiles, sh.groups = g6;
    }
  }
  sh.x_ctas0 = static_cast<int>(x_ctas(d.N, sh.tiles, sh.groups));
  plan.grid_x = sh.x_ctas0 + (d.N1 > 0 ? x_ctas(d.N1, sh.tiles, sh.groups) : 0);
  plan.grid_z = d.outer;
  plan.threads = sh.groups * sh.P * 32;
  return true;
}

}  // namespace deepinfer::kernels
