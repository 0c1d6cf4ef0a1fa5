// Hopper warpgroup MMA primitives (sm_90a PTX: wgmma.mma_async), for the large-M GEMM. A
// warpgroup is 4 consecutive warps; in m64nNk16 warp w of the group owns rows 16 w .. 16 w + 15,
// and both its A fragment (when A comes from registers) and its slice of D have exactly the
// mma.m16n8k16 layouts of mma_utils.cuh (D: n8 tile j in registers 4 j .. 4 j + 3). Measured on
// the H200 (tools/device/probes/wgmma_probe.cu): a chain of wgmma k16 steps gives the same F32
// bits as the same chain of mma.sync.m16n8k16 steps, so both can serve one canonical order.
#pragma once

#include <cstdint>

#include "kernels/common/mma_utils.cuh"

namespace deepinfer::kernels {

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DEEPINFER_NO_WGMMA 1  // device pass for an architecture without wgmma: the kernels trap
#endif

// Shared-memory matrix descriptor without swizzling: the operand is a grid of core matrices of
// 8 rows x 16 bytes (128 contiguous bytes each); lbo = bytes between core matrices adjacent in
// K, sbo = bytes between core matrices adjacent in M / N.
__device__ __forceinline__ uint64_t wgmma_desc(const void* smem, uint32_t lbo, uint32_t sbo) {
  return (static_cast<uint64_t>(smem_addr(smem) >> 4) & 0x3fff) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

__device__ __forceinline__ void wgmma_fence() {
#ifndef DEEPINFER_NO_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifndef DEEPINFER_NO_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifndef DEEPINFER_NO_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Orders this thread's generic-proxy shared-memory writes before later async-proxy reads of them
// (wgmma operands taken from shared memory by descriptor).
__device__ __forceinline__ void fence_proxy_async() {
#ifndef DEEPINFER_NO_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving accesses of accumulator registers across the asynchronous
// region (between the MMA issue and the wait).
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Moves registers between the warpgroups of a warp-specialised kernel (setmaxnreg): every warp
// of a warpgroup executes it; N per thread, a multiple of 8 in [24, 256]. Producers release
// registers (dec), consumers take them (inc), within the CTA's launch-time allocation.
template <int N>
__device__ __forceinline__ void warpgroup_regs_dec() {
#ifndef DEEPINFER_NO_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void warpgroup_regs_inc() {
#ifndef DEEPINFER_NO_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// The 64 F32 accumulators of an m64n128 wgmma as asm operands %0 .. %63 ("+f": read and written).
#define DI_WGMMA_D64_REGS                                                                                         \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29," \
  "%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,"   \
  "%57,%58,%59,%60,%61,%62,%63}"
#define DI_WGMMA_D64_OPERANDS(d)                                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),     \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),       \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),      \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),      \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),      \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),      \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),      \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// The 32 F32 accumulators of an m64n64 wgmma as asm operands %0 .. %31.
#define DI_WGMMA_D32_REGS \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29," \
  "%30,%31}"
#define DI_WGMMA_D32_OPERANDS(d)                                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),     \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),       \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),      \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// The 16 F32 accumulators of an m64n32 wgmma as asm operands %0 .. %15.
#define DI_WGMMA_D16_REGS "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define DI_WGMMA_D16_OPERANDS(d)                                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),     \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])

// D[64 x 128] += A[64 x 16] (registers, BF16) B[16 x 128] (shared memory, K-major, descriptor);
// F32 accumulate. d: this thread's 64 accumulators (16 n8 tiles x 4).
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b_desc) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " DI_WGMMA_D64_REGS
      ", {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
      : DI_WGMMA_D64_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
#endif
}

// D[64 x 32] += A[64 x 16] (registers, BF16) B[16 x 32] (shared memory, K-major, descriptor); F32
// accumulate. d: this thread's 16 accumulators (4 n8 tiles x 4).
__device__ __forceinline__ void wgmma_m64n32k16_rs(float (&d)[16], const uint32_t (&a)[4], uint64_t b_desc) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      DI_WGMMA_D16_REGS ", {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
      : DI_WGMMA_D16_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
#endif
}
// D[64 x N] += A[64 x 16] (registers) B[16 x N] (shared memory) for N = 8, 16, 24 or 32, on the
// first N / 2 of d's 16 accumulators (the n8 tiles 0 .. N / 8 - 1 of the m64n32 layout): the
// narrow token tiles of the swapped expert kernel run only the MMA columns they have tokens for.
template <int N>
__device__ __forceinline__ void wgmma_m64nk16_rs_narrow(float (&d)[16], const uint32_t (&a)[4], uint64_t b_desc) {
  static_assert(N == 8 || N == 16 || N == 24 || N == 32);
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  if constexpr (N == 32) {
    wgmma_m64n32k16_rs(d, a, b_desc);
  } else if constexpr (N == 24) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, %16, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  } else if constexpr (N == 16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
  }
#endif
}

// The register-A form for N = 128 or 32 columns (R = N / 2 accumulators).
template <int R>
__device__ __forceinline__ void wgmma_m64k16_rs(float (&d)[R], const uint32_t (&a)[4], uint64_t b_desc) {
  static_assert(R == 64 || R == 16);
  if constexpr (R == 64) {
    wgmma_m64n128k16_rs(d, a, b_desc);
  } else {
    wgmma_m64n32k16_rs(d, a, b_desc);
  }
}

// D[64 x 128] += A[64 x 16] B[16 x 128], both from shared memory (descriptors; A K-major, B
// K-major, or MN-major with TB = 1: B's 16 rows of K each holding the 128 columns, lbo = bytes
// between core matrices adjacent in K, sbo = adjacent in N); F32 accumulate. Same accumulation
// as the register-A form (tools/device/probes/wgmma_probe.cu: the shared-memory A chain is
// bitwise the mma.sync chain too).
template <int TB = 0>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t a_desc, uint64_t b_desc) {
  static_assert(TB == 0 || TB == 1);
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " DI_WGMMA_D64_REGS
      ", %64, %65, p, 1, 1, 0, %66;\n}\n"
      : DI_WGMMA_D64_OPERANDS(d)
      : "l"(a_desc), "l"(b_desc), "n"(TB));
