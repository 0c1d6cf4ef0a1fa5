// Cluster size of a decode-sized tensor-core attention launch (plain C++, no CUDA: tested on the
// CPU). The cluster kernel (sparse_attention_cluster.cuh) spreads the work of each (token, 16
// heads) CTA of the one-CTA mma.sync kernel over C CTAs with the same bits, so the size may follow
// the launch: the largest C whose clusters all run at once, else none (more clusters than fit
// would queue behind each other, and a one-CTA launch that fills the GPU gains nothing from them).
#pragma once

#include <cstdint>

#include "kernels/common/cluster_size.h"

namespace deepinfer::kernels {

inline constexpr int kClusterAttnWarps = 8;  // warps per CTA (kMmaAttnWarps)

// C CTAs per (token, 16 heads) at head_dim d: 2, 4 or 8, each warp of each CTA keeping at least
// one n8 column tile of P.V (d / C >= 64); d one of the tensor-core kernel's 64 / 128 / 256 / 512.
constexpr bool cluster_attention_supports(int64_t d, int c) {
  return (d == 64 || d == 128 || d == 256 || d == 512) && (c == 2 || c == 4 || c == 8) &&
         d % (8 * kClusterAttnWarps * c) == 0;
}

// The size for a launch of `head_groups` (token, 16 heads) CTAs at head_dim d. `want`: -1 =
// automatic; 0 or 1 = the one-CTA kernel; 2 / 4 / 8 = that size where d allows it, else none.
// `max_clusters(c)`: how many clusters of c CTAs the device runs at once (0: none). Returns 1 for
// the one-CTA kernel.
template <typename MaxClusters>
int plan_attention_cluster(int64_t d, int64_t head_groups, int want, MaxClusters&& max_clusters) {
  return plan_cluster_size(
      head_groups, want, [&](int c) { return cluster_attention_supports(d, c); }, max_clusters);
}

}  // namespace deepinfer::kernels
