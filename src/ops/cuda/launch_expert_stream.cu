// Launcher of the streamed FP4 expert kernel (expert_stream_gemv.cuh; geometry in
// expert_stream_plan.h).
#include "ops/cuda/launch_expert_stream.h"

#include "kernels/common/env_knob.h"
#include "kernels/common/pdl_launch.cuh"
#include "kernels/gemm/expert_stream_gemv.cuh"

namespace deepinfer::kernels {

namespace {

// DEEPINFER_GEMV_EXPERT_STREAM = 1, 2, 4 or 8: expert launches of at most this many tokens take
// the streamed kernel; unset or 0: never (the lean kernel takes them, same bits). Off by default:
// its first form measured 7% slower at batch 1 and 18% at batch 8 on the H200 (session 36, tuning
// record); the second (the activations in registers, requested at the item's announcement: this
// one) is not measured yet.
int expert_stream_max_tokens() {
  static const int n = env_int("DEEPINFER_GEMV_EXPERT_STREAM", 0, {1, 2, 4, 8});
  return n;
}

// CTA b takes items b, b + grid, ... unless DEEPINFER_GEMV_EXPERT_STREAM_STATIC=0 (then a global
// counter's: a CTA that starts late takes fewer, for a round trip per item — an A/B switch, same
// bits). Measured on the H200 (session 36, first form of the kernel): stride order +1% at batch
// 1 and +7% at batch 8.
bool expert_stream_static_items() {
  static const bool on = env_switch("DEEPINFER_GEMV_EXPERT_STREAM_STATIC");
  return on;
}

// DEEPINFER_GEMV_EXPERT_STREAM_SETS = 2: only the two-set launches (the routed gate / up) take the
// streamed kernel, 1: only the one-set ones (the down projection); unset: both. An A/B switch:
// session 36's timeline had the streamed gate / up end 3.4 us sooner than the lean kernel's and
// its down projection 13 us later (its whole-SM CTAs waited for the side lane's shared expert).
int expert_stream_sets() {
  static const int n = env_int("DEEPINFER_GEMV_EXPERT_STREAM_SETS", 0, {1, 2});
  return n;
}

// Room for the side lane's kernels on the streamed kernel's SMs (A/B switches; same bits):
// DEEPINFER_GEMV_EXPERT_STREAM_WARPS = 4 or 8 consumer warps instead of 16 (teams of P warps must
// still divide them), DEEPINFER_GEMV_EXPERT_STREAM_SMEM_KB = the CTA's shared memory (ring and
// static), DEEPINFER_GEMV_EXPERT_STREAM_CTAS = 2 CTAs per SM (each within half its shared memory:
// the plan). A smaller ring keeps one stage loading beside every team's instead of three.
// Session 36's whole-SM CTAs kept the shared expert's down projection off their SMs and waited.
void expert_stream_room(ExpertStreamKnobs& knobs) {
  static const int warps = env_int("DEEPINFER_GEMV_EXPERT_STREAM_WARPS", kStreamConsumerWarps, {4, 8, 16});
  static const int smem_kb = env_int("DEEPINFER_GEMV_EXPERT_STREAM_SMEM_KB", 0);
  static const int ctas = env_int("DEEPINFER_GEMV_EXPERT_STREAM_CTAS", 1, {1, 2});
  knobs.consumer_warps = warps;
  knobs.ctas_per_sm = ctas;
  const size_t smem = static_cast<size_t>(smem_kb) << 10;
  if (smem_kb > 0 && smem < knobs.max_smem) knobs.max_smem = smem;
  if (knobs.max_smem < ExpertStreamKnobs{}.max_smem || ctas > 1) knobs.min_loading = 1;
}

// DEEPINFER_GEMV_EXPERT_STREAM_SLOTS = 2: a lane holds two windows of its activations instead of
// three (requested at the item's announcement; an A/B switch, same bits).
int expert_stream_slots() {
  static const int n = env_int("DEEPINFER_GEMV_EXPERT_STREAM_SLOTS", 3, {2, 3});
  return n;
}

template <int SLOTS>
cudaError_t launch_slots(const GemmParams& p, const ExpertStreamPlan& plan, cudaStream_t s) {
  // Every plan's ring fits beside the kernel's static shared memory (plan_expert_stream).
  constexpr size_t kMaxRing = ExpertStreamKnobs{}.max_smem - ExpertStreamKnobs{}.static_smem;
  static const cudaError_t configured = cudaFuncSetAttribute(
      expert_stream_kernel<SLOTS>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMaxRing));
  if (configured != cudaSuccess) return configured;
  if (plan.smem > kMaxRing) return cudaErrorInvalidValue;
  const cudaError_t e = launch_pdl(expert_stream_kernel<SLOTS>, dim3(static_cast<unsigned>(plan.grid)),
                                   static_cast<unsigned>(plan.threads), plan.smem, s, p, plan);
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace

bool expert_stream_plan(const GemmParams& p, ExpertStreamPlan& plan) {
  if (p.experts == nullptr || p.active == nullptr || !p.experts_aligned) return false;
  if (p.w.fmt != WeightFmt::kFp4Block || p.w.scale_f32 || p.a_quant_block > 0 || p.a_f32) return false;
  if (p.lda % 8 != 0 || reinterpret_cast<uintptr_t>(p.A) % 16 != 0) return false;  // 16-byte row reads
  if (device_cc_major() < 9) return false;  // bulk copies and mbarriers: sm_90
  if (expert_stream_sets() != 0 && expert_stream_sets() != p.n_sets) return false;
  ExpertStreamDims d;
  d.tokens = p.max_rows_per_expert;
  d.N = p.N;
  d.N1 = p.n_sets > 1 ? p.N1 : 0;
  d.K = p.K;
  d.max_active = p.max_active;
  ExpertStreamKnobs knobs;
  knobs.max_tokens = expert_stream_max_tokens();
  knobs.sms = device_sm_count();
  expert_stream_room(knobs);
  if (!plan_expert_stream(d, knobs, plan)) return false;
  plan.static_items = expert_stream_static_items();
  return true;
}

bool expert_stream_has_counters(const GemmParams& p, const ExpertStreamPlan& plan) {
  return plan.static_items || (p.tile_counters != nullptr && p.n_tile_counters >= 2);
}

cudaError_t launch_expert_stream(const GemmParams& p, const ExpertStreamPlan& plan, cudaStream_t s) {
  if (!expert_stream_has_counters(p, plan)) return cudaErrorInvalidValue;
  return expert_stream_slots() == 2 ? launch_slots<2>(p, plan, s) : launch_slots<3>(p, plan, s);
}

}  // namespace deepinfer::kernels
