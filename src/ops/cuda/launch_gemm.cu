// Launch functions of the GEMM kernels: the tensor-core dequant GEMMs (streaming small-M kernel
// for <= 32 rows per weight and for MoE experts up to 512 tokens, tiled kernel otherwise;
// bitwise equal, see gemm_common.cuh) and the plain F32 GEMM, in dense, grouped and expert modes.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/common/act_dispatch.cuh"
#include "kernels/common/env_knob.h"
#include "kernels/common/pdl_launch.cuh"
#include "kernels/gemm/dequant_gemm.cuh"
#include "kernels/gemm/dequant_gemm_pipelined.cuh"
#include "kernels/gemm/dequant_gemm_wgmma.cuh"
#include "kernels/gemm/dequant_gemv.cuh"
#include "kernels/gemm/lean_gemv.cuh"
#include "kernels/gemm/split_plan.h"
#include "kernels/launch.h"
#include "ops/cuda/launch_fp8_experts.h"
#include "ops/cuda/launch_fp8_gemm.h"
#include "ops/cuda/launch_packed_gemm.h"

namespace deepinfer::kernels {
namespace {

// Output of weight set `set` (GemmParams::n_sets).
void* set_c(const GemmParams& p, int set) { return set == 0 ? p.C : p.C1; }

// One weight set, or two with set 1's columns and row stride given.
bool sets_valid(const GemmParams& p) {
  return p.n_sets == 1 || (p.n_sets == 2 && p.N1 > 0 && p.ldc1 >= p.N1);
}

// Column tiles of `cols` columns over every weight set of a launch.
int64_t set_tiles(const GemmParams& p, int64_t cols) {
  return (p.N + cols - 1) / cols + (p.n_sets > 1 ? (p.N1 + cols - 1) / cols : 0);
}

constexpr size_t kGemvMaxSmem = 200 << 10;

// DEEPINFER_GEMV_TILES_PER_CTA = 1, 2 or 4: every launch that can takes that many column tiles per
// CTA (an A/B knob); unset: chosen per launch (gemv_tiles_per_cta), returned as 0.
constexpr int kGemvMaxTilesPerCta = 4;
int gemv_tiles_knob() {
  static const int n = env_int("DEEPINFER_GEMV_TILES_PER_CTA", 0, {1, 2, 4});
  return n;
}

// Launch geometry: K sub-ranges per CTA (up to as many as keep >= 2 CTAs per SM of an H200 busy,
// capped below; all of K needs no partials) and only the rows that can hold data staged.
int64_t gemv_outer(const GemmParams& p) {
  return std::max<int64_t>(1, p.experts != nullptr ? std::min<int64_t>(p.n_experts, p.max_active) : p.n_groups);
}

// n8 tiles per warp: the widest that still gives every warp scheduler of an H200 (132 SMs x 4)
// about four warps; narrower warps for small weights (numerically neutral: columns are
// independent).
int gemv_nt(const GemmParams& p, int spc) {
  const int64_t y = (gemm_n_subranges(p.K) + spc - 1) / spc;
  for (int nt = kGemvMaxNt; nt > 1; nt /= 2) {
    const int64_t warps = set_tiles(p, 8 * nt) * y * gemv_outer(p);
    if (warps >= 4 * 4 * 132) return nt;
  }
  return 1;
}

// One launch per weight set, for the kernels that take one (all but the streaming kernel). The
// partials and counters are reused in stream order; counters are left zeroed by every launch.
// Weight set `set` of p as a launch of its own.
GemmParams one_set(const GemmParams& p, int set) {
  GemmParams q = p;
  q.n_sets = 1;
  if (p.experts != nullptr) {
    q.experts = p.experts + set * p.n_experts;
  } else if (set == 1) {
    q.w = p.w1;
  }
  if (set == 1) q.N = p.N1, q.ldc = p.ldc1;
  q.C = set_c(p, set);
  return q;
}

cudaError_t per_set(const GemmParams& p, cudaStream_t s, cudaError_t (*launch)(const GemmParams&, cudaStream_t)) {
  for (int set = 0; set < p.n_sets; ++set) {
    if (const cudaError_t e = launch(one_set(p, set), s); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// ring_windows: the largest S NT of the launches this shape may take.
GemvShape gemv_shape(const GemmParams& p, int64_t rows, int mt, int ring_windows) {
  const int P = gemm_n_subranges(p.K);
  const int64_t base = set_tiles(p, gemv_cta_cols(kGemvMaxNt)) * gemv_outer(p);
  const int64_t want_y = std::min<int64_t>(P, (2 * 132 + base - 1) / base);
  GemvShape sh;
  sh.R = gemm_subrange(p.K);
  sh.P = P;
  sh.spc = static_cast<int>((P + want_y - 1) / want_y);
  // Cap (DEEPINFER_GEMV_MAX_SPC, numerically neutral): measured on the H200, one sub-range per CTA
  // beat 2 and 8 at batch 1-32 (more CTAs, less staging each), so 1 is the default; the device
  // test procedure also runs cuda_ops_test with 8 to keep the multi-sub-range path verified.
  static const int max_spc = env_int("DEEPINFER_GEMV_MAX_SPC", 1);
  // Expert launches have their own cap (DEEPINFER_GEMV_EXPERT_SPC, default 2): their CTAs wait
  // for the routing before streaming anything, so a longer CTA amortises more. Measured on the
  // H200 (decode, 4 full-width layers): 2 vs 1 = +4% at batch 8, +1% at 32, equal at 1 and 128;
  // 8 lost 11% at batch 32.
  static const int expert_spc = env_int("DEEPINFER_GEMV_EXPERT_SPC", 2);
  sh.spc = std::min(sh.spc, p.experts != nullptr ? expert_spc : max_spc);
  // Column tiles per CTA: 0 = chosen per launch (gemv_tiles_per_cta); shared memory is sized
  // for the most the launch may take.
  sh.tpc = gemv_tiles_knob();
  sh.a_rows = static_cast<int>(std::min<int64_t>(mt * 16, rows));
  for (;; sh.spc = (sh.spc + 1) / 2) {
    sh.n_codes = gemv_codes(p.w.fmt, p.w.block_in, p.K, sh.spc);
    GemvShape most = sh;
    most.tpc = sh.tpc > 0 ? sh.tpc : kGemvMaxTilesPerCta;
    if (gemv_smem_bytes(most, p.K, ring_windows) <= kGemvMaxSmem || sh.spc == 1) break;
  }
  return sh;
}

// Column tiles per CTA of a launch that can take several (tpc == 0 in its shape): the most, of 4
// and 2, that still leaves DEEPINFER_GEMV_MULTI_WAVES (default 4) waves of CTAs on an H200 (132
// SMs x 4), else 1. Numerically neutral: each tile's arithmetic is the one-tile CTA's. Grouping
// tiles saves a CTA's A staging, ramp and prologue per tile but takes CTAs from the scheduler, so
// it pays only where there are many (MoE experts at batch >= 8); measured on the H200 (decode, 4
// full-width layers) with every launch grouped: 2 tiles = -8% at batch 1, +5% at 128; 4 tiles
// -27% at batch 1, +8% at 128.
int gemv_tiles_per_cta(int64_t ctas) {
  static const int waves = env_int("DEEPINFER_GEMV_MULTI_WAVES", 4);
  const int64_t floor_ctas = static_cast<int64_t>(waves) * 132 * 4;
  for (int t = kGemvMaxTilesPerCta; t > 1; t /= 2)
    if (ctas / t >= floor_ctas) return t;
  return 1;
}

// Narrow warps (8 or 16 columns: small and mid-size weights, most decode launches) keep 3 windows
// per warp: 6 measured the same on the H200 (batch 1-512), 9 slower in an earlier form of the kernel.
inline constexpr int kGemvNarrowStages = 3;

// Whether split launches fold their partials in each output tile's last CTA (`tile`) rather than
// in a fold kernel with a thread per output (`kernel`, the default): knob DEEPINFER_GEMM_SPLIT_FOLD
// (large-M launches) or DEEPINFER_GEMV_SPLIT_FOLD (small-M). The same adds in the same order either
// way. A tile's last CTA folds in its own tail: 16K outputs x P partials through one SM for a
// 128 x 128 large-M tile, which made the batch-512 decode step's 12 split projections per layer
// (32-128 CTAs, P = 8) take 32-147 us each (ncu, session 14). Measured on the H200 (decode, 4
// full-width layers, ABAB, session 14): the fold kernel for large-M launches +8% at batch 128 and
// +2.8% at 512; for small-M launches +5% at batch 32 and +10.5% at 512 (the expert launches:
// 16-row tiles x 8 sub-ranges), batches 1, 8 and 128 unchanged (lean kernel launches, no
// partials); prefill unchanged.
bool fold_by_tile(const char* knob) {
  const char* v = std::getenv(knob);
  if (v == nullptr || std::string(v) == "kernel") return false;
  if (std::string(v) == "tile") return true;
  std::fprintf(stderr, "%s must be 'kernel' or 'tile', not '%s'; using 'kernel'\n", knob, v);
  return false;
}
bool gemv_self_fold() {
  static const bool tile = fold_by_tile("DEEPINFER_GEMV_SPLIT_FOLD");
  return tile;
}
bool pipe_self_fold() {
  static const bool tile = fold_by_tile("DEEPINFER_GEMM_SPLIT_FOLD");
  return tile;
}
// The columns of weight set `set` a fold kernel folds: N per group (experts: N), at most ldc.
int64_t fold_cols(const GemmParams& p, int set) {
  const int64_t n = set == 0 ? p.N : p.N1, ldc = set == 0 ? p.ldc : p.ldc1;
  return std::min(ldc, n * (p.experts != nullptr ? 1 : std::max(1, p.n_groups)));
}

template <WeightFmt F, int MT, int NT, int S, bool MULTI = false>
cudaError_t launch_gemv_mt(const GemmParams& p, const GemvShape& shape, cudaStream_t s) {
  // Several column tiles per CTA only in the transposed, default-depth kernels (the decode
  // launches); the others take one.
  const int P = gemm_n_subranges(p.K);
  const int cols = gemv_cta_cols(NT);
  if constexpr (!MULTI && MT < 0 && S == kGemvNarrowStages) {
    GemvShape multi = shape;
    if (multi.tpc == 0) multi.tpc = gemv_tiles_per_cta(set_tiles(p, cols) * ((P + shape.spc - 1) / shape.spc) * gemv_outer(p));
    if (multi.tpc > 1) return launch_gemv_mt<F, MT, NT, S, true>(p, multi, s);
  }
  GemvShape sh = shape;
  if (!MULTI) sh.tpc = 1;
  static bool configured = false;  // opt in to large dynamic shared memory once per instantiation
  if (!configured) {
    cudaFuncSetAttribute(dequant_gemv_kernel<F, MT, NT, S, MULTI>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(kGemvMaxSmem));
    configured = true;
  }
  const int64_t x_ctas = gemv_x_ctas(p.N, cols, sh.tpc) + (p.n_sets > 1 ? gemv_x_ctas(p.N1, cols, sh.tpc) : 0);
  const dim3 grid(static_cast<unsigned>(x_ctas), static_cast<unsigned>((P + sh.spc - 1) / sh.spc),
                  static_cast<unsigned>(gemv_outer(p)));
  if (grid.x == 0 || grid.z == 0) return cudaSuccess;
  const bool split = grid.y > 1;
  // One counter per (column tile, group): the CTAs of a tile fold its partials (dequant_gemv.cuh).
  const bool self_fold =
      split && p.tile_counters != nullptr && gemv_self_fold() && p.n_tile_counters >= set_tiles(p, cols) * grid.z;
  GemmParams q = p;
  if (!self_fold) q.tile_counters = nullptr;
  // A programmatic dependent launch like every kernel (pdl_launch.cuh), and the one that gains
  // most from it: its CTAs stream their first weight windows before griddep_wait().
  const cudaError_t e = launch_pdl(dequant_gemv_kernel<F, MT, NT, S, MULTI>, grid, kGemvWarps * 32,
                                   gemv_smem_bytes(sh, p.K, S * NT), s, q, p.partial, sh);
  if (e != cudaSuccess) return e;
  if (split && !self_fold) {
    for (int set = 0; set < p.n_sets; ++set) {
      const int64_t ldc = set == 0 ? p.ldc : p.ldc1;
      const int64_t cols = fold_cols(p, set);
      if (p.M * cols == 0) continue;  // nothing to fold (an empty grid is not a valid launch)
      launch_pdl(gemv_reduce_kernel, grid_for(p.M * cols), 256, 0, s, p.partial + set * P * p.M * p.ldc, P, p.M,
                 cols, ldc, set_c(p, set), p.c_bf16);
    }
  }
  return cudaGetLastError();
}

// Ring depth of 32-column warps (DEEPINFER_GEMV_STAGES = 2, 3 (default), 4 or 6: tuning only,
// numerically neutral). Measured on the H200 (decode, 4 full-width layers): 3 ~ 4 > 6 > 8 —
// shared memory per CTA, hence CTAs per SM, matters more than depth; the BF16 LM head too
// (402 us at 3, 415 at 6: its CTAs are short, so the prologue latency, not the depth, limits).
int gemv_stages() {
  static const int n = env_int("DEEPINFER_GEMV_STAGES", 3, {2, 3, 4, 6});
  return n;
}
// The largest ring (windows per warp) a streaming launch may take.
int gemv_max_ring_windows() { return std::max(gemv_stages() * kGemvMaxNt, kGemvNarrowStages * 2); }

// Transposed tiles (weights as the mma's A operand, rows as B in n8 tiles) for launches with
// paired n8 column tiles: DEEPINFER_GEMV_TRANSPOSED=0 turns them off (an A/B switch; same bits).
bool gemv_transposed() {
  static const bool on = env_switch("DEEPINFER_GEMV_TRANSPOSED");
  return on;
}

template <WeightFmt F, int NT, int S>
cudaError_t launch_gemv_nt(const GemmParams& p, const GemvShape& sh, int mt, cudaStream_t s) {
  if constexpr (NT % 2 == 0) {
    if (gemv_transposed()) {  // n8 row tiles for the staged rows (a_rows <= 32)
      if (sh.a_rows <= 8) return launch_gemv_mt<F, -1, NT, S>(p, sh, s);
      if (sh.a_rows <= 16) return launch_gemv_mt<F, -2, NT, S>(p, sh, s);
      return launch_gemv_mt<F, -4, NT, S>(p, sh, s);
    }
  }
  return mt == 1 ? launch_gemv_mt<F, 1, NT, S>(p, sh, s) : launch_gemv_mt<F, 2, NT, S>(p, sh, s);
}

// Narrowest warps of transposed launches (DEEPINFER_GEMV_TR_MIN_NT = 1, 2 (default) or 4: tuning
// only): 16-column transposed warps issue half the mma and none of the fragment moves of 8-column
// ones. Measured on the H200 (decode, 4 full-width layers): 2 vs 1 = +6% at batch 1, +1-2% at 8;
// 4 = +4% at 1, -3% at 8.
int gemv_tr_min_nt() {
  static const int n = env_int("DEEPINFER_GEMV_TR_MIN_NT", 2, {1, 2, 4});
  return n;
}

template <WeightFmt F>
cudaError_t launch_gemv(const GemmParams& p, const GemvShape& sh, int mt, cudaStream_t s) {
  int nt = gemv_nt(p, sh.spc);
  if (gemv_transposed()) nt = std::max(nt, gemv_tr_min_nt());
  switch (nt) {
    case 1: return launch_gemv_nt<F, 1, kGemvNarrowStages>(p, sh, mt, s);
    case 2: return launch_gemv_nt<F, 2, kGemvNarrowStages>(p, sh, mt, s);
    default: break;
  }
  switch (gemv_stages()) {
    case 2: return launch_gemv_nt<F, 4, 2>(p, sh, mt, s);
    case 4: return launch_gemv_nt<F, 4, 4>(p, sh, mt, s);
    case 6: return launch_gemv_nt<F, 4, 6>(p, sh, mt, s);
    default: return launch_gemv_nt<F, 4, 3>(p, sh, mt, s);
  }
}

// Output tiles of a pipelined launch: x = 128-column tiles; y = 128-row tiles x groups (dense),
// or a bound on the (expert, tile) pairs with rows — each expert's last tile may be partial; the
// CTAs past the real count exit.
dim3 pipe_tiles(const GemmParams& p) {
  const int64_t m_tiles = (p.M + kPipeBM - 1) / kPipeBM;
  const int64_t y = p.experts != nullptr ? m_tiles + std::min<int64_t>(p.n_experts, p.M) : m_tiles * p.n_groups;
  return dim3(static_cast<unsigned>((p.N + kPipeBN - 1) / kPipeBN), static_cast<unsigned>(y));
}

// K splits for launches with fewer output tiles than SMs (one resident CTA each): split_plan.h.
int pipe_splits(const GemmParams& p) {
  const dim3 t = pipe_tiles(p);
  return plan_k_splits(gemm_n_subranges(p.K), static_cast<int64_t>(t.x) * t.y, 132);
}

// Large-M kernel family: the wgmma kernel on Hopper when the build has sm_90a code (default), the
// mma.sync pipelined kernel elsewhere or with DEEPINFER_GEMM_KERNEL=mma (same tiles, same bits:
// an A/B switch for tuning).
bool use_wgmma() {
#ifndef DI_CUDA_WGMMA
  return false;
#else
  static const bool use = [] {
    const char* v = std::getenv("DEEPINFER_GEMM_KERNEL");
    if (v != nullptr && std::string(v) == "mma") return false;
    return device_cc_major() == 9;
  }();
  return use;
#endif
}

template <WeightFmt F>
cudaError_t launch_pipelined(const GemmParams& p, cudaStream_t s) {
  const bool wgmma = use_wgmma();
  const size_t smem = wgmma ? wgmma_smem_bytes(F) : pipe_smem_bytes(F);
  static const cudaError_t configured = [] {
    const cudaError_t e = cudaFuncSetAttribute(dequant_gemm_pipelined_kernel<F>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(pipe_smem_bytes(F)));
    if (e != cudaSuccess) return e;
    return cudaFuncSetAttribute(dequant_gemm_wgmma_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(wgmma_smem_bytes(F)));
  }();
  if (configured != cudaSuccess) return configured;
  const int m_tiles = static_cast<int>((p.M + kPipeBM - 1) / kPipeBM);
  dim3 grid = pipe_tiles(p);
  if (grid.x == 0 || grid.y == 0) return cudaSuccess;
  const int P = gemm_n_subranges(p.K);
  const int splits = p.partial != nullptr ? pipe_splits(p) : 1;
  grid.z = static_cast<unsigned>(splits);
  const int spc = (P + splits - 1) / splits;
  GemmParams q = p;
  const bool self_fold = splits > 1 && p.tile_counters != nullptr && pipe_self_fold() &&
                         p.n_tile_counters >= static_cast<int64_t>(grid.x) * grid.y;
  if (!self_fold) q.tile_counters = nullptr;
  if (wgmma) {
    launch_pdl(dequant_gemm_wgmma_kernel<F>, grid, kWgmmaWarps * 32, smem, s, q, m_tiles, spc);
  } else {
    launch_pdl(dequant_gemm_pipelined_kernel<F>, grid, kPipeWarps * 32, smem, s, q, m_tiles, spc);
  }
  if (splits > 1 && !self_fold && p.M > 0) {  // (an empty grid is not a valid launch)
    const int64_t cols = fold_cols(p, 0);
    launch_pdl(gemv_reduce_kernel, grid_for(p.M * cols), 256, 0, s, p.partial, P, p.M, cols, p.ldc, p.C,
               p.c_bf16);
  }
  return cudaGetLastError();
}

enum class GemmPath { kStreaming, kPipelined, kTiled };

// The pipelined kernel's own preconditions (beyond whole-run weights): 16-byte aligned A rows
// and an expert count its tile search covers.
bool pipelined_ok(const GemmParams& p) {
  const bool a_aligned = p.lda % 8 == 0 && reinterpret_cast<uintptr_t>(p.A) % 16 == 0;
  return a_aligned && (p.experts == nullptr || p.n_experts <= kPipeMaxExperts);
}

// Which kernel a launch takes (all give the same bits). Streaming (dequant_gemv) for <= 32 rows
// per weight; pipelined for more; the general tiled kernel when their preconditions fail: whole
// BK tiles, 16-byte weight runs, FP8 UE8M0 scales in power-of-two blocks of >= 16 inputs,
// 16-byte aligned A rows (pipelined).
GemmPath gemm_path(const GemmParams& p) {
  const bool experts = p.experts != nullptr;
  const int64_t rows = experts ? gemm_expert_rows(p.max_rows_per_expert) : p.M;
  const bool pow2_in = p.w.block_in >= 16 && (p.w.block_in & (p.w.block_in - 1)) == 0;
  const bool runs_ok = p.K % kGemmBK == 0 && p.w.row_bytes % 16 == 0 &&
                       (p.w.fmt != WeightFmt::kFp8Block || (!p.w.scale_f32 && pow2_in && p.w.block_out > 0));
  if (!runs_ok) return GemmPath::kTiled;
  if (rows <= kGemvMaxRows && (!experts || p.active != nullptr)) return GemmPath::kStreaming;
  return pipelined_ok(p) ? GemmPath::kPipelined : GemmPath::kTiled;
}

// The packed large-M path (packed_plan.h) for dense launches of at least DEEPINFER_GEMM_PACKED_ROWS
// rows (default 512; 0 = never: an A/B switch, same bits) that the wgmma kernel would take, every
// weight set on the pipelined path, with at least a wave of output tiles.
int packed_min_rows() {
  static const int n = env_switch("DEEPINFER_GEMM_PACKED_ROWS") ? env_int("DEEPINFER_GEMM_PACKED_ROWS", 512) : 0;
  return n;
}
// Output tiles a packed launch needs per weight set (DEEPINFER_GEMM_PACKED_MIN_TILES, default 64:
// half a wave on the H200; without split-K the packed kernel still beats the dequantising one on
// the 2048- and 4096-column projections at 512 rows — batch-512 decode +1.6% at 128 against 132,
// +1.1% more at 64, batch 128-256 and 8K prefill level, ABAB session 23; the tests lower it to run
// the path on small shapes).
int packed_min_tiles() {
  static const int n = env_int("DEEPINFER_GEMM_PACKED_MIN_TILES", 64);
  return n;
}
bool packed_plan(const GemmParams& p, PackedGemmPlan& plan) {
  if (!use_wgmma() || p.experts != nullptr || p.a_quant_block > 0 || !sets_valid(p)) return false;
  if (gemm_path(p) != GemmPath::kPipelined) return false;
  if (p.n_sets > 1 && (p.w1.fmt != p.w.fmt || gemm_path(one_set(p, 1)) != GemmPath::kPipelined)) return false;
  PackedGemmDims d;
  d.M = p.M;
  d.N = p.N;
  d.N1 = p.n_sets > 1 ? p.N1 : 0;
  d.K = p.K;
  d.groups = p.n_groups;
  d.w_packed = p.w.packed != nullptr;
  d.w1_packed = p.n_sets > 1 && p.w1.packed != nullptr;
  return plan_packed_gemm(d, packed_min_rows(), packed_min_tiles(), plan);
}

// MoE expert launches on the large-M path (prefill) with FP4 experts (V4's) take the packed expert
// kernel (packed_expert_gemm.cuh) from DEEPINFER_GEMM_PACKED_EXPERTS tokens (default 1: all of
// them; 0 = never: an A/B switch, same bits). The kernel decodes FP8 experts too, but no test
// covers that form yet, so they keep the dequantising kernel.
int packed_expert_min_tokens() {
  static const int n = env_switch("DEEPINFER_GEMM_PACKED_EXPERTS") ? env_int("DEEPINFER_GEMM_PACKED_EXPERTS", 1) : 0;
  return n;
}
// Streaming (small-M) expert launches of at least DEEPINFER_GEMM_EXPERT_SWAP_SMALL tokens (default
// 256; 0 = never: an A/B switch, same bits) take the swapped-operand expert kernel with 32-pair
// token tiles instead (expert_swap_gemm.cuh): each weight decoded once per 32 of an expert's rows,
// where the streaming kernel's 16-row chunks read the weights of experts above 16 rows again.
// Measured on the H200 (decode, 4 full-width layers, ABAB): session 18 batch 512 +4.8%, 256 level,
// 128 -13% (~3 rows per expert: the lean kernel's territory); session 23, with the kernel at two
// CTAs per SM, batch 256 +6%, 128 -8% (threshold 128 against 384).
int expert_swap_small_min_tokens() {
  static const int n =
      env_switch("DEEPINFER_GEMM_EXPERT_SWAP_SMALL") ? env_int("DEEPINFER_GEMM_EXPERT_SWAP_SMALL", 256) : 0;
  return n;
}
bool packed_expert_plan(const GemmParams& p, PackedExpertPlan& plan) {
  if (!use_wgmma() || p.experts == nullptr || p.a_quant_block > 0 || !sets_valid(p)) return false;
  if (p.w.fmt != WeightFmt::kFp4Block) return false;
  const GemmPath path = gemm_path(p);
  if (path == GemmPath::kStreaming && expert_swap_small_min_tokens() > 0 && expert_swap_enabled())
    return plan_packed_experts(p.max_rows_per_expert, p.M, p.n_experts, p.N, p.K, expert_swap_small_min_tokens(), plan,
                               32);
  if (path != GemmPath::kPipelined) return false;
  return plan_packed_experts(p.max_rows_per_expert, p.M, p.n_experts, p.N, p.K, packed_expert_min_tokens(), plan);
}

// Rows per chunk of a sparse expert launch on the streaming kernel (DEEPINFER_GEMV_EXPERT_CHUNK =
// 16 (default) or 32; numerically neutral): an expert with more rows than a chunk streams its
// weights again per chunk. At batch 512 (12 rows per expert on average) the 16-row chunks read
// 2.9-3.2 GB per gate/up launch for 2.2 GB of weights (ncu, session 14), yet 32-row chunks
// measured 18% slower there (10% with one K sub-range per CTA): every expert then pays for twice
// the mma and staged rows, and the CTAs for twice the shared memory (decode tuning record).
int gemv_expert_chunk() {
  static const int n = env_int("DEEPINFER_GEMV_EXPERT_CHUNK", 16, {16, 32});
  return n;
}

// The streaming kernel's launch plan, when p takes it: one m16 tile when every weight's rows fit
// it, and for experts when they average <= 16 rows (T k / E: 3 at batch 128, 12 at 512) — larger
// experts take several 16-row chunks rather than every expert paying for two tiles. Numerically
// neutral (same canonical order per row).
struct StreamingPlan {
  GemvShape shape;
  int mt = 1;
};
// with_partials: as if the caller had attached gemm_partial_floats(p) partials.
bool streaming_plan(const GemmParams& p, StreamingPlan& plan, bool with_partials = false) {
  if (gemm_path(p) != GemmPath::kStreaming) return false;
  if (gemm_n_subranges(p.K) > 1 && p.partial == nullptr && !with_partials) return false;
  const bool experts = p.experts != nullptr;
  const int64_t rows = experts ? gemm_expert_rows(p.max_rows_per_expert) : p.M;
  const bool sparse_experts = experts && p.M <= 16 * static_cast<int64_t>(p.n_experts);
  const int ring = gemv_max_ring_windows();
  plan.mt = rows <= 16 || (sparse_experts && gemv_expert_chunk() == 16) ? 1 : 2;
  plan.shape = gemv_shape(p, rows, plan.mt, ring);
  return gemv_smem_bytes(plan.shape, p.K, ring) <= kGemvMaxSmem;
}

// The lean decode kernel (lean_gemv.cuh): most rows of a dense launch it takes (DEEPINFER_GEMV_LEAN
// = 1, 2, 4 or 8 (default), 0 = never: an A/B switch, same bits) and most tokens of an expert
// launch (DEEPINFER_GEMV_LEAN_EXPERTS, default 256; 0 = never). Measured on the H200 (decode, 4
// full-width layers, ABAB, session 12): with four-tile warps where 4 waves of CTAs remain
// (DEEPINFER_GEMV_LEAN_TILES=auto) expert launches gain 6% at batch 8, 14% at 16-32, 13% at 64-128
// and 6% at 256, but lose 7% at 512 (rows per expert in chunks of 8: at 512 tokens an expert has
// ~12 rows, two passes over its weights), hence 256 tokens. One-tile warps lost 6-26% at 8-512
// (short 16-column CTAs, each staging all of K of its rows).
int lean_max_rows() {
  static const int n = env_switch("DEEPINFER_GEMV_LEAN") ? env_int("DEEPINFER_GEMV_LEAN", 8, {1, 2, 4, 8}) : 0;
  return n;
}
int lean_max_expert_tokens() {
  static const int n = env_switch("DEEPINFER_GEMV_LEAN_EXPERTS") ? env_int("DEEPINFER_GEMV_LEAN_EXPERTS", 256) : 0;
  return n;
}
// Weight windows in flight per lane (DEEPINFER_GEMV_LEAN_STAGES = 3 or 4 (default); tuning): 6
// measured like 4 at batch 1 and spills at 3 CTAs per SM; 3 (4 CTAs per SM for FP8 / BF16: the
// 512-CTA projections in one wave) measured -2..-4% at batch 1 and unchanged at 8-512 (session 12):
// fewer loads in flight per lane cost more than the partial second wave. 8 for the dense launches
// of fewer CTAs than SMs only (session 16, 1 CTA per SM, no spills) made their FP8 launches slower
// (ncu: +24 us per batch-1 step) and batch 1 -2%: not kept.
int lean_stages() {
  static const int n = env_int("DEEPINFER_GEMV_LEAN_STAGES", 4, {3, 4});
  return n;
}
// Column groups each warp streams in turn (DEEPINFER_GEMV_LEAN_TILES = 1, 4, or "auto" (default):
// 4 for expert launches (in CTAs of fewer column groups where that evens out the SMs' bytes:
// batch 1's down projection) and where that still leaves 4 waves of CTAs at 2 per SM, else 1 —
// the plan's rule, lean_plan.h): four share one CTA's activation
// staging among 4x the columns. Measured on the H200 (session 12): auto +5% at batch 8 for the
// dense launches alone and +1% at 1 (the LM head), the expert gains above; a fixed 4 was 3% slower
// than auto at batches 1 and 8 (too few CTAs for the smaller launches). 6: FP4 expert launches
// take six tiles (auto takes them where that needs fewer rounds of resident CTAs:
// lean_wide_tiles), the others four (a test switch). Returns 0 for "auto". Same bits either way.
int lean_tiles() {
  static const int n = [] {
    const char* v = std::getenv("DEEPINFER_GEMV_LEAN_TILES");
    if (v == nullptr || std::string(v) == "auto") return 0;
    return env_int("DEEPINFER_GEMV_LEAN_TILES", 0, {1, 4, 6});
  }();
  return n;
}
// Warps of the FP4 expert kernel (eight-warp CTAs) that fit on an SM at once, for the plan's
// choice of six tiles (LeanKnobs::resident_warps); 0 (never six) where the occupancy API fails or
// DEEPINFER_GEMV_LEAN_WIDE=0 (an A/B switch; same bits).
int lean_expert_resident_warps() {
  static const int n = [] {
    if (!env_switch("DEEPINFER_GEMV_LEAN_WIDE")) return 0;
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, lean_gemv_kernel<WeightFmt::kFp4Block, 4, true, kLeanMaxTiles>,
                                                      kLeanMaxWarps * 32, 8 << 10) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return blocks * kLeanMaxWarps;
  }();
  return n;
}
// A weight the lean kernel decodes (the FP8 scale blocks are the plan's): BF16, FP8 or FP4 with
// UE8M0 scales, 16-byte aligned rows.
bool lean_weight_ok(const WeightDesc& w, WeightFmt f) {
  return w.fmt == f && !w.scale_f32 && w.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(w.w) % 16 == 0;
}

// The lean kernel's launch plan when p takes it (lean_plan.h): a streaming small-M launch whose
// weights it decodes (experts are checked by format: p.w names the one they share) and whose shape
// fits.
bool lean_gemv_plan(const GemmParams& p, LeanLaunchPlan& plan) {
  const bool experts = p.experts != nullptr;
  if (gemm_path(p) != GemmPath::kStreaming || (experts && p.active == nullptr)) return false;
  const WeightFmt f = p.w.fmt;
  if (experts ? p.w.scale_f32 : !lean_weight_ok(p.w, f) || (p.n_sets > 1 && !lean_weight_ok(p.w1, f))) return false;
  if (!experts && p.n_sets > 1 && f == WeightFmt::kFp8Block &&
      (p.w1.block_in != p.w.block_in || p.w1.block_out != p.w.block_out))
    return false;
  LeanGemmDims d;
  d.rows = experts ? p.max_rows_per_expert : p.M;
  d.N = p.N;
  d.N1 = p.n_sets > 1 ? p.N1 : 0;
  d.K = p.K;
  d.outer = gemv_outer(p);
  d.experts = experts;
  d.grouped = !experts && p.n_groups > 1;
  d.run_elems = run_elems(f);
  d.fp8 = f == WeightFmt::kFp8Block;
  d.block_in = p.w.block_in;
  d.block_out = p.w.block_out;
  LeanKnobs knobs;
  knobs.max_rows = lean_max_rows();
  knobs.max_expert_tokens = lean_max_expert_tokens();
  knobs.tiles = lean_tiles();
  if (experts && f == WeightFmt::kFp4Block) knobs.resident_warps = lean_expert_resident_warps();
  if (!plan_lean_gemv(d, knobs, plan)) return false;
  // The weights stream through the L2 marked evict-first unless DEEPINFER_GEMM_EVICT_FIRST=0 (an
  // A/B switch; cache hints do not change results).
  static const bool evict_first = env_switch("DEEPINFER_GEMM_EVICT_FIRST");
  plan.shape.evict_first = evict_first;
  return true;
}

template <WeightFmt F, int S, bool EXPERTS, int TILES, bool PF = false>
cudaError_t launch_lean_kernel(const GemmParams& p, const LeanLaunchPlan& plan, cudaStream_t s) {
  static const cudaError_t configured = cudaFuncSetAttribute(
      lean_gemv_kernel<F, S, EXPERTS, TILES, PF>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(LeanKnobs{}.max_smem));
  if (configured != cudaSuccess) return configured;
  if (plan.grid_x == 0 || plan.grid_z == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(plan.grid_x), 1, static_cast<unsigned>(plan.grid_z));
  const cudaError_t e = launch_pdl(lean_gemv_kernel<F, S, EXPERTS, TILES, PF>, grid, plan.threads, plan.smem, s, p, plan.shape);
  return e != cudaSuccess ? e : cudaGetLastError();
}

template <WeightFmt F, int S>
cudaError_t launch_lean_s(const GemmParams& p, const LeanLaunchPlan& plan, cudaStream_t s) {
  const bool experts = p.experts != nullptr;
  if constexpr (F == WeightFmt::kFp4Block) {
    // DEEPINFER_GEMM_L2_PREFETCH: the multi-tile FP4 expert forms with their rows requested into
    // the L2 up front (lean_gemv_kernel's PF; an A/B switch, the same bits).
    const bool pf = experts && l2_prefetch_blocks() > 0;
    if (plan.shape.tiles == kLeanWideTiles) {  // FP4 expert launches only (the plan's rule)
      if (!experts) return cudaErrorInvalidValue;
      return pf ? launch_lean_kernel<F, S, true, kLeanWideTiles, true>(p, plan, s)
                : launch_lean_kernel<F, S, true, kLeanWideTiles>(p, plan, s);
    }
    if (pf && plan.shape.tiles == kLeanMaxTiles) return launch_lean_kernel<F, S, true, kLeanMaxTiles, true>(p, plan, s);
  }
  if (plan.shape.tiles == kLeanMaxTiles)
    return experts ? launch_lean_kernel<F, S, true, kLeanMaxTiles>(p, plan, s)
                   : launch_lean_kernel<F, S, false, kLeanMaxTiles>(p, plan, s);
  return experts ? launch_lean_kernel<F, S, true, 1>(p, plan, s) : launch_lean_kernel<F, S, false, 1>(p, plan, s);
}

// Dense one-row, one-tile launches of at most DEEPINFER_GEMV_LEAN_DEEP_CTAS CTAs (default 32; 0:
// none), BF16 or FP8, whose warps stream at most kLeanDeepStages windows put all of them in flight
// before waiting for the previous kernel (S = 16, one CTA per SM): such a launch leaves most SMs
// idle, so the registers' occupancy gains nothing, and each warp otherwise waits one HBM round
// trip per 4 windows. The batch-1 router gate (4096 -> 256, BF16: 16 CTAs of eight 16-window
// warps) is on the MoE layer's critical path (hc_pre -> gate -> route -> experts). Measured on the
// H200 (session 34, ABAB): batch 1 +0.9% (the gate ends 6.8 us after its predecessor instead of
// 7.5-8); at batch 8 the same rule lost 0.7%, and taking the 96- and 128-CTA FP8 launches too
// (128 CTAs) lost 3% at batches 1 and 8 — hence one row and 32 CTAs.
constexpr int kLeanDeepStages = 16;
int lean_deep_ctas() {
  static const int n = env_switch("DEEPINFER_GEMV_LEAN_DEEP_CTAS") ? env_int("DEEPINFER_GEMV_LEAN_DEEP_CTAS", 32) : 0;
  return n;
}

// Six-tile FP4 expert launches with 3 windows in flight per lane, in 96 registers
// (DEEPINFER_GEMV_LEAN_WIDE_COMPACT=1; default off until measured): room on each SM for a CTA of
// the next launch beside the round (lean_gemv.cuh's launch bounds). Same bits.
bool lean_wide_compact() {
  static const bool on = env_tristate("DEEPINFER_GEMV_LEAN_WIDE_COMPACT") == 1;
  return on;
}

template <WeightFmt F>
cudaError_t launch_lean(const GemmParams& p, const LeanLaunchPlan& plan, cudaStream_t s) {
  if constexpr (F == WeightFmt::kFp4Block) {
    if (plan.shape.tiles == kLeanWideTiles && lean_wide_compact()) return launch_lean_s<F, 3>(p, plan, s);
  }
  if constexpr (F != WeightFmt::kFp4Block) {
    const int windows = plan.shape.R / (4 * run_elems(F));  // per warp and tile
    if (p.experts == nullptr && p.M == 1 && plan.shape.tiles == 1 &&
        plan.grid_x * plan.grid_z <= lean_deep_ctas() && windows <= kLeanDeepStages)
      return launch_lean_kernel<F, kLeanDeepStages, false, 1>(p, plan, s);
  }
  switch (lean_stages()) {
    case 3: return launch_lean_s<F, 3>(p, plan, s);
    default: return launch_lean_s<F, 4>(p, plan, s);
  }
}

}  // namespace

int64_t gemm_expert_rows(int64_t T) { return T <= 512 ? std::min<int64_t>(T, kGemvMaxRows) : T; }

int64_t gemm_counter_slots(const GemmParams& p) {
  return set_tiles(p, kGemvMinCtaCols) * gemv_outer(p);  // the narrowest CTAs
}

int64_t packed_weight_bytes(int64_t N, int64_t K) {
  if (!use_wgmma() || N <= 0 || K <= 0 || K % kGemmBK != 0) return 0;
  return (N + kPackRows - 1) / kPackRows * (K / kGemmBK) * kPackBlockBytes;
}

int64_t gemm_staging_bytes(const GemmParams& p) {
  // FP4 expert launches in the FP8 order (launch_fp8_experts.h): every one, when the knob is on.
  if (Fp8ExpertPlan plan; fp8_expert_plan(p, plan)) return plan.staging_bytes();
  if (Fp8GemmPlan plan; fp8_gemm_plan(p, plan)) return plan.staging_bytes;  // code and weight blocks
  if (PackedExpertPlan plan; packed_expert_plan(p, plan)) return plan.staging_bytes();
  PackedGemmPlan plan;
  return packed_plan(p, plan) ? plan.staging_bytes() : 0;
}

int64_t gemm_partial_floats(const GemmParams& p) {
  const int64_t P = gemm_n_subranges(p.K);
  if (P == 1) return 0;
  if (Fp8ExpertPlan fp8; fp8_expert_plan(p, fp8)) return 0;  // folds them in shared memory
  if (Fp8GemvPlan fp8; fp8_gemv_plan(p, fp8)) return 0;  // folds its sub-ranges in a cluster
  if (Fp8GemmPlan fp8; fp8_gemm_plan(p, fp8)) return 0;  // folds them in shared memory
  if (LeanLaunchPlan lean; lean_gemv_plan(p, lean)) return 0;  // folds its sub-ranges in shared memory
  if (PackedExpertPlan plan; packed_expert_plan(p, plan) && plan.tile_rows != kPackRows) return 0;  // in registers
  switch (gemm_path(p)) {
    case GemmPath::kStreaming: return P * p.M * (p.ldc + (p.n_sets > 1 ? p.ldc1 : 0));
    case GemmPath::kPipelined: return pipe_splits(p) > 1 ? P * p.M * p.ldc : 0;
    default: return 0;
  }
}

bool gemm_fuses_act_quant(const GemmParams& p, int block) {
  // Every CTA quantises the rows it stages (the column tiles repeat the work), so the fold pays
  // only while the rows per weight are few (DEEPINFER_GEMV_FUSE_QUANT = the most rows, 0 = off;
  // same bits either way). Measured on the H200 (decode, 4 full-width layers): folding every
  // streaming launch (<= 32 rows) won 5% at batch 1 but lost 25-50% at batch 8-512.
  static const int max_rows =
      env_switch("DEEPINFER_GEMV_FUSE_QUANT") ? env_int("DEEPINFER_GEMV_FUSE_QUANT", 4, {1, 2, 4, 8, 16, 32}) : 0;
  const int64_t rows = p.experts != nullptr ? gemm_expert_rows(p.max_rows_per_expert) : p.M;
  if (rows > max_rows) return false;
  // The FP8-order experts read quantised codes (their pre-pass re-derives them from BF16 rows).
  if (p.experts != nullptr && fp8_experts_enabled()) return false;
  // Wider than the FP8 order's decode kernel: its large-M kernel reads quantised codes.
  if (p.experts == nullptr && fp8_order_past_decode_rows(rows)) return false;
  // A block is 8-column chunks of a power-of-two count <= 32 (one shuffle group of a warp), and
  // blocks tile each K sub-range and group (their boundaries are those of act_quant_bf16's rows).
  const int chunks = block / 8;
  if (block <= 0 || block % 8 != 0 || chunks > 32 || (chunks & (chunks - 1)) != 0) return false;
  if (p.K % block != 0 || gemm_subrange(p.K) % block != 0) return false;
  StreamingPlan plan;
  return streaming_plan(p, plan, /*with_partials=*/true);
}

cudaError_t launch_dequant_gemm(const GemmParams& p, cudaStream_t s) {
  if (!sets_valid(p)) return cudaErrorInvalidValue;
  const bool experts = p.experts != nullptr;
  if (Fp8ExpertPlan fp8; experts && fp8_expert_plan(p, fp8)) return launch_fp8_experts(p, fp8, s);
  // No other tensor-core kernel reads the fold layout (the F32 kernels do).
  if (p.w.fp4_fold || (p.n_sets > 1 && p.w1.fp4_fold)) return cudaErrorInvalidValue;
  // Packed expert launches first: the 32-pair-tile ones would otherwise take a small-M kernel (the
  // 128-pair ones take no other kernel's path: they are large-M).
  if (PackedExpertPlan plan;
      experts && p.staging != nullptr && packed_expert_plan(p, plan) && p.staging_bytes >= plan.staging_bytes())
    return launch_packed_experts(p, plan, s);
  if (Fp8GemvPlan fp8; fp8_gemv_plan(p, fp8)) return launch_fp8_gemv(p, fp8, s);
  if (Fp8GemmPlan fp8; p.staging != nullptr && fp8_gemm_plan(p, fp8) && p.staging_bytes >= fp8.staging_bytes)
    return launch_fp8_gemm(p, fp8, s);
  if (LeanLaunchPlan lean; lean_gemv_plan(p, lean)) {
    switch (p.w.fmt) {
      case WeightFmt::kBF16: return launch_lean<WeightFmt::kBF16>(p, lean, s);
      case WeightFmt::kFp8Block: return launch_lean<WeightFmt::kFp8Block>(p, lean, s);
      case WeightFmt::kFp4Block: return launch_lean<WeightFmt::kFp4Block>(p, lean, s);
    }
  }
  if (StreamingPlan plan; streaming_plan(p, plan)) {
    switch (p.w.fmt) {
      case WeightFmt::kBF16: return launch_gemv<WeightFmt::kBF16>(p, plan.shape, plan.mt, s);
      case WeightFmt::kFp8Block: return launch_gemv<WeightFmt::kFp8Block>(p, plan.shape, plan.mt, s);
      case WeightFmt::kFp4Block: return launch_gemv<WeightFmt::kFp4Block>(p, plan.shape, plan.mt, s);
    }
  }
  if (p.a_quant_block > 0) return cudaErrorInvalidValue;  // only the streaming kernel quantises A
  if (PackedGemmPlan plan; p.staging != nullptr && packed_plan(p, plan) && p.staging_bytes >= plan.staging_bytes())
    return launch_packed_gemm(p, plan, s);
  const GemmPath path = gemm_path(p);
  if (p.n_sets > 1) return per_set(p, s, launch_dequant_gemm);  // the other kernels take one set
  if (path == GemmPath::kPipelined || (path == GemmPath::kStreaming && pipelined_ok(p))) {
    switch (p.w.fmt) {
      case WeightFmt::kBF16: return launch_pipelined<WeightFmt::kBF16>(p, s);
      case WeightFmt::kFp8Block: return launch_pipelined<WeightFmt::kFp8Block>(p, s);
      case WeightFmt::kFp4Block: return launch_pipelined<WeightFmt::kFp4Block>(p, s);
    }
  }
  const int64_t tiled_rows = experts ? p.max_rows_per_expert : p.M;
  const int m_tiles = static_cast<int>((tiled_rows + kGemmBM - 1) / kGemmBM);
  const int n_outer = experts ? p.n_experts : p.n_groups;
  const dim3 grid(static_cast<unsigned>((p.N + kGemmBN - 1) / kGemmBN), static_cast<unsigned>(m_tiles * n_outer));
  if (grid.x == 0 || grid.y == 0) return cudaSuccess;
  launch_pdl(dequant_gemm_kernel, grid, 128, 0, s, p, m_tiles);
  return cudaGetLastError();
}

cudaError_t launch_f32_gemm(const GemmParams& p, cudaStream_t s) {
  if (!sets_valid(p)) return cudaErrorInvalidValue;
  if (p.n_sets > 1) return per_set(p, s, launch_f32_gemm);
  if (p.experts != nullptr) {
    const dim3 grid(static_cast<unsigned>((p.N + 127) / 128), static_cast<unsigned>(p.max_rows_per_expert),
                    static_cast<unsigned>(p.n_experts));
    if (grid.y == 0) return cudaSuccess;
    launch_pdl(f32_expert_gemm_kernel, grid, 128, 0, s, static_cast<const float*>(p.A), p.lda,
               p.experts, p.offsets, p.perm, p.a_div, p.N, p.K, static_cast<float*>(p.C), p.ldc);
  } else {
    const dim3 grid(static_cast<unsigned>((p.N + 127) / 128), static_cast<unsigned>(p.M), static_cast<unsigned>(p.n_groups));
    if (grid.y == 0) return cudaSuccess;
    launch_pdl(f32_gemm_kernel, grid, 128, 0, s, static_cast<const float*>(p.A), p.lda, p.w, p.M,
               p.N, p.K, p.n_groups, static_cast<float*>(p.C), p.ldc);
  }
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
