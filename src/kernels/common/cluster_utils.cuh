// Thread-block cluster primitives (sm_90 PTX): the CTA's rank in its cluster, the cluster-wide
// barrier split into arrive and wait, and stores into another CTA's shared memory (distributed
// shared memory). On older architectures the functions trap (their kernels are never launched
// there: the launcher asks for clusters only on compute capability 9+).
#pragma once

#include <cstdint>

#include "kernels/common/mma_utils.cuh"

namespace deepinfer::kernels {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define DEEPINFER_NO_CLUSTERS 1
#endif

__device__ __forceinline__ int cluster_cta_rank() {
#ifdef DEEPINFER_NO_CLUSTERS
  __trap();
  return 0;
#else
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return static_cast<int>(r);
#endif
}

// Every thread of every CTA of the cluster arrives (release: its earlier writes, local and
// remote, are ordered before the barrier completes) ...
__device__ __forceinline__ void cluster_arrive() {
#ifdef DEEPINFER_NO_CLUSTERS
  __trap();
#else
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
// The same arrival without release semantics (no memory fence): a barrier that orders no memory,
// such as "every CTA of the cluster has started" before the first remote store.
__device__ __forceinline__ void cluster_arrive_relaxed() {
#ifdef DEEPINFER_NO_CLUSTERS
  __trap();
#else
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}
// ... and waits for all of them (acquire: their writes are visible after it).
__device__ __forceinline__ void cluster_wait() {
#ifdef DEEPINFER_NO_CLUSTERS
  __trap();
#else
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

// The shared::cluster address of `p` (a variable of this CTA's shared memory) in CTA `rank`.
__device__ __forceinline__ uint32_t cluster_map(const void* p, int rank) {
#ifdef DEEPINFER_NO_CLUSTERS
  __trap();
  return 0;
#else
  uint32_t a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(a) : "r"(smem_addr(p)), "r"(rank));
  return a;
#endif
}
// Two floats to a shared::cluster address (8-byte aligned).
__device__ __forceinline__ void cluster_store_f2(uint32_t addr, float x, float y) {
#ifdef DEEPINFER_NO_CLUSTERS
  __trap();
#else
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
#endif
}

// A float from a shared::cluster address.
__device__ __forceinline__ float cluster_load_f32(uint32_t addr) {
#ifdef DEEPINFER_NO_CLUSTERS
  __trap();
  return 0.0f;
#else
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
#endif
}

}  // namespace deepinfer::kernels
