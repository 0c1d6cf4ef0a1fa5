// Launches of the packed large-M GEMMs (kernels/gemm/packed_gemm.cuh: pack A, then per weight set
// pack W and multiply; packed_expert_gemm.cuh: the expert tile table, pack A through the routing,
// then per set the GEMM that dequantises the experts itself). Every kernel goes through launch_pdl and waits for its predecessor before
// touching memory, so the staging buffer is reused in stream order.
#include "ops/cuda/launch_packed_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/common/env_knob.h"
#include "kernels/common/pdl_launch.cuh"
#include "kernels/gemm/expert_swap_gemm.cuh"
#include "kernels/gemm/fp8_expert_gemm.cuh"
#include "kernels/gemm/fp8_expert_gemv.cuh"
#include "kernels/gemm/packed_expert_gemm.cuh"
#include "kernels/gemm/packed_gemm.cuh"
#include "ops/cuda/launch_fp8_experts.h"
#include "ops/cuda/launch_fp8_gemm.h"

namespace deepinfer::kernels {
namespace {

// pack_w_kernel over a weight of `groups` x N rows (tiles 128-row tiles per group, k_tiles K tiles)
// into blocks [group][tile][k tile] at out: the per-launch staging and the prepared copy alike.
template <WeightFmt F>
cudaError_t launch_pack_w(const WeightDesc& w, int64_t N, int64_t groups, int64_t tiles, int64_t k_tiles, uint8_t* out,
                          cudaStream_t s) {
  PackedOperand b;
  b.rows = N;
  b.tiles = tiles;
  b.k_tiles = k_tiles;
  b.out = out;
  return launch_pdl(pack_w_kernel<F>, dim3(static_cast<unsigned>(groups * tiles * k_tiles)), kPackThreads, 0, s, b, w);
}

template <WeightFmt F>
cudaError_t launch_packed_fmt(const GemmParams& p, const PackedGemmPlan& plan, cudaStream_t s) {
  static const cudaError_t configured = cudaFuncSetAttribute(
      packed_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kPackedSmem));
  if (configured != cudaSuccess) return configured;
  const int64_t groups = p.n_groups;
  PackedOperand a;
  a.src = p.A;
  a.rows = p.M;
  a.tiles = plan.m_tiles;
  a.k_tiles = plan.k_tiles;
  a.out = p.staging;
  cudaError_t e = launch_pdl(pack_a_kernel<F, false>, dim3(static_cast<unsigned>(groups * plan.m_tiles * plan.k_tiles)),
                             kPackThreads, 0, s, a, p.lda, p.K, PackedRows{});
  if (e != cudaSuccess) return e;
  uint8_t* w_out = p.staging + plan.a_bytes;
  for (int set = 0; set < p.n_sets; ++set) {
    const WeightDesc& w = set == 0 ? p.w : p.w1;
    const int64_t N = set == 0 ? p.N : p.N1, tiles = set == 0 ? plan.n_tiles : plan.n1_tiles;
    // A weight packed once (launch_pack_weight) has no staging (plan: b_bytes 0) and no pack launch.
    const bool prepacked = (set == 0 ? plan.b_bytes : plan.b1_bytes) == 0;
    if (!prepacked && (e = launch_pack_w<F>(w, N, groups, tiles, plan.k_tiles, w_out, s)) != cudaSuccess) return e;
    PackedGemmArgs g;
    g.a = p.staging;
    g.w = prepacked ? w.packed : w_out;
    g.M = p.M;
    g.N = N;
    g.K = p.K;
    g.m_tiles = plan.m_tiles;
    g.n_tiles = tiles;
    g.k_tiles = plan.k_tiles;
    g.groups = static_cast<int>(groups);
    g.C = set == 0 ? p.C : p.C1;
    g.ldc = set == 0 ? p.ldc : p.ldc1;
    g.c_bf16 = p.c_bf16;
    g.c_pairs = g.ldc % 2 == 0 && N % 2 == 0 && reinterpret_cast<uintptr_t>(g.C) % (p.c_bf16 ? 4 : 8) == 0;
    const int64_t out_tiles = groups * plan.m_tiles * tiles;  // persistent CTAs: one per SM at most
    e = launch_pdl(packed_gemm_kernel, dim3(static_cast<unsigned>(std::min<int64_t>(out_tiles, device_sm_count()))),
                   kPackedThreads, kPackedSmem, s, g);
    if (e != cudaSuccess) return e;
    w_out += set == 0 ? plan.b_bytes : plan.b1_bytes;
  }
  return cudaGetLastError();
}

// Producer warpgroups of the expert kernel (DEEPINFER_GEMM_EXPERT_PRODUCERS = 1 or 2 (default);
// tuning, same bits): two fill alternate stages with registers moved to the consumers. Measured
// on the H200 (ABAB, session 13): 8K prefill 71.8K tok/s with two, 62.9K with one (+14%).
int expert_producers() {
  static const int n = env_int("DEEPINFER_GEMM_EXPERT_PRODUCERS", 2, {1, 2});
  return n;
}

template <WeightFmt F, int PRODUCERS>
cudaError_t launch_expert_gemm(const PackedExpertArgs& g, int64_t out_tiles, cudaStream_t s) {
  static const cudaError_t configured =
      cudaFuncSetAttribute(packed_expert_gemm_kernel<F, PRODUCERS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kPackedExpertSmem));
  if (configured != cudaSuccess) return configured;
  return launch_pdl(packed_expert_gemm_kernel<F, PRODUCERS>,
                    dim3(static_cast<unsigned>(std::min<int64_t>(out_tiles, device_sm_count()))),
                    packed_expert_threads(PRODUCERS), kPackedExpertSmem, s, g);
}

