// The decode-sized mHC finalize over a cluster of C CTAs per token (hc_cluster_plan.h says when):
// the one-CTA finalize (hc.cuh, hc_pre_finalize with the norm folded) runs a token's collapse, RMS
// norm and quantised copy on 1,024 threads of one SM, where at batch 1 it was issue bound (~850
// warp-instructions per warp, 32 warps on 4 schedulers: ~8.6 us a launch, 8 launches a step).
// Here CTA r of the token's cluster takes columns [r D / C, (r + 1) D / C):
//   1. every CTA computes the mix columns and pre itself (hc_mix_columns: the same loads and sums
//      in every warp, as in the one-CTA kernel), collapses its columns' streams in stream order
//      and rounds each value to Tu — the one-CTA kernel's staged u, value for value;
//   2. it stores those values into every CTA's copy of the row (distributed shared memory), so
//      after one cluster barrier each CTA holds the whole staged row;
//   3. each CTA runs the folded norm's reduction over the whole row with hc_fold_norm's own
//      helper (hc_norm_inv: its 8 warps' sums where the 1,024-thread block had 32, the other 24
//      being exact zeros in the same butterfly), so inv has the same bits, then writes u and the
//      quantised copy (hc_quant_block) of its own columns with the same expressions.
// Sinkhorn (post, comb) runs in a plane of its own (blockIdx.z = 1: warp 0 of the cluster's CTA 0,
// the other CTAs exit), beside the collapse as in the one-CTA kernel's second block.
// The default below 64 tokens since session 27 (DEEPINFER_HC_CLUSTER=0: the one-CTA kernel): on
// the H200 a launch takes 5.8-6.7 us under ncu instead of 8.0-9.1, and the replayed batch-1
// step's GPU span is 2.3% shorter (kernel timelines; the tok/s A/Bs of session 26 were within the
// spread of the host's share of the step).
#pragma once

#include "kernels/common/cluster_utils.cuh"
#include "kernels/gemm/act_quant.cuh"
#include "kernels/norm/hc.cuh"
#include "kernels/norm/hc_cluster_plan.h"

namespace deepinfer::kernels {

// grid (C, T, 2), clusters of (C, 1, 1), kHcClusterThreads threads; needs p.fold_norm and
// hc_cluster_supports(p.D, HC, C).
template <typename T, typename Tu, int HC, int C>
__global__ void __launch_bounds__(kHcClusterThreads)
    hc_pre_finalize_cluster_kernel(const T* x, const float* partial, HcPreParams p, Tu* u, float* post_out,
                                   float* comb_out) {
  constexpr int kPairs = static_cast<int>(kHcClusterMaxD / (C * 2 * kHcClusterThreads));  // pairs per thread, at most
  __shared__ __align__(16) float s_row[kHcClusterMaxD];  // [D] the token's staged u (every CTA's columns)
  __shared__ float scratch[32];
  const int64_t t = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5;
  if (blockIdx.z == 1) {  // the Sinkhorn plane
    pdl_prologue();
    if (blockIdx.x == 0 && warp == 0) {
      hc_sinkhorn_warp<HC>(hc_mix_columns<HC>(partial, p, t), p, post_out + t * HC, comb_out + t * HC * HC);
    }
    return;
  }
  const int rank = cluster_cta_rank();
  const int64_t S = p.D / C, c_begin = rank * S;  // this CTA's columns
  // The thread's column pairs (c, c + 1), c = c_begin + 2 tid + 512 k: their norm weights before
  // the wait (weights: no kernel writes them).
  float w[kPairs][2];
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    const int64_t c = c_begin + 2 * tid + 2 * kHcClusterThreads * k;
#pragma unroll
    for (int e = 0; e < 2; ++e) w[k][e] = c < c_begin + S ? hc_norm_weight(p, c + e) : 1.0f;
  }
  cluster_arrive();  // this CTA runs: the others may store into its row once everyone has arrived
  pdl_prologue();
  // The streams of the thread's columns (the previous kernel's output), loaded before the mix
  // columns so that the two load latencies overlap.
  float xv[kPairs][2][HC];
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    const int64_t c = c_begin + 2 * tid + 2 * kHcClusterThreads * k;
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int i = 0; i < HC; ++i) xv[k][e][i] = c < c_begin + S ? to_f32(x[(t * HC + i) * p.D + c + e]) : 0.0f;
  }
  const HcMix m = hc_mix_columns<HC>(partial, p, t);
  float pre[HC];
  hc_pre_weights<HC>(m, p, pre);
  uint32_t row_at[C];  // s_row in each CTA of the cluster
#pragma unroll
  for (int q = 0; q < C; ++q) row_at[q] = cluster_map(s_row, q);
  cluster_wait();  // every CTA of the cluster has started
  // u's column c: sum_i pre_i X_i in stream order, rounded to Tu (the one-CTA kernel's `put`).
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    const int64_t c = c_begin + 2 * tid + 2 * kHcClusterThreads * k;
    if (c >= c_begin + S) break;
    float v[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float acc = 0.0f;
#pragma unroll
      for (int i = 0; i < HC; ++i) acc += pre[i] * xv[k][e][i];
      v[e] = to_f32(from_f32<Tu>(acc));
    }
#pragma unroll
    for (int q = 0; q < C; ++q) cluster_store_f2(row_at[q] + static_cast<uint32_t>(4 * c), v[0], v[1]);
  }
  cluster_arrive();
  cluster_wait();  // the whole row is in every CTA (no remote access after this)

  const float inv = hc_norm_inv(s_row, p, scratch);  // the folded norm's, over the whole row
  Tu* row = u + t * p.D;
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    const int64_t c = c_begin + 2 * tid + 2 * kHcClusterThreads * k;
    if (c >= c_begin + S) break;
#pragma unroll
    for (int e = 0; e < 2; ++e) row[c + e] = from_f32<Tu>(s_row[c + e] * inv * w[k][e]);
  }
  if (p.uq != nullptr) {  // warp w quantises the CTA's 128-channel blocks w, w + 8, ..
    for (int64_t b = c_begin / 128 + warp; b < (c_begin + S) / 128; b += kHcClusterThreads / 32) {
      hc_quant_block<Tu>(s_row, inv, p, b, p.uq + t * p.D);
    }
  }
}

}  // namespace deepinfer::kernels
