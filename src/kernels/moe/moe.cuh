// MoE kernels (model_v4_flash.md §4.9): routing (sqrt-softplus scores, biased top-k or hash
// table), grouping (token, slot) pairs by expert, the SwiGLU + routing-weight epilogue between the
// expert GEMMs, and the per-token combine in ascending expert id (a fixed order, batch invariant).
// The expert GEMMs themselves are dequant_gemm in expert mode.
#pragma once

#include "kernels/common/device_utils.cuh"
#include "kernels/launch.h"
#include "kernels/gemm/act_quant.cuh"

namespace deepinfer::kernels {

// Token t's routing by one warp: logits [T, E] F32 -> sel [T, k] I32, weights [T, k] F32. Both
// routing kernels (moe_route_kernel, moe_group_small_kernel) route through it: the same bits.
inline constexpr int kRoutePerLane = 8;  // candidates a lane keeps in registers (E <= 256)
__device__ inline void moe_route_token(const float* logits, const float* bias, const int64_t* tid2eid,
                                       const int32_t* ids, int64_t t, int E, int k, float route_scale, int32_t* sel,
                                       float* weights) {
  const int lane = threadIdx.x & 31;
  auto score = [&](int e) {
    const float z = logits[t * E + e];
    return sqrtf(z > 20.0f ? z : log1pf(expf(z)));
  };
  // The warp's best (value, expert) pair, ties to the lower expert id, in every lane.
  auto warp_argmax = [](float& best, int& best_e) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (ov > best || (ov == best && oe < best_e)) best = ov, best_e = oe;
    }
  };
  // Lane i < k ends up holding slot i's expert (my_e): the slots' scores are then computed in
  // parallel, not one after another by one lane (and no per-slot array in local memory).
  int32_t my_e = 0;
  if (tid2eid != nullptr) {
    if (lane < k) my_e = static_cast<int32_t>(tid2eid[static_cast<int64_t>(ids[t]) * k + lane]);
  } else if (E <= 32 * kRoutePerLane) {
    // k rounds of warp arg-max over score + bias, excluding chosen ones (ties: lower id). The
    // lane's candidates (e = lane + 32 j) are scored once, not once per round.
    float cand[kRoutePerLane];
    uint32_t taken = 0;  // bit j: candidate j already chosen
#pragma unroll
    for (int j = 0; j < kRoutePerLane; ++j) {
      const int e = lane + 32 * j;
      cand[j] = e < E ? score(e) + bias[e] : 0.0f;
    }
    for (int i = 0; i < k; ++i) {
      float best = -INFINITY;
      int best_e = E;
#pragma unroll
      for (int j = 0; j < kRoutePerLane; ++j) {
        const int e = lane + 32 * j;
        if (e >= E || ((taken >> j) & 1u)) continue;
        if (cand[j] > best || (cand[j] == best && e < best_e)) best = cand[j], best_e = e;
      }
      warp_argmax(best, best_e);
      if (lane == i) my_e = best_e;
      if (best_e < E && best_e % 32 == lane) taken |= 1u << (best_e / 32);
    }
  } else {
    int32_t chosen[16];
    // Any E: the same rounds, scores recomputed per round.
    for (int i = 0; i < k; ++i) {
      float best = -INFINITY;
      int best_e = E;
      for (int e = lane; e < E; e += 32) {
        bool taken = false;
        for (int j = 0; j < i; ++j) taken |= chosen[j] == e;
        if (taken) continue;
        const float v = score(e) + bias[e];
        if (v > best || (v == best && e < best_e)) best = v, best_e = e;
      }
      warp_argmax(best, best_e);
      chosen[i] = best_e;
      if (lane == i) my_e = best_e;
    }
  }
  // weights = route_scale * score / (the slots' scores summed in slot order).
  const float sc = lane < k ? score(my_e) : 0.0f;
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) sum += __shfl_sync(0xffffffffu, sc, i);
  if (lane < k) {
    sel[t * k + lane] = my_e;
    weights[t * k + lane] = route_scale * sc / sum;
  }
}

