// Launchers of the FP8-order GEMM kernels (fp8_gemv.cuh).
#include <algorithm>
#include <atomic>

#include "kernels/common/env_knob.h"
#include "kernels/common/pdl_launch.cuh"
#include "kernels/gemm/fp8_gemm.cuh"
#include "kernels/gemm/fp8_gemv.cuh"
#include "ops/cuda/launch_fp8_gemm.h"

namespace deepinfer::kernels {
namespace {

bool fp8_order_enabled() {
#ifndef DI_CUDA_WGMMA
  return false;
#else
  static const bool on = env_tristate("DEEPINFER_GEMM_FP8_ORDER") == 1 && device_cc_major() == 9;
  return on;
#endif
}

// Column tiles per CTA (DEEPINFER_GEMM_FP8_TILES = 1 or 2 (default); tuning, same bits): two halve
// the CTAs, each streaming both tiles' weights through one register ring behind one staging and
// one fold — on the H100, batch 1 983 / 988 tok/s against one tile's 974 and the lean kernel's
// 976 / 986, batch 8 3,943 / 3,944 against 3,879 and 3,919 / 3,929 (session 45).
int fp8_tiles() {
  static const int n = env_int("DEEPINFER_GEMM_FP8_TILES", 2, {1, 2});
  return n;
}

// Column tiles per CTA at 9-32 rows (DEEPINFER_GEMM_FP8_WIDE_TILES = 1 or 2, the default; tuning,
// same bits): two share one staging of the rows' codes, which at 32 rows moves as many bytes
// through L2 as a tile's weights — batch 16 +2%, batch 32 +2.7% on the H100 (session 47).
int fp8_wide_tiles() {
  static const int n = env_int("DEEPINFER_GEMM_FP8_WIDE_TILES", 2, {1, 2});
  return n;
}

// The most rows the decode kernel takes (DEEPINFER_GEMM_FP8_DECODE_ROWS = 8 (default), 16 or 32;
// tuning, same bits): the large-M kernel takes wider launches, its weights prepared and its
// staging done once per launch instead of once per CTA. On 128-token tiles it lost from 9 rows
// (batch 16 4.9K tok/s against the decode kernel's 5.2K, H100, session 47: bound 16); on the
// 32-token tiles (fp8_small_tiles) it wins there too — batch 16 5,348 / 5,352 / 5,331 against
// 5,233 / 5,233 / 5,275 with bound 16, batch 1-64 level (H100, session 55).
int fp8_decode_rows() {
  static const int n = env_int("DEEPINFER_GEMM_FP8_DECODE_ROWS", 8, {8, 16, 32});
  return n;
}

// Consumer warpgroups of the large-M kernel (DEEPINFER_GEMM_FP8_CONSUMERS = 2 or 3, the default;
// tuning, same bits): 128- or 192-column tiles. Each waits for its own MMAs before promoting them,
// so a third one's MMAs fill more of that time: the 8K prefill's FP8 projections 15-20% faster per
// launch, the whole prefill 109.9K -> 111.7K tok/s on the H100 (session 46).
int fp8_consumers() {
  static const int n = env_int("DEEPINFER_GEMM_FP8_CONSUMERS", 3, {2, 3});
  return n;
}

// The large-M kernel's 32- and 64-token tiles for launches of up to 64 rows
// (DEEPINFER_GEMM_FP8_SMALL_TILES = 1, the default, or 0; tuning, same bits): fp8_gemm_token_tile.
// A 17-32-row decode step on 128-token tiles spent 4x its rows' MMAs, code bytes and promotion
// FMAs on zero tokens — batch 32 was the FP8 order's one loss. H100, session 55
// (ab_fp8_small_tiles_h100_2026-12-07_s55.json): batch 32 7,442 / 7,436 tok/s against 7,014 /
// 7,021 on 128-token tiles, batch 48 +3.5%, batch 64 +2.2%.
bool fp8_small_tiles() {
  static const bool on = env_int("DEEPINFER_GEMM_FP8_SMALL_TILES", 1, {0, 1}) == 1;
  return on;
}

bool fp8_weight_ok(const WeightDesc& w) {
  return w.fmt == WeightFmt::kFp8Block && !w.scale_f32 && w.packed == nullptr && w.row_bytes % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.w) % 16 == 0;
}

// What both FP8-order kernels need of a launch (the knob on, a dense ungrouped launch of FP8
// weights with the same blocks in both sets, activation rows 16-byte aligned in vectors of `vec`
// elements), and its dimensions for the plans.
bool fp8_order_launch(const GemmParams& p, int vec, Fp8GemvDims& d) {
  if (!fp8_order_enabled() || p.experts != nullptr || p.n_groups != 1) return false;
  if (!fp8_weight_ok(p.w) || (p.n_sets > 1 && !fp8_weight_ok(p.w1))) return false;
  if (p.n_sets > 1 && (p.w1.block_in != p.w.block_in || p.w1.block_out != p.w.block_out)) return false;
  if (p.lda % vec != 0 || reinterpret_cast<uintptr_t>(p.A) % 16 != 0) return false;
  d.rows = p.M;
  d.N = p.N;
  d.N1 = p.n_sets > 1 ? p.N1 : 0;
  d.K = p.K;
  d.block_in = p.w.block_in;
  d.block_out = p.w.block_out;
  d.decode_rows = fp8_decode_rows();
  return true;
}

}  // namespace

