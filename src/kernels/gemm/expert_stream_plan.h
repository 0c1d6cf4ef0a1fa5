// Launch geometry of the streamed FP4 expert kernel (expert_stream_gemv.cuh), as plain C++ (no
// CUDA: tested on the CPU). The kernel is persistent — one CTA per SM — and takes MoE expert
// launches of a few tokens (decode): a producer warp copies whole items (16 weight rows x all of
// K, with their scale rows) into a ring of shared-memory stages with bulk copies, and teams of
// consumer warps (a warp per canonical K sub-range, as the lean kernel) decode them. Items are
// handed out in stride order, or through a global counter so that a CTA which starts late (its
// SM busy with a side lane's kernel) takes fewer of them.
//
// Why: at batch 1 the lean kernel's FP4 gate/up launch (384 CTAs, each streaming 64 columns
// through a 4-window register ring per lane) read its 50 MB in ~31 us (~1.6 TB/s): each warp
// waits a memory round trip per 4 windows, and every CTA pays the routing wait and the expert
// lookups before its first load. A stage ring keeps ~100 KB per SM in flight with one
// instruction per row copied.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/gemm/canonical_k.h"

namespace deepinfer::kernels {

inline constexpr int kStreamCols = 16;           // columns per item: the mma's m16 (two n8 weight tiles)
inline constexpr int kStreamConsumerWarps = 16;  // consumer warps per CTA, in teams of P
inline constexpr int kStreamMaxRows = 8;         // rows per expert (one n8 activation tile)
inline constexpr int kStreamMaxSlots = 64;       // active experts a launch may hold
inline constexpr int kStreamMaxStages = 16;
inline constexpr int kStreamMaxWindows = 4;  // 128-element windows per sub-range (R <= 512)
inline constexpr int kStreamRowPad = 64;    // bytes after each staged weight row: rows g and g + 8
                                            // of a lane quad land in different bank groups
inline constexpr int kStreamScalePad = 16;  // bytes after each staged scale row (same reason)
inline constexpr size_t kStreamSmSmem = 228 << 10;     // shared memory per SM (H100 / H200)
inline constexpr size_t kStreamCtaReserved = 1 << 10;  // of it, reserved per resident CTA

// A launch as the plan sees it (launch_expert_stream.cu checks what this cannot see: formats,
// alignment, the counters).
struct ExpertStreamDims {
  int64_t tokens = 0;      // the most rows one expert can hold (GemmParams::max_rows_per_expert)
  int64_t N = 0, N1 = 0;   // columns of weight set 0 and 1 (N1 = 0: one set)
  int64_t K = 0;
  int64_t max_active = 0;  // active-expert slots
};

struct ExpertStreamKnobs {
  int max_tokens = 8;                  // launches of at most this many tokens (0: none)
  size_t max_smem = 227 << 10;         // shared memory per CTA (the H200's opt-in limit)
  size_t static_smem = 24 << 10;       // what the kernel holds besides the ring (fold, slot table)
  int64_t sms = 132;                   // SMs of the device
  int ctas_per_sm = 1;                 // CTAs per SM (2: each within half the SM's shared memory)
  int consumer_warps = kStreamConsumerWarps;  // consumer warps per CTA (4, 8 or 16): fewer leave
                                              // room on the SM for the side lane's kernels
  int min_loading = 3;                 // stages loading while every team holds one
};

struct ExpertStreamPlan {
  int R = 0, P = 0;         // gemm_subrange(K), gemm_n_subranges(K): a consumer warp each
  int consumer_warps = 0;   // the producer is warp consumer_warps
  int teams = 0;            // consumer_warps / P: items in work at once
  int stages = 0;           // ring stages (>= teams + min_loading)
  int w_stride = 0;         // staged weight row stride in bytes: K / 2 + kStreamRowPad
  int s_stride = 0;         // staged scale row stride in bytes: K / 32 + kStreamScalePad
  int stage_bytes = 0;      // kStreamCols rows of each
  int tiles0 = 0, tiles1 = 0;  // items per active expert of weight set 0 and 1
  int64_t grid = 0;
  int threads = 0;          // consumers and one producer warp
  bool static_items = true;  // CTA b takes items b, b + grid, ... (false: the counter's)
  size_t smem = 0;          // dynamic: the ring, its barriers and item slots
};

// Bytes one stage's copies bring (the producer's expected transactions).
DI_HOST_DEVICE inline int64_t expert_stream_copy_bytes(int64_t K) { return kStreamCols * (K / 2 + K / 32); }

// Whether the streamed kernel takes the launch, and its geometry.
inline bool plan_expert_stream(const ExpertStreamDims& d, const ExpertStreamKnobs& knobs, ExpertStreamPlan& plan) {
  if (d.tokens < 1 || d.tokens > std::min(knobs.max_tokens, kStreamMaxRows)) return false;
  // Rows of K / 2 bytes and scale rows of K / 32 (multiples of 16: bulk copies); whole items.
  if (d.K < 512 || d.K % 512 != 0 || d.K > (int64_t{1} << 20)) return false;
  if (d.N < kStreamCols || d.N % kStreamCols != 0 || d.N1 % kStreamCols != 0) return false;
  if (d.max_active < 1 || d.max_active > kStreamMaxSlots) return false;
  plan.R = static_cast<int>(gemm_subrange(d.K));
  plan.P = gemm_n_subranges(d.K);
  if (knobs.consumer_warps < 1 || knobs.consumer_warps > kStreamConsumerWarps) return false;
  if (knobs.consumer_warps % plan.P != 0 || plan.R > kStreamMaxWindows * 128) return false;
  plan.consumer_warps = knobs.consumer_warps;
  plan.teams = plan.consumer_warps / plan.P;
  plan.w_stride = static_cast<int>(d.K / 2) + kStreamRowPad;
  plan.s_stride = static_cast<int>(d.K / 32) + kStreamScalePad;
  plan.stage_bytes = kStreamCols * (plan.w_stride + plan.s_stride);
  // A stage: its rows, its two barriers, the announced item and its tag.
  const size_t per_stage = static_cast<size_t>(plan.stage_bytes) + 2 * sizeof(uint64_t) + 2 * sizeof(int32_t);
  // Several CTAs per SM share its shared memory, each less the part the hardware reserves for it.
  const int ctas = std::max(knobs.ctas_per_sm, 1);
  const size_t max_smem = std::min(knobs.max_smem, kStreamSmSmem / static_cast<size_t>(ctas) - kStreamCtaReserved);
  if (max_smem <= knobs.static_smem) return false;
  const size_t fit = (max_smem - knobs.static_smem) / per_stage;
  plan.stages = static_cast<int>(std::min<size_t>(fit, kStreamMaxStages));
  if (plan.stages < plan.teams + knobs.min_loading) return false;
  plan.smem = static_cast<size_t>(plan.stages) * per_stage;
  plan.tiles0 = static_cast<int>(d.N / kStreamCols);
  plan.tiles1 = static_cast<int>(d.N1 / kStreamCols);
  plan.grid = knobs.sms * ctas;
  plan.threads = (plan.consumer_warps + 1) * 32;
  return true;
}

}  // namespace deepinfer::kernels