// One warp per token (moe_route_token).
__global__ void moe_route_kernel(const float* logits, const float* bias, const int64_t* tid2eid, const int32_t* ids,
                                 int64_t T, int E, int k, float route_scale, int32_t* sel, float* weights) {
  pdl_prologue();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= T) return;
  moe_route_token(logits, bias, tid2eid, ids, t, E, k, route_scale, sel, weights);
}

// counts[e] += 1 for every (token, slot) routed to e.
__global__ void moe_count_kernel(const int32_t* sel, int64_t n_pairs, int32_t* counts) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_pairs) atomicAdd(&counts[sel[i]], 1);
}

// By one block of up to 1024 threads: offsets[e] = sum of counts[0..e) (exclusive scan),
// offsets[E] = total; cursor = offsets copy (global or shared memory); active = the experts with
// pairs in ascending id, active[E] = how many. Integer scans, so the parallel order changes
// nothing.
__device__ inline void moe_scan_offsets(const int32_t* counts, int E, int32_t* offsets, int32_t* cursor,
                                        int32_t* active) {
  __shared__ int32_t warp_sum[32], warp_act[32];
  __shared__ int32_t carry_sum, carry_act;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) carry_sum = carry_act = 0;
  __syncthreads();
  for (int base = 0; base < E; base += blockDim.x) {
    const int e = base + threadIdx.x;
    const int32_t c = e < E ? counts[e] : 0;
    const int32_t a = c > 0 ? 1 : 0;
    int32_t sc = c, sa = a;  // inclusive warp scans
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t vc = __shfl_up_sync(0xffffffffu, sc, o), va = __shfl_up_sync(0xffffffffu, sa, o);
      if (lane >= o) sc += vc, sa += va;
    }
    if (lane == 31) warp_sum[warp] = sc, warp_act[warp] = sa;
    __syncthreads();
    if (warp == 0) {
      int32_t ws = lane < static_cast<int>(blockDim.x >> 5) ? warp_sum[lane] : 0;
      int32_t wa = lane < static_cast<int>(blockDim.x >> 5) ? warp_act[lane] : 0;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int32_t vs = __shfl_up_sync(0xffffffffu, ws, o), va = __shfl_up_sync(0xffffffffu, wa, o);
        if (lane >= o) ws += vs, wa += va;
      }
      warp_sum[lane] = ws;  // inclusive over warps
      warp_act[lane] = wa;
    }
    __syncthreads();
    const int32_t before_sum = carry_sum + (warp > 0 ? warp_sum[warp - 1] : 0) + sc - c;
    const int32_t before_act = carry_act + (warp > 0 ? warp_act[warp - 1] : 0) + sa - a;
    if (e < E) {
      offsets[e] = before_sum;
      cursor[e] = before_sum;
      if (a) active[before_act] = e;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      carry_sum += warp_sum[(blockDim.x >> 5) - 1];
      carry_act += warp_act[(blockDim.x >> 5) - 1];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    offsets[E] = carry_sum;
    active[E] = carry_act;
  }
}

__global__ void __launch_bounds__(1024) moe_offsets_kernel(const int32_t* counts, int E, int32_t* offsets, int32_t* cursor,
                                                            int32_t* active) {
  pdl_prologue();
  moe_scan_offsets(counts, E, offsets, cursor, active);
}