// The split forms (DEEPINFER_GEMM_FP8_SPLIT = 1 or 0, the default; tuning, same bits): launches of
// fewer tiles than SMs take a cluster per tile, one K sub-range per CTA, instead of one CTA
// streaming the whole K of a tile — the large-M kernel's (fp8_gemm.cuh; session 48 on the H100:
// batch 32 level, batch 64 -1.4%) and the FP8-order experts' 32-pair launches (fp8_expert_gemm.cuh;
// session 49 on the H100: batch 1 -38% against their persistent form, whose clusters of 8 run in
// ~7 waves of one CTA per SM).
bool fp8_split() {
  static const bool on = env_int("DEEPINFER_GEMM_FP8_SPLIT", 0, {0, 1}) == 1;
  return on;
}

bool fp8_order_past_decode_rows(int64_t rows) { return fp8_order_enabled() && rows > fp8_decode_rows(); }

bool fp8_gemv_plan(const GemmParams& p, Fp8GemvPlan& plan) {
  if (p.a_quant_block != kFp8GemvBlock && p.a_fp8_block != kFp8GemvBlock) return false;
  // The staging's vector loads: 8 BF16 or 8 F32 (two 16-byte loads) per chunk.
  Fp8GemvDims d;
  if (!fp8_order_launch(p, p.a_f32 && p.a_quant_block > 0 ? 4 : 8, d)) return false;
  d.tiles = fp8_tiles();
  d.wide_tiles = fp8_wide_tiles();
  return plan_fp8_gemv(d, plan);
}

