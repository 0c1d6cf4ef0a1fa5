// The cluster-size choice shared by the kernels that spread one CTA's work over a thread-block
// cluster with the same bits (plain C++, no CUDA: tested on the CPU through its callers' plans).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

// `want`: -1 = automatic, 0 or 1 = no cluster, 2 / 4 / 8 = that size where `supports(c)` allows it.
// Automatic: the largest c of 8, 4, 2 that the shape supports and whose `clusters` clusters all run
// at once (`max_clusters(c)`: how many the device runs at once, 0 where it cannot), since more than
// fit would queue behind each other. Returns 1 for no cluster.
template <typename Supports, typename MaxClusters>
int plan_cluster_size(int64_t clusters, int want, Supports&& supports, MaxClusters&& max_clusters) {
  if (want >= 0) return want >= 2 && supports(want) ? want : 1;
  for (int c : {8, 4, 2}) {
    if (supports(c) && clusters <= max_clusters(c)) return c;
  }
  return 1;
}

}  // namespace deepinfer::kernels