// Count, scan and scatter in one block (decode-sized batches: n_pairs <= kMoeGroupSmallPairs, E <=
// kMoeGroupSmallMaxE) with the counts and cursors in shared memory: one launch instead of a fill
// and three kernels. The same offsets and active list; the order within an expert is free as in
// moe_scatter_kernel.
inline constexpr int kMoeGroupSmallMaxE = 1024;
inline constexpr int64_t kMoeGroupSmallPairs = 16384;
// The expert GEMMs' activations FP8-quantised per block of 128 channels as BF16 — act_quant_bf16's
// bits — by the grouping launch that runs just before them, for batches so small that every CTA
// of the gate/up launch would otherwise quantise the same rows while staging them (at batch 1,
// ~28% of that launch's instructions in ncu). xq == nullptr: nothing to quantise.
struct MoeGroupQuant {
  const void* x = nullptr;  // [rows, width]: F32 when x_f32, else BF16; 16-byte aligned
  bool x_f32 = false;
  int64_t rows = 0, width = 0;  // width % 128 == 0
  __nv_bfloat16* xq = nullptr;  // [rows, width], 8-byte aligned
};
inline constexpr int64_t kMoeGroupQuantMaxBlocks = 512;  // rows x width / 128 the one CTA takes
// route.logits != nullptr: the block routes the batch first (one warp per token, as
// moe_route_kernel; route.T <= kMoeRouteGroupMaxTokens), so that the grouping needs no kernel of
// its own after the routing: at batch 1 a kernel boundary on the MoE's critical path costs more
// than the routing itself. sel is then the routing's output, written and read back by this block.
inline constexpr int64_t kMoeRouteGroupMaxTokens = 64;  // tokens the fused routing takes (2 per warp)
__global__ void __launch_bounds__(1024) moe_group_small_kernel(const int32_t* sel, int64_t n_pairs, int E, int32_t* offsets,
                                                                int32_t* active, int32_t* perm, MoeGroupQuant q,
                                                                MoeRouteParams route) {
  pdl_prologue();
  __shared__ int32_t s_count[kMoeGroupSmallMaxE], s_cursor[kMoeGroupSmallMaxE];
  for (int e = threadIdx.x; e < E; e += blockDim.x) s_count[e] = 0;
  // One warp per 128-channel block, 4 channels per lane (act_quant_bf16_vec_kernel<T, 4>'s
  // arithmetic); the loads go out before the grouping's barriers.
  if (q.xq != nullptr) {
    const int64_t blocks = q.rows * q.width / 128;
    for (int64_t b = threadIdx.x / 32; b < blocks; b += blockDim.x / 32) {
      const int64_t off = b * 128 + (threadIdx.x & 31) * 4;  // rows are whole blocks: flat offsets
      if (q.x_f32) {  // warp-uniform
        act_quant_lane<float, 4>(static_cast<const float*>(q.x), q.xq, off);
      } else {
        act_quant_lane<__nv_bfloat16, 4>(static_cast<const __nv_bfloat16*>(q.x), q.xq, off);
      }
    }
  }
  if (route.logits != nullptr) {
    for (int64_t t = threadIdx.x / 32; t < route.T; t += blockDim.x / 32)
      moe_route_token(route.logits, route.bias, route.tid2eid, route.ids, t, route.E, route.k, route.route_scale,
                      route.sel, route.weights);
  }
  __syncthreads();  // also makes the routing's sel (global memory) visible to the whole block
  for (int64_t i = threadIdx.x; i < n_pairs; i += blockDim.x) atomicAdd(&s_count[sel[i]], 1);
  __syncthreads();
  moe_scan_offsets(s_count, E, offsets, s_cursor, active);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n_pairs; i += blockDim.x)
    perm[atomicAdd(&s_cursor[sel[i]], 1)] = static_cast<int32_t>(i);
}

// perm[cursor[e]++] = pair index (t * k + i). Order within an expert does not matter: each output
// row of the expert GEMMs depends only on its own input row.
__global__ void moe_scatter_kernel(const int32_t* sel, int64_t n_pairs, int32_t* cursor, int32_t* perm) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_pairs) perm[atomicAdd(&cursor[sel[i]], 1)] = static_cast<int32_t>(i);
}

// One element of h: round(w * silu(min(g, L)) * clamp(u, -L, L)) — both swiglu kernels compute it
// through this function, so they give the same bits.
__device__ __forceinline__ float moe_swiglu_value(float gi, float ui, float w, float limit, bool bf16_round) {
  if (bf16_round) gi = round_bf16(gi), ui = round_bf16(ui);
  if (limit > 0.0f) {
    gi = fminf(gi, limit);
    ui = fminf(fmaxf(ui, -limit), limit);
  }
  const float v = w * (gi / (1.0f + expf(-gi)) * ui);
  return bf16_round ? round_bf16(v) : v;
}