#endif
}

// D[64 x 32] += A[64 x 16] B[16 x 32], both from shared memory (K-major, descriptors); F32
// accumulate. d: this thread's 16 accumulators (4 n8 tiles x 4).
__device__ __forceinline__ void wgmma_m64n32k16_ss(float (&d)[16], uint64_t a_desc, uint64_t b_desc) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      DI_WGMMA_D16_REGS ", %16, %17, p, 1, 1, 0, 0;\n}\n"
      : DI_WGMMA_D16_OPERANDS(d)
      : "l"(a_desc), "l"(b_desc));
#endif
}

// D[64 x 16] += A[64 x 16] B[16 x 16], both from shared memory (K-major, descriptors); F32
// accumulate. d: this thread's 8 accumulators (2 n8 tiles x 4).
__device__ __forceinline__ void wgmma_m64n16k16_ss(float (&d)[8], uint64_t a_desc, uint64_t b_desc) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a_desc), "l"(b_desc));
#endif
}
// The shared-memory form for N = 32 or 16 columns (R = N / 2 accumulators).
template <int R>
__device__ __forceinline__ void wgmma_m64k16_ss(float (&d)[R], uint64_t a_desc, uint64_t b_desc) {
  static_assert(R == 16 || R == 8);
  if constexpr (R == 16) {
    wgmma_m64n32k16_ss(d, a_desc, b_desc);
  } else {
    wgmma_m64n16k16_ss(d, a_desc, b_desc);
  }
}

}  // namespace deepinfer::kernels
