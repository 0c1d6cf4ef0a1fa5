// Steps 0-4 of the host sampler on the device (Ops::adjust_logits): sanitise, token masks, logit
// bias, min_tokens' stop suppression and the penalties, so rows with those are sampled where their
// logits are. Two launches:
//   * adjust_dense_kernel: block (s, r) copies slice s of row r sanitised into out, -inf where the
//     row's mask clears the bit, and counts the slice's finite entries (part_finite [R, S]);
//   * adjust_sparse_kernel: a block per row applies the row's sparse inputs in the host's order.
//     Stop ids become -inf unless they are all the row's finite entries (a grammar that can only
//     end here); then each entry (one distinct token per thread) gets its bias, repetition,
//     frequency and presence penalties — a pending token (asynchronous scheduling: sampled by the
//     step before, not yet in the host's counts) with one more output occurrence and seen, as an
//     entry of its own if it has none. Masks and suppression only write -inf, which the later
//     steps keep, so applying the bias after the mask is the host's bias-then-mask. The arithmetic
//     is F32 with explicit rounding (no FMA contraction): the host's values bit for bit.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kAdjustSlices = 8;
inline constexpr int kAdjustThreads = 256;

// Ops::AdjustRow / Ops::AdjustEntry (layouts checked in launch_elementwise.cu).
struct DeviceAdjustRow {
  int32_t entry_begin, entry_end, stop_begin, stop_end, mask_row;
  float repetition, presence, frequency;
  int32_t pending;  // >= 0: index in pending_ids of one more output token (Ops::AdjustRow::pending)
};
struct DeviceAdjustEntry {
  int32_t token;
  float bias;
  int32_t output_count, seen;
};

__global__ void __launch_bounds__(kAdjustThreads)
    adjust_dense_kernel(const float* logits, int64_t ld, int64_t V, const DeviceAdjustRow* rows, const uint32_t* masks,
                        float* out, int32_t* part_finite) {
  pdl_prologue();
  const int s = blockIdx.x;
  const int64_t r = blockIdx.y;
  const int64_t per = (V + kAdjustSlices - 1) / kAdjustSlices;
  const int64_t begin = min(V, s * per), end = min(V, begin + per);
  const int32_t mask_row = rows[r].mask_row;
  const uint32_t* mask = mask_row >= 0 ? masks + static_cast<int64_t>(mask_row) * ((V + 31) / 32) : nullptr;
  const float* in = logits + r * ld;
  float* o = out + r * V;
  int finite = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kAdjustThreads) {
    float v = __ldg(in + i);
    if (v != v) v = -INFINITY;
    if (v == INFINITY) v = FLT_MAX;
    if (mask != nullptr && ((__ldg(mask + (i >> 5)) >> (i & 31)) & 1u) == 0) v = -INFINITY;
    o[i] = v;
    finite += v != -INFINITY;
  }
  __shared__ int warp_sum[kAdjustThreads / 32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) finite += __shfl_xor_sync(0xffffffffu, finite, off);
  if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = finite;
  __syncthreads();
  if (threadIdx.x == 0) {
    int total = 0;
    for (int w = 0; w < kAdjustThreads / 32; ++w) total += warp_sum[w];
    part_finite[r * kAdjustSlices + s] = total;
  }
}

__global__ void __launch_bounds__(kAdjustThreads)
    adjust_sparse_kernel(int64_t V, const DeviceAdjustRow* rows, const DeviceAdjustEntry* entries, const int32_t* stops,
                         const int32_t* pending_ids, const int32_t* part_finite, float* out) {
  pdl_prologue();
  const int64_t r = blockIdx.x;
  const DeviceAdjustRow a = rows[r];
  float* o = out + r * V;
  // The pending token (-1: none; an id past V is no token either, as on the host).
  int32_t pending = a.pending >= 0 ? pending_ids[a.pending] : -1;
  if (pending >= V) pending = -1;
  __shared__ int pending_has_entry;
  if (threadIdx.x == 0) pending_has_entry = 0;
  if (a.stop_end > a.stop_begin) {  // step 3: min_tokens
    int finite_stops = 0;
    for (int i = a.stop_begin + threadIdx.x; i < a.stop_end; i += kAdjustThreads) finite_stops += o[stops[i]] != -INFINITY;
    __shared__ int warp_sum[kAdjustThreads / 32];
    __shared__ bool suppress;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) finite_stops += __shfl_xor_sync(0xffffffffu, finite_stops, off);
    if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = finite_stops;
    __syncthreads();
    if (threadIdx.x == 0) {
      int stops_total = 0, row_total = 0;
      for (int w = 0; w < kAdjustThreads / 32; ++w) stops_total += warp_sum[w];
      for (int s = 0; s < kAdjustSlices; ++s) row_total += part_finite[r * kAdjustSlices + s];
      suppress = stops_total != row_total;
    }
    __syncthreads();
    if (suppress) {
      for (int i = a.stop_begin + threadIdx.x; i < a.stop_end; i += kAdjustThreads) o[stops[i]] = -INFINITY;
    }
    __syncthreads();
  }
  // Steps 1 and 4 per distinct token; a -inf entry (masked, suppressed) stays -inf through them.
  auto apply = [&](DeviceAdjustEntry e) {
    float v = o[e.token];
    if (v == -INFINITY) return;
    v = __fadd_rn(v, e.bias);
    if (a.repetition != 1.0f && e.seen != 0) v = v > 0.0f ? __fdiv_rn(v, a.repetition) : __fmul_rn(v, a.repetition);
    if ((a.presence != 0.0f || a.frequency != 0.0f) && e.output_count > 0) {
      v = __fsub_rn(v, __fmul_rn(a.frequency, static_cast<float>(e.output_count)));
      v = __fsub_rn(v, a.presence);
    }
    o[e.token] = v;
  };
  __syncthreads();  // pending_has_entry's initial value (also after the stop pass)
  for (int i = a.entry_begin + threadIdx.x; i < a.entry_end; i += kAdjustThreads) {
    DeviceAdjustEntry e = entries[i];
    if (e.token == pending) {  // one entry per distinct token: at most one thread
      e.output_count += 1;
      e.seen = 1;
      pending_has_entry = 1;
    }
    apply(e);
  }
  if (pending < 0) return;  // block-uniform
  __syncthreads();
  if (threadIdx.x == 0 && pending_has_entry == 0) apply(DeviceAdjustEntry{pending, 0.0f, 1, 1});
}

}  // namespace deepinfer::kernels
