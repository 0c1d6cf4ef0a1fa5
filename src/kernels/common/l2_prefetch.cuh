// Bulk L2 prefetch (cp.async.bulk.prefetch.L2, sm_90: the TMA engine fetches a contiguous range
// into the L2 without registers or shared memory) of the weights a GEMM launch is handed
// (GemmParams::prefetch, planned by ops/l2_prefetch_chain.h).
#pragma once

#include <cstdint>

#include "kernels/launch.h"

namespace deepinfer::kernels {

// Fire and forget: nothing waits for it, and a CTA may exit before the bytes arrive.
__device__ __forceinline__ void bulk_prefetch_l2(const void* ptr, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr), "r"(bytes) : "memory");
#endif
}

// This CTA's share of p's prefetch spans: their concatenation cut into one slice of whole 16-byte
// units per CTA (so the launch's CTAs issue it in parallel), issued by thread 0 in pieces of at
// most 64 KB. Call before griddep_wait(): the weights are data no kernel writes.
__device__ __forceinline__ void issue_l2_prefetch_share(const GemmParams& p) {
  if (p.n_prefetch == 0 || threadIdx.x != 0) return;
  int64_t units = 0;
#pragma unroll
  for (int i = 0; i < GemmParams::kMaxPrefetch; ++i)
    if (i < p.n_prefetch) units += p.prefetch_bytes[i] / 16;
  const int64_t ctas = static_cast<int64_t>(gridDim.x) * gridDim.y * gridDim.z;
  const int64_t cta = blockIdx.x + static_cast<int64_t>(gridDim.x) *
                                       (blockIdx.y + static_cast<int64_t>(gridDim.y) * blockIdx.z);
  const int64_t per = (units + ctas - 1) / ctas;
  const int64_t lo = min(cta * per, units) * 16, hi = min((cta + 1) * per, units) * 16;
  int64_t base = 0;  // the span's first byte in the concatenation
#pragma unroll
  for (int i = 0; i < GemmParams::kMaxPrefetch; ++i) {
    if (i >= p.n_prefetch) break;
    const int64_t b = p.prefetch_bytes[i];
    for (int64_t x = max(lo, base); x < min(hi, base + b); x += 65536) {
      const int64_t piece = min(int64_t{65536}, min(hi, base + b) - x);
      bulk_prefetch_l2(p.prefetch[i] + (x - base), static_cast<uint32_t>(piece));
    }
    base += b;
  }
}

}  // namespace deepinfer::kernels