// CTAs per SM of the swapped expert kernel's 32-pair (decode) tiles: DEEPINFER_GEMM_EXPERT_SWAP_CTAS
// = 2 (default) or 1 (expert_swap_gemm.cuh SwapTile; tuning, same bits). Measured on the H200
// (session 23): expert launches at batch 512 577-610 us with two, 610-661 us with one; the batch-512
// step +3.2% (ABAB).
int expert_swap_ctas() {
  static const int n = env_int("DEEPINFER_GEMM_EXPERT_SWAP_CTAS", 2, {1, 2});
  return n;
}

// Whether the swapped expert kernel's token tiles copy and multiply only their tokens' rows
// (DEEPINFER_GEMM_EXPERT_TRIM, default on; 0: whole tiles, the same bits).
bool expert_trim() {
  static const bool on = env_switch("DEEPINFER_GEMM_EXPERT_TRIM");
  return on;
}

template <WeightFmt F, int NT, int CTAS = 1>
cudaError_t launch_expert_swap(const PackedExpertArgs& g, int64_t out_tiles, cudaStream_t s) {
  constexpr size_t smem = SwapTile<NT, CTAS>::kSmem;
  static const cudaError_t configured = cudaFuncSetAttribute(
      expert_swap_gemm_kernel<F, NT, CTAS>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (configured != cudaSuccess) return configured;
  return launch_pdl(expert_swap_gemm_kernel<F, NT, CTAS>,
                    dim3(static_cast<unsigned>(std::min<int64_t>(out_tiles, int64_t{CTAS} * device_sm_count()))),
                    kSwapThreads, smem, s, g);
}

// The expert GEMM's arguments for weight set `set` of expert launch p (set 1: the descriptors
// p.experts[E, 2E), N1 = N), over activation blocks a and the (expert, token tile) table.
PackedExpertArgs expert_set_args(const GemmParams& p, int set, const uint8_t* a, const int32_t* table, int64_t y_tiles,
                                 int64_t n_tiles, int64_t k_tiles, bool trim) {
  PackedExpertArgs g;
  g.a = a;
  g.table = table;
  g.experts = p.experts + set * p.n_experts;
  g.perm = p.perm;
  g.y_tiles = y_tiles;
  g.n_tiles = n_tiles;
  g.k_tiles = k_tiles;
  g.N = p.N;  // set 1 of an expert launch has N1 = N
  g.K = p.K;
  g.C = set == 0 ? p.C : p.C1;
  g.ldc = set == 0 ? p.ldc : p.ldc1;
  g.c_bf16 = p.c_bf16;
  g.c_pairs = g.ldc % 2 == 0 && g.N % 2 == 0 && reinterpret_cast<uintptr_t>(g.C) % (p.c_bf16 ? 4 : 8) == 0;
  g.trim = trim;
  return g;
}

template <WeightFmt F>
cudaError_t launch_packed_experts_fmt(const GemmParams& p, const PackedExpertPlan& plan, cudaStream_t s) {
  auto* table = reinterpret_cast<int32_t*>(p.staging);
  uint8_t* a_out = p.staging + plan.table_bytes;
  const bool small = plan.tile_rows != kPackRows;  // 32-pair tiles: the swapped kernel only
  if (small && !expert_swap_enabled()) return cudaErrorInvalidValue;
  cudaError_t e = launch_pdl(expert_tile_table_kernel, dim3(1), 1024, 0, s, p.offsets, p.n_experts, plan.y_tiles,
                             plan.tile_rows, table);
  if (e != cudaSuccess) return e;
  PackedOperand a;
  a.src = p.A;
  a.rows = p.M;
  a.tiles = plan.y_tiles;
  a.k_tiles = plan.k_tiles;
  a.out = a_out;
  PackedRows rows;
  rows.table = table;
  rows.y_tiles = plan.y_tiles;
  rows.perm = p.perm;
  rows.a_div = p.a_div;
  e = launch_pdl(small ? pack_a_kernel<F, true, 32> : pack_a_kernel<F, true>,
                 dim3(static_cast<unsigned>(plan.y_tiles * plan.k_tiles)), kPackThreads, 0, s, a, p.lda, p.K, rows);
  if (e != cudaSuccess) return e;
  for (int set = 0; set < p.n_sets; ++set) {
    const PackedExpertArgs g = expert_set_args(p, set, a_out, table, plan.y_tiles, plan.n_tiles, plan.k_tiles, expert_trim());
    const int64_t out_tiles = plan.y_tiles * plan.n_tiles;
    e = small && expert_swap_ctas() == 2 ? launch_expert_swap<F, 32, 2>(g, out_tiles, s)
        : small                     ? launch_expert_swap<F, 32>(g, out_tiles, s)
        : expert_swap_enabled()     ? launch_expert_swap<F, 128>(g, out_tiles, s)
        : expert_producers() == 2 ? launch_expert_gemm<F, 2>(g, out_tiles, s)
                                  : launch_expert_gemm<F, 1>(g, out_tiles, s);
    if (e != cudaSuccess) return e;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_pack_weight(const WeightDesc& w, int64_t N, int64_t K, uint8_t* out, cudaStream_t s) {
  if (packed_weight_bytes(N, K) == 0 || out == nullptr) return cudaErrorInvalidValue;
  const int64_t tiles = (N + kPackRows - 1) / kPackRows, k_tiles = K / kGemmBK;
  switch (w.fmt) {
    case WeightFmt::kBF16: return launch_pack_w<WeightFmt::kBF16>(w, N, 1, tiles, k_tiles, out, s);
    case WeightFmt::kFp8Block: return launch_pack_w<WeightFmt::kFp8Block>(w, N, 1, tiles, k_tiles, out, s);
    case WeightFmt::kFp4Block: return launch_pack_w<WeightFmt::kFp4Block>(w, N, 1, tiles, k_tiles, out, s);
  }
  return cudaErrorInvalidValue;
}

// The expert GEMM with swapped operands (expert_swap_gemm.cuh: the weights decoded by the
// consumers into register fragments, the producer warpgroup only copying) unless
// DEEPINFER_GEMM_EXPERT_SWAP=0 (an A/B switch, same bits: then the producer-decoding kernel).
bool expert_swap_enabled() {
  static const bool on = env_switch("DEEPINFER_GEMM_EXPERT_SWAP");
  return on;
}

cudaError_t launch_packed_experts(const GemmParams& p, const PackedExpertPlan& plan, cudaStream_t s) {
  switch (p.w.fmt) {
    case WeightFmt::kFp4Block: return launch_packed_experts_fmt<WeightFmt::kFp4Block>(p, plan, s);
    default: return cudaErrorInvalidValue;  // (FP8 experts: packed_expert_plan keeps them off this path)
  }
}

cudaError_t launch_packed_gemm(const GemmParams& p, const PackedGemmPlan& plan, cudaStream_t s) {
  switch (p.w.fmt) {
    case WeightFmt::kBF16: return launch_packed_fmt<WeightFmt::kBF16>(p, plan, s);
    case WeightFmt::kFp8Block: return launch_packed_fmt<WeightFmt::kFp8Block>(p, plan, s);
    case WeightFmt::kFp4Block: return launch_packed_fmt<WeightFmt::kFp4Block>(p, plan, s);
  }
  return cudaErrorInvalidValue;
}

// The FP4 experts in the FP8 order (launch_fp8_experts.h) live here too: their kernels share the
// packed expert headers, whose non-template kernels one translation unit must hold.
bool fp8_experts_enabled() {
#ifndef DI_CUDA_WGMMA
  return false;
#else
  static const bool on = env_int("DEEPINFER_GEMM_FP8_EXPERTS", 0, {0, 1}) == 1 && device_cc_major() == 9;
  return on;
#endif
}

cudaError_t launch_fp4_fold_layout(uint8_t* codes, int64_t bytes, cudaStream_t stream) {
  if (bytes % kFp4FoldBlockBytes != 0 || reinterpret_cast<uintptr_t>(codes) % 16 != 0) return cudaErrorInvalidValue;
  const int64_t blocks = bytes / kFp4FoldBlockBytes;
  if (blocks == 0) return cudaSuccess;
  fp4_fold_layout_kernel<<<static_cast<unsigned>((blocks + 255) / 256), 256, 0, stream>>>(codes, blocks);
  return cudaGetLastError();
}

// Most pairs of an FP8-order expert launch the lean form takes (fp8_expert_gemv.cuh;
// DEEPINFER_GEMM_FP8_EXPERTS_LEAN, default 512 — batch 85 at V4-Flash's 6 experts per token, where
// an expert averages 2 pairs; 0 = never: an A/B switch, same bits).
int fp8_experts_lean_pairs() {
  static const int n =
      env_switch("DEEPINFER_GEMM_FP8_EXPERTS_LEAN") ? env_int("DEEPINFER_GEMM_FP8_EXPERTS_LEAN", 512) : 0;
  return n;
}
// 64-row groups each lean CTA takes in turn (DEEPINFER_GEMM_FP8_EXPERTS_LEAN_GROUPS = 1 (default)
// or 2): two share one CTA's prologue and activation staging — for the multi-wave launches of
// batch 8 and up (docs/cuda.md "Session 53"); an A/B switch, the same bits.
int fp8_experts_lean_per_cta() {
  static const int n = env_int("DEEPINFER_GEMM_FP8_EXPERTS_LEAN_GROUPS", 1, {1, 2});
  return n;
}

bool fp8_expert_plan(const GemmParams& p, Fp8ExpertPlan& plan) {
  if (!fp8_experts_enabled() || p.experts == nullptr || p.n_groups != 1 || p.offsets == nullptr) return false;
  if (p.w.fmt != WeightFmt::kFp4Block || !p.w.fp4_fold) return false;
  if (p.n_sets > 1 && p.N1 != p.N) return false;  // (set 1: p.experts[E, 2E), p.w only describes set 0)
  // BF16 activations FP8-quantised per 128 inputs already (the pre-pass re-derives their codes).
  if (p.a_f32 || p.a_quant_block != 0 || p.a_fp8_block != kFp8GemvBlock) return false;
  if (p.lda % 8 != 0 || reinterpret_cast<uintptr_t>(p.A) % 16 != 0) return false;
  // (The lean form's grid walks the routing's active list.)
  return plan_fp8_experts(p.M, p.n_experts, p.N, p.K, fp8_split() ? 2 * int64_t{device_sm_count()} : 0, plan,
                          p.active != nullptr ? fp8_experts_lean_pairs() : 0, fp8_experts_lean_per_cta());
}

namespace {

template <int NT, bool kSplit>
cudaError_t configure_fp8_experts() {
  static const cudaError_t configured = cudaFuncSetAttribute(
      fp8_expert_gemm_kernel<NT, kSplit>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(Fp8ExpertShape<NT>::kSmem));
  return configured;
}

// Whether the device runs the split form's clusters of `split` CTAs (one SM each: 8 of a GPC at
// most); else the launch takes persistent CTAs (the same bits).
bool fp8_experts_split_fits(int split) {
  static std::atomic<int> fits[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};  // unknown, 0, 1
  if (split < 2 || split > 8) return false;
  if (fits[split].load() < 0)
    fits[split] = configure_fp8_experts<32, true>() == cudaSuccess &&
                  max_active_clusters(fp8_expert_gemm_kernel<32, true>, dim3(Fp8ExpertShape<32>::kThreads),
                                      Fp8ExpertShape<32>::kSmem, static_cast<unsigned>(split)) > 0;
  return fits[split].load() == 1;
}

template <int NT>
cudaError_t launch_fp8_experts_nt(const GemmParams& p, const Fp8ExpertPlan& plan, cudaStream_t s) {
  using Sh = Fp8ExpertShape<NT>;
  const bool split = NT == 32 && plan.split > 1 && fp8_experts_split_fits(plan.split);
  if (const cudaError_t e = configure_fp8_experts<NT, false>(); e != cudaSuccess) return e;
  auto* table = reinterpret_cast<int32_t*>(p.staging);
  uint8_t* codes = p.staging + plan.table_bytes;
  cudaError_t e = launch_pdl(expert_tile_table_kernel, dim3(1), 1024, 0, s, p.offsets, p.n_experts, plan.y_tiles, NT,
                             table);
  if (e != cudaSuccess) return e;
  PackedRows rows;
  rows.table = table;
  rows.y_tiles = plan.y_tiles;
  rows.perm = p.perm;
  rows.a_div = p.a_div;
  const int64_t items = plan.y_tiles * NT * plan.kb;  // (tile, tile row, block): 8 per CTA
  e = launch_pdl(fp8_expert_pack_kernel<NT>, dim3(static_cast<unsigned>((items + 7) / 8)), 128, 0, s,
                 static_cast<const __nv_bfloat16*>(p.A), p.lda, plan.kb, rows, codes);
  if (e != cudaSuccess) return e;
  for (int set = 0; set < p.n_sets; ++set) {
    // (trim: the swapped kernel's; the FP8-order kernel multiplies whole tiles)
    PackedExpertArgs g = expert_set_args(p, set, codes, table, plan.y_tiles, plan.n_tiles, plan.kb, false);
    const int64_t out_tiles = plan.y_tiles * plan.n_tiles;
    if constexpr (NT == 32) {
      if (split) {  // a cluster per tile (those past the table's tiles exit at once)
        g.split = plan.split;
        e = launch_pdl_cluster(fp8_expert_gemm_kernel<NT, true>, dim3(static_cast<unsigned>(out_tiles * plan.split)),
                               dim3(Sh::kThreads), static_cast<size_t>(Sh::kSmem), s,
                               static_cast<unsigned>(plan.split), g);
        if (e != cudaSuccess) return e;
        continue;
      }
    }
    // persistent CTAs: one per SM at most
    e = launch_pdl(fp8_expert_gemm_kernel<NT, false>,
                   dim3(static_cast<unsigned>(std::min<int64_t>(out_tiles, device_sm_count()))), Sh::kThreads,
                   Sh::kSmem, s, g);
    if (e != cudaSuccess) return e;
  }
  return cudaGetLastError();
}

// The lean form: one launch, both sets, G 64-row groups per CTA (4 blocks in flight per lane).
template <int G>
cudaError_t launch_fp8_experts_lean_g(const GemmParams& p, const Fp8ExpertPlan& plan, cudaStream_t s) {
  static const int prefetch = l2_prefetch_blocks();
  constexpr int kNB = 4;
  const int64_t smem = fp8_expert_gemv_smem_bytes(plan.kb, G);
  static const cudaError_t configured =
      cudaFuncSetAttribute(fp8_expert_gemv_kernel<kNB, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(fp8_expert_gemv_smem_bytes(kFp8ExpertLeanMaxK / kGemmBK, G)));
  if (configured != cudaSuccess) return configured;
  const int64_t z = p.max_active > 0 ? std::min<int64_t>(plan.lean_z, p.max_active) : plan.lean_z;
  const dim3 grid(static_cast<unsigned>(plan.lean_ctas() * p.n_sets), 1, static_cast<unsigned>(z));
  const cudaError_t e = launch_pdl(fp8_expert_gemv_kernel<kNB, G>, grid, 128, static_cast<size_t>(smem), s, p,
                                   static_cast<int>(plan.lean_ctas()), prefetch);
  return e != cudaSuccess ? e : cudaGetLastError();
}
cudaError_t launch_fp8_experts_lean(const GemmParams& p, const Fp8ExpertPlan& plan, cudaStream_t s) {
  return plan.lean_per_cta == 2 ? launch_fp8_experts_lean_g<2>(p, plan, s) : launch_fp8_experts_lean_g<1>(p, plan, s);
}

}  // namespace

int l2_prefetch_blocks() {
  static const int n = std::max(0, env_int("DEEPINFER_GEMM_L2_PREFETCH", 0));
  return n;
}

cudaError_t launch_fp8_experts(const GemmParams& p, const Fp8ExpertPlan& plan, cudaStream_t s) {
  if (plan.lean) return launch_fp8_experts_lean(p, plan, s);
  if (p.staging == nullptr || p.staging_bytes < plan.staging_bytes()) return cudaErrorInvalidValue;
  return plan.nt == 128 ? launch_fp8_experts_nt<128>(p, plan, s) : launch_fp8_experts_nt<32>(p, plan, s);
}

}  // namespace deepinfer::kernels
