// Warp-level tensor-core and asynchronous-copy primitives (sm_80+ PTX: mma.sync, ldmatrix,
// cp.async), shared by the GEMM and attention kernel families. Fragment layouts follow the PTX
// ISA for mma.m16n8k16 with 16-bit operands: lane = 4 g + c holds A rows g, g + 8 at columns
// 2c, 2c + 1 (+ 8), B column g at rows 2c, 2c + 1 (+ 8), C rows g, g + 8 at columns 2c, 2c + 1.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

// Two floats as a BF16 pair (round to nearest even), lo in the low half: one fragment register.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// D = A B + D; A 16 x 16 row-major, B 16 x 8 column-major, BF16 in, F32 accumulate.
__device__ __forceinline__ void mma_bf16_16816(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// v, through a volatile asm: a value the compiler cannot compute before the point of the call
// (volatile asms keep their order, e.g. after a barrier), so the plain asms that read memory
// through it (lds128) are not hoisted above that point.
__device__ __forceinline__ uint32_t launder_u32(uint32_t v) {
  asm volatile("mov.b32 %0, %0;" : "+r"(v));
  return v;
}
// 16 bytes from shared memory at `addr` (smem_addr), 16-byte aligned. Not volatile (the compiler
// may schedule it freely): the caller orders it after the writes through the address (launder_u32).
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

// Four 8 x 8 16-bit matrices; lanes 8i .. 8i + 7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}
// Two 8 x 8 16-bit matrices, transposed (lanes 0 .. 15 give row addresses): a B fragment from a
// row-major [k][n] tile.
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t* r, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(row)));
}
// Four transposed 8 x 8 matrices: B fragments of two adjacent n8 tiles.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// 16-byte global -> shared copy, bypassing L1; !valid writes 16 zero bytes (gmem must still be a
// valid address).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
// The same with an L2 prefetch hint: the L2 fetches the whole naturally aligned 128-byte line
// around the copy, so the next copies of a streamed row hit in L2 (a performance hint only).
__device__ __forceinline__ void cp_async16_l2_128(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
// 4-byte copy; !valid writes 4 zero bytes (gmem must still be a valid address).
__device__ __forceinline__ void cp_async4_zfill(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace deepinfer::kernels
