// The weight loads of the streaming decode kernels (lean_gemv.cuh, fp8_gemv.cuh): 16 bytes per
// lane, no L1 allocation, whole 128-byte lines fetched into the L2, under an L2 eviction policy.
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

// The L2 policy of the weight loads: evict-first (LeanGemvShape::evict_first), else evict-normal
// (the A/B switch's plain treatment). One policy register chosen once per thread, so that every
// weight load is one instruction — a runtime choice per load between a hinted and a plain load
// issued both (one predicated off) per 16 bytes: measured on the H200, batch 1 +0.2%, batch 8
// +0.8% (ABAB, ab_lean_policy_native_fp8_h200_2026-12-06.json).
__device__ __forceinline__ uint64_t weight_l2_policy(bool evict_first) {
  uint64_t first, normal;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(first));
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(normal));
  return evict_first ? first : normal;
}

// 16 weight bytes a lane streams: read once (no L1 allocation), the L2 fetching the whole 128-byte
// line so the next window of the row is an L2 hit, under the L2 policy `pol`. Volatile: the issue
// order is the prefetch.
__device__ __forceinline__ uint4 ldg_weight16(const uint8_t* p, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(pol));
  return v;
}

// The same load into v only when `pred` (v keeps its value otherwise). Predicated inside the asm,
// with v read and written in place: a conditional C++ load into a register array made ptxas load
// into temporaries and merge them with predicated moves right after the issue — moves that wait
// for the data, so the kernel stalled on its weight loads before doing anything else (fp8_gemv's
// prologue, ncu on the H100).
__device__ __forceinline__ void ldg_weight16_if(uint4& v, const uint8_t* p, uint64_t pol, bool pred) {
  asm volatile(
      "{\n.reg .pred q;\nsetp.ne.b32 q, %5, 0;\n"
      "@q ld.global.nc.L1::no_allocate.L2::cache_hint.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4], %6;\n}\n"
      : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
      : "l"(p), "r"(static_cast<int>(pred)), "l"(pol));
}

// Asks the L2 for `bytes` of weights (a multiple of 16 at a 16-byte aligned address) ahead of their
// register loads, under the L2 policy `pol`: sm_90's bulk prefetch, which holds no registers and
// waits for nothing, so a warp can keep more of its stream in flight than its ring of registers
// (DEEPINFER_GEMM_L2_PREFETCH; the loads that follow hit the L2 or the lines' fills in flight).
__device__ __forceinline__ void l2_prefetch_weights(const uint8_t* p, uint32_t bytes, uint64_t pol) {
  asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p), "r"(bytes), "l"(pol) : "memory");
}

}  // namespace deepinfer::kernels
