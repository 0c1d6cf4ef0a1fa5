// Hopper bulk asynchronous copies (cp.async.bulk: the TMA engine without a tensor map, for
// contiguous blocks) and the shared-memory transaction barriers (mbarrier) that track them: a
// producer thread arms a barrier with the bytes it expects, issues the copies, and consumers wait
// on the barrier's phase. sm_90 PTX; on other architectures the functions trap (their kernels
// are never launched there).
#pragma once

#include <cstdint>

#include "kernels/common/mma_utils.cuh"

namespace deepinfer::kernels {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define DEEPINFER_NO_BULK_COPY 1
#endif

// One barrier expecting `arrivals` arrivals per phase.
__device__ __forceinline__ void mbar_init(uint64_t* bar, int arrivals) {
#ifdef DEEPINFER_NO_BULK_COPY
  __trap();
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
#endif
}
// Makes the initialised barriers visible to the async proxy (the bulk copies that complete on
// them); the caller then synchronises the CTA.
__device__ __forceinline__ void mbar_init_fence() {
#ifndef DEEPINFER_NO_BULK_COPY
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// Arrives once and adds `bytes` to the transactions the current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifndef DEEPINFER_NO_BULK_COPY
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifndef DEEPINFER_NO_BULK_COPY
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}
// One arrival on `bar` once every cp.async this thread issued so far has completed (their writes
// then visible to the barrier's waiters); counts against the barrier's expected arrivals (noinc).
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint64_t* bar) {
#ifndef DEEPINFER_NO_BULK_COPY
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}
// Blocks until the barrier's phase with the given parity (0, 1, 0, ... per completed phase) is
// complete.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#ifndef DEEPINFER_NO_BULK_COPY
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}
// mbar_wait for a warp that may wait long and has nothing else to do (a producer whose ring is
// full): each try suspends the thread up to `hint_ns` unless the phase completes first, instead of
// the system's short default — the swapped expert kernels' producers spun ~20 times per stage,
// 8% of the FP8 kernel's issued instructions on the consumers' schedulers (ncu, session 50).
__device__ __forceinline__ void mbar_wait_idle(uint64_t* bar, uint32_t parity, uint32_t hint_ns = 100000) {
#ifndef DEEPINFER_NO_BULK_COPY
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1, %2;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity), "r"(hint_ns)
      : "memory");
#endif
}
// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory
// and completes them as transactions on `bar`.
__device__ __forceinline__ void bulk_copy_g2s(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar) {
#ifdef DEEPINFER_NO_BULK_COPY
  __trap();
#else
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(smem)),
               "l"(gmem), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
#endif
}

}  // namespace deepinfer::kernels