namespace {

template <int T, int NR>
cudaError_t launch_fp8_gemv_shape(const GemmParams& p, const Fp8GemvPlan& plan, cudaStream_t s) {
  const int64_t smem = fp8_gemv_smem_bytes(NR, T);
  static const cudaError_t configured = cudaFuncSetAttribute(
      fp8_gemv_kernel<4, T, NR>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (configured != cudaSuccess) return configured;
  return launch_pdl_cluster(fp8_gemv_kernel<4, T, NR>, dim3(static_cast<unsigned>(plan.grid_x)), dim3(128),
                            static_cast<size_t>(smem), s, static_cast<unsigned>(plan.shape.P), p, plan.shape);
}

}  // namespace

cudaError_t launch_fp8_gemv(const GemmParams& p, const Fp8GemvPlan& plan, cudaStream_t s) {
  if (plan.grid_x == 0) return cudaSuccess;
  cudaError_t e;
  switch (plan.shape.nr) {
    case 8: e = plan.shape.tiles == 2 ? launch_fp8_gemv_shape<2, 8>(p, plan, s) : launch_fp8_gemv_shape<1, 8>(p, plan, s); break;
    case 16: e = plan.shape.tiles == 2 ? launch_fp8_gemv_shape<2, 16>(p, plan, s) : launch_fp8_gemv_shape<1, 16>(p, plan, s); break;
    case 32: e = plan.shape.tiles == 2 ? launch_fp8_gemv_shape<2, 32>(p, plan, s) : launch_fp8_gemv_shape<1, 32>(p, plan, s); break;
    default: return cudaErrorInvalidValue;
  }
  return e != cudaSuccess ? e : cudaGetLastError();
}

bool fp8_gemm_plan(const GemmParams& p, Fp8GemmPlan& plan) {
  if (p.a_quant_block != 0 || p.a_fp8_block != kFp8GemvBlock || p.a_f32) return false;
  Fp8GemvDims d;
  if (!fp8_order_launch(p, 8, d)) return false;
  d.split_below = fp8_split() ? device_sm_count() : 0;
  d.small_token_tiles = fp8_small_tiles();
  return plan_fp8_gemm(d, fp8_consumers(), plan);
}

namespace {

// The weight's codes as the large-M kernel's blocks of `cols` columns (fp8_gemm_weight_bytes at out).
cudaError_t launch_pack_fp8_weights(const WeightDesc& w, int64_t N, int64_t K, int cols, uint8_t* out, cudaStream_t s) {
  const int64_t threads = fp8_gemm_weight_bytes(N, K, cols / kFp8GemvCols) / 16;  // one per 16 bytes
  return launch_pdl(fp8_pack_weights_kernel, dim3(static_cast<unsigned>(threads / 256)), dim3(256), 0, s, w, N,
                    K / kFp8GemvBlock, cols, out);
}

template <int C, bool kSplit, int TM>
cudaError_t configure_fp8_gemm() {
  static const cudaError_t configured = cudaFuncSetAttribute(
      fp8_gemm_kernel<C, kSplit, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, Fp8GemmShape<C, TM>::kSmem);
  return configured;
}

// Whether the device runs clusters of `split` CTAs of the split form (a cluster's CTAs take one SM
// each: 8 of one GPC at most).
template <int C, int TM>
bool fp8_gemm_split_fits(int split) {
  static std::atomic<int> fits[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};  // unknown, 0, 1 (same answer from any thread)
  if (split < 2 || split > 8) return false;
  if (fits[split].load() < 0)
    fits[split] = configure_fp8_gemm<C, true, TM>() == cudaSuccess &&
                  max_active_clusters(fp8_gemm_kernel<C, true, TM>, dim3(Fp8GemmShape<C, TM>::kThreads),
                                      Fp8GemmShape<C, TM>::kSmem, static_cast<unsigned>(split)) > 0;
  return fits[split].load() == 1;
}

template <int C, int TM>
cudaError_t launch_fp8_gemm_c(const GemmParams& p, Fp8GemmArgs a, int64_t tiles, cudaStream_t s) {
  using Sh = Fp8GemmShape<C, TM>;
  if (a.split > 1 && fp8_gemm_split_fits<C, TM>(a.split))  // a cluster per tile, one sub-range per CTA
    return launch_pdl_cluster(fp8_gemm_kernel<C, true, TM>, dim3(static_cast<unsigned>(tiles * a.split)),
                              dim3(Sh::kThreads), static_cast<size_t>(Sh::kSmem), s,
                              static_cast<unsigned>(a.split), p, a);
  a.split = 1;
  if (const cudaError_t e = configure_fp8_gemm<C, false, TM>(); e != cudaSuccess) return e;
  return launch_pdl(fp8_gemm_kernel<C, false, TM>,
                    dim3(static_cast<unsigned>(std::min<int64_t>(tiles, device_sm_count()))), dim3(Sh::kThreads),
                    static_cast<size_t>(Sh::kSmem), s, p, a);
}

}  // namespace

cudaError_t launch_fp8_gemm(const GemmParams& p, const Fp8GemmPlan& plan, cudaStream_t s) {
  if (p.staging == nullptr || p.staging_bytes < plan.staging_bytes) return cudaErrorInvalidValue;
  Fp8GemmArgs a;
  a.codes = p.staging;
  a.tiles0 = plan.tiles0;
  a.n_tiles = plan.n_tiles;
  a.m_tiles = plan.m_tiles;
  a.kb = plan.kb;
  a.out_shift = plan.out_shift;
  a.split = plan.split;
  const int tm = plan.token_tile;
  cudaError_t e = launch_pdl(fp8_pack_codes_kernel, dim3(static_cast<unsigned>(plan.m_tiles * tm * plan.kb / 8)),
                             dim3(128), 0, s, static_cast<const __nv_bfloat16*>(p.A), p.lda, p.M, plan.kb, tm,
                             p.staging);
  for (int set = 0; set < p.n_sets && e == cudaSuccess; ++set) {
    const WeightDesc& w = set == 0 ? p.w : p.w1;
    const uint8_t*& blocks = set == 0 ? a.weights0 : a.weights1;
    if (w.fp8_blocks != nullptr) {  // prepared (launch_fp8_prepare_weight, the same tile width)
      blocks = w.fp8_blocks;
      continue;
    }
    uint8_t* out = p.staging + plan.codes_bytes + (set == 0 ? 0 : plan.tiles0) * plan.kb * plan.weight_block_bytes;
    e = launch_pack_fp8_weights(w, set == 0 ? p.N : p.N1, p.K, static_cast<int>(plan.tile_cols), out, s);
    blocks = out;
  }
  if (e != cudaSuccess) return e;
  const int64_t tiles = plan.n_tiles * plan.m_tiles;
  if (plan.consumers == 2) {  // fp8_gemm_token_tile: small tiles for three consumer warpgroups only
    e = tm == kFp8GemmTile ? launch_fp8_gemm_c<2, kFp8GemmTile>(p, a, tiles, s) : cudaErrorInvalidValue;
  } else {
    e = tm == 32 ? launch_fp8_gemm_c<3, 32>(p, a, tiles, s)
        : tm == 64 ? launch_fp8_gemm_c<3, 64>(p, a, tiles, s)
                   : launch_fp8_gemm_c<3, kFp8GemmTile>(p, a, tiles, s);
  }
  return e != cudaSuccess ? e : cudaGetLastError();
}

int64_t fp8_order_weight_bytes(const WeightDesc& w, int64_t N, int64_t K) {
  if (!fp8_order_enabled() || !fp8_weight_ok(w) || !fp8_order_scale_blocks_ok(w.block_in, w.block_out)) return 0;
  if (N < 1 || !fp8_order_k_ok(K)) return 0;
  return fp8_gemm_weight_bytes(N, K, fp8_consumers());
}

cudaError_t launch_fp8_prepare_weight(const WeightDesc& w, int64_t N, int64_t K, uint8_t* out, cudaStream_t s) {
  if (fp8_order_weight_bytes(w, N, K) == 0 || out == nullptr) return cudaErrorInvalidValue;
  const cudaError_t e = launch_pack_fp8_weights(w, N, K, kFp8GemvCols * fp8_consumers(), out, s);
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace deepinfer::kernels