// h[pair] = moe_swiglu_value for the pair rows [n_pairs, F].
__global__ void moe_swiglu_weight_kernel(const float* g, const float* u, const float* weights, int64_t n_pairs,
                                         int64_t F, float limit, bool bf16_round, float* h) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_pairs * F) return;
  h[i] = moe_swiglu_value(g[i], u[i], weights[i / F], limit, bf16_round);
}

// The same h, FP8-quantised per block of 128 channels and stored as BF16 — what
// act_quant_bf16_vec_kernel<float, 4> makes of moe_swiglu_weight_kernel's output, in one pass
// (the F32 h is never written: in an 8K prefill the two launches and h's round trip were ~3%).
// One warp per (pair, 128-channel block), 4 channels per lane; 8 warps per CTA. F % 128 == 0.
__global__ void __launch_bounds__(256) moe_swiglu_quant_kernel(const float* g, const float* u, const float* weights,
                                                               int64_t blocks, int64_t F, float limit,
                                                               bool bf16_round, __nv_bfloat16* hq) {
  pdl_prologue();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (b >= blocks) return;
  const int64_t off = b * 128 + (threadIdx.x & 31) * 4;  // rows are whole blocks: flat offsets
  const float w = weights[off / F];
  const float4 gv = *reinterpret_cast<const float4*>(g + off), uv = *reinterpret_cast<const float4*>(u + off);
  const float h[4] = {moe_swiglu_value(gv.x, uv.x, w, limit, bf16_round),
                      moe_swiglu_value(gv.y, uv.y, w, limit, bf16_round),
                      moe_swiglu_value(gv.z, uv.z, w, limit, bf16_round),
                      moe_swiglu_value(gv.w, uv.w, w, limit, bf16_round)};
  act_quant_lane_store<4>(h, hq + off);
}

// out[t] = sum over the token's k slots in ascending expert id of y[t*k + slot] (rounded to BF16
// first when the reference stores expert outputs in BF16), then + addend[t] (the shared expert's
// output, when given) and rounded to To: add_kernel's and convert_kernel's arithmetic, so one
// launch gives the bits of combine + add + convert.
// The slot order is sorted once per block into shared memory, and a thread loads all k values of
// a column before adding them (a per-thread sort in local memory and loads serialised behind the
// stores took 7 us of a batch-1 step).
// grid (T, D / chunk): the launcher takes chunks of 256 columns for decode-sized batches (one
// column per thread: a single round of loads; 1,024-column blocks walked 4 columns per thread in
// turn, ~3 us of a batch-1 layer) and of 1,024 for prefills (fewer blocks, each sorting once).
inline constexpr int kCombineMaxK = 16;
template <typename Ta, typename To>
__global__ void moe_combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ sel, int k, int64_t D,
                                   int64_t chunk, bool bf16_round, const Ta* __restrict__ addend,
                                   To* __restrict__ out) {
  pdl_prologue();
  __shared__ int32_t s_order[kCombineMaxK];
  const int64_t t = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * chunk, c1 = min64(D, c0 + chunk);
  if (threadIdx.x == 0) {
    int32_t id[kCombineMaxK];
    for (int i = 0; i < k; ++i) s_order[i] = i, id[i] = sel[t * k + i];
    for (int i = 1; i < k; ++i)  // insertion sort by expert id (stable)
      for (int j = i; j > 0 && id[s_order[j]] < id[s_order[j - 1]]; --j) {
        const int32_t tmp = s_order[j];
        s_order[j] = s_order[j - 1];
        s_order[j - 1] = tmp;
      }
  }
  __syncthreads();
  const float* rows[kCombineMaxK];
#pragma unroll
  for (int i = 0; i < kCombineMaxK; ++i) rows[i] = i < k ? y + (t * k + s_order[i]) * D : y;
  for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
    float v[kCombineMaxK];
#pragma unroll
    for (int i = 0; i < kCombineMaxK; ++i) v[i] = i < k ? rows[i][c] : 0.0f;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < kCombineMaxK; ++i)
      if (i < k) acc += bf16_round ? round_bf16(v[i]) : v[i];
    if (addend != nullptr) acc = acc + to_f32(addend[t * D + c]);
    out[t * D + c] = from_f32<To>(acc);
  }
}

}  // namespace deepinfer::kernels
