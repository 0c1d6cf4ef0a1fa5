// L2 prefetch of byte ranges (weights an op issued soon will read) with the TMA's bulk prefetch
// (cp.async.bulk.prefetch.L2, sm_90): one instruction moves a whole chunk towards the L2 without
// registers, shared memory or a result, so a few small CTAs keep the HBM busy while the kernels
// beside them are latency bound. Fire and forget: the kernel ends once its chunks are issued and
// its predecessor is done; nothing waits for the bytes, and nothing changes if they never arrive.
#pragma once

#include <cstdint>

#include "kernels/common/device_utils.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {

inline constexpr int kL2PrefetchThreads = 64;
inline constexpr int64_t kL2PrefetchChunk = 16 * 1024;  // bytes per bulk prefetch

__device__ __forceinline__ void bulk_prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// Chunk i of the concatenated ranges goes to thread i mod (grid threads): the chunks in flight at
// any moment are spread over the ranges' start, so the first bytes an op reads arrive first.
__global__ void __launch_bounds__(kL2PrefetchThreads) l2_prefetch_kernel(L2PrefetchParams p) {
  // Weights only (no kernel writes them): the prefetches need not wait for the predecessor, and
  // the successor may start at once. The wait at the end keeps the stream order transitive (a
  // successor's wait on this kernel then also covers the kernels before it).
  griddep_launch_dependents();
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t chunk0 = 0;  // chunks of the ranges before r
  for (int r = 0; r < p.n; ++r) {
    const int64_t n_chunks = (p.bytes[r] + kL2PrefetchChunk - 1) / kL2PrefetchChunk;
    // This thread's first chunk of range r: the smallest i >= chunk0 with i = tid (mod n_threads).
    int64_t i = chunk0 + ((tid - chunk0) % n_threads + n_threads) % n_threads;
    for (; i < chunk0 + n_chunks; i += n_threads) {
      const int64_t off = (i - chunk0) * kL2PrefetchChunk;
      const int64_t len = p.bytes[r] - off < kL2PrefetchChunk ? p.bytes[r] - off : kL2PrefetchChunk;
      bulk_prefetch_l2(static_cast<const uint8_t*>(p.ptr[r]) + off, static_cast<uint32_t>(len));
    }
    chunk0 += n_chunks;
  }
  griddep_wait();
}

}  // namespace deepinfer::kernels
