// Cluster size of a decode-sized mHC finalize (plain C++, no CUDA: tested on the CPU). The cluster
// kernel (hc_cluster.cuh) spreads one token's collapse u = sum_i pre_i X_i and its folded RMS norm
// over C CTAs of 256 threads with the same bits as the one-CTA finalize (hc.cuh), whose 1,024
// threads per token were instruction-issue bound on one SM at batch 1 (ncu: ~8.6 us per launch,
// 36K warp-instructions on 2 SMs, 0.55 instructions per scheduler cycle). The default since session
// 27: 5.8-6.7 us per launch under ncu, the replayed batch-1 step's GPU span 2.3% shorter.
#pragma once

#include <cstdint>

#include "kernels/common/cluster_size.h"

namespace deepinfer::kernels {

inline constexpr int kHcClusterThreads = 256;     // per CTA: the folded norm's 256 summing threads
inline constexpr int64_t kHcClusterMaxD = 4096;   // the folded norm's widest row (kRmsRowMaxN)
inline constexpr int64_t kHcClusterMaxTokens = 63;  // decode-sized launches (the finalize's 1,024-thread form)

// C CTAs per token over hidden width D with hc streams: C in {2, 4, 8}, each CTA a whole number of
// 128-channel quantisation blocks and of its threads' column pairs (D / C a multiple of 512), the
// row within the folded norm's width, and the V4 stream count (the kernel is instantiated for 4).
constexpr bool hc_cluster_supports(int64_t D, int hc, int c) {
  return (c == 2 || c == 4 || c == 8) && hc == 4 && D > 0 && D <= kHcClusterMaxD &&
         D % (2 * kHcClusterThreads * c) == 0;
}

// The size for a finalize of T tokens (the norm folded: `folds_norm`). `want`: -1 = automatic;
// 0 or 1 = the one-CTA kernel; 2 / 4 / 8 = that size where the shape allows it. Automatic: the
// largest C whose 2 T clusters (each token's collapse, and its Sinkhorn plane) all run at once —
// `max_clusters(c)`: how many clusters of c CTAs the device runs at once (0: none). Returns 1 for
// the one-CTA kernel.
template <typename MaxClusters>
int plan_hc_cluster(int64_t T, int64_t D, int hc, bool folds_norm, int want, MaxClusters&& max_clusters) {
  if (!folds_norm || T < 1 || T > kHcClusterMaxTokens) return 1;
  return plan_cluster_size(2 * T, want, [&](int c) { return hc_cluster_supports(D, hc, c); }, max_clusters);
}

}  // namespace deepinfer::kernels
