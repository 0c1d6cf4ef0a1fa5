// FP8-operand large-M GEMM in the FP8 order of fp8_gemv.cuh (its header defines the order): dense
// FP8 weights (128 x 128 UE8M0 blocks) x activations FP8-quantised per 128 inputs, more than 8
// rows — so that a row's bits do not depend on how many rows share its launch.
//
// Two launches:
//   * fp8_act_codes_kernel: each (row, 128-input block) of A re-derived as E4M3 codes and a scale
//     exactly as fp8_gemv_kernel's staging does, the codes written in the decode kernel's k32-step
//     order (row bytes [step][32 logical positions]: physical input 64 w + 16 c + 8 s + 4 h + j at
//     step 2 w + s, position 16 h + 4 c + j), so the GEMM copies a token's step as two 16-byte
//     core-matrix rows; scales [M][K / 128] F32.
//   * fp8_gemm_kernel: CTA = one warpgroup, 64 output columns (wgmma's M: weight rows) x 64 tokens
//     (N), all of K: per 128-input block the weights are copied into the same permuted K-major
//     layout with 4-byte cp.async (the permutation no 16-byte copy can make: docs/cuda.md "Session
//     45"), the codes with 16-byte ones, through a ring of kFp8GemmStages blocks; per block four
//     wgmma.m64n64k32 steps from zero (both operands from shared memory: the probe found this form
//     bitwise the decode kernel's register-A m64n8k32 one), promoted as fmaf(part, sw * sa, sum),
//     each sub-range's sum added in order into the total.
// Not yet run on a GPU (written in session 45 after the device time was spent): behind
// DEEPINFER_GEMM_FP8_ORDER=1 like the decode kernel.
#pragma once

#include <cuda_fp8.h>

#include "kernels/common/wgmma_utils.cuh"
#include "kernels/gemm/fp8_gemv.cuh"

namespace deepinfer::kernels {

static_assert(kFp8GemmCtaTokens == 64, "the kernel is written for wgmma.m64n64k32");
inline constexpr int kFp8GemmStages = 4;   // 128-input blocks in the ring
// Bytes of one ring stage: A (4 steps x 64 rows x 32) + B (4 steps x 64 tokens x 32) + 64 scales.
inline constexpr int kFp8GemmStageBytes = 2 * 4 * 64 * 32 + 64 * 4;
inline constexpr int kFp8GemmSmem = kFp8GemmStages * kFp8GemmStageBytes;

// D[64 x 64] (+)= A[64 x 32] B[32 x 64], both E4M3 from shared memory (descriptors); d: the
// thread's 32 accumulators (8 n8 tiles x 4).
__device__ __forceinline__ void wgmma_m64n64k32_e4m3_ss(float (&d)[32], uint64_t a_desc, uint64_t b_desc,
                                                        bool accumulate) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,"
      "%28,%29,%30,%31}, %32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#endif
}

// grid: (M * K / 128 / 8) CTAs of 128 threads; a half-warp per (row, block) as in the decode
// staging. A: BF16 rows FP8-quantised per 128 (a_fp8_block). codes [M][K], scales [M][K / 128].
__global__ void __launch_bounds__(128) fp8_act_codes_kernel(const __nv_bfloat16* A, int64_t lda, int64_t M, int64_t K,
                                                            uint8_t* codes, float* scales) {
  pdl_prologue();
  const int64_t kb_per_row = K / kFp8GemvBlock;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 16;  // (row, block)
  if (item >= M * kb_per_row) return;  // whole half-warps: the shuffles below stay within one
  const int64_t r = item / kb_per_row, b = item - r * kb_per_row;
  const int q = threadIdx.x & 15;
  const int64_t k = b * kFp8GemvBlock + 8 * q;
  float v[8];
  bf16x8_to_f32(*reinterpret_cast<const uint4*>(A + r * lda + k), v);
  uint32_t lo, hi;
  const float s = fp8_block_codes(v, half_warp_amax(v, 0xffffu << (threadIdx.x & 16)), lo, hi);
  uint8_t* row = codes + r * K;
  *reinterpret_cast<uint32_t*>(row + fp8_code_offset(k)) = lo;        // positions 4c .. 4c + 3 (h = 0)
  *reinterpret_cast<uint32_t*>(row + fp8_code_offset(k) + 16) = hi;   // h = 1
  if (q == 0) scales[r * kb_per_row + b] = s;
}

// grid: (column tiles of set 0 + set 1, token tiles). codes / scales: fp8_act_codes_kernel's.
// tiles0: column tiles of weight set 0; out_shift: log2 of the weights' block_out.
__global__ void __launch_bounds__(128) fp8_gemm_kernel(GemmParams p, const uint8_t* codes, const float* scales,
                                                       int tiles0, int out_shift) {
  extern __shared__ __align__(128) uint8_t smem[];
  griddep_launch_dependents();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int set = p.n_sets > 1 && static_cast<int>(blockIdx.x) >= tiles0 ? 1 : 0;
  const WeightDesc& w = set == 0 ? p.w : p.w1;
  const int64_t N = set == 0 ? p.N : p.N1, ldc = set == 0 ? p.ldc : p.ldc1;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) - set * tiles0) * kFp8GemvCols;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kFp8GemmCtaTokens;
  const int64_t K = p.K, kb_count = K / kFp8GemvBlock;
  const int R_blocks = static_cast<int>(gemm_subrange(K) / kFp8GemvBlock);  // blocks per sub-range

  // Stage st: A at + 0 ([step][64 rows x 32], core matrices: (r / 8) 256 + h 128 + (r % 8) 16 + pos),
  // B at + 8192 (the same for 64 tokens), the tokens' scales at + 16384.
  auto stage = [&](int st) { return smem + st * kFp8GemmStageBytes; };
  // Block kb into stage st: the weights with 4-byte copies into their permuted positions (thread
  // t: row t / 2, half the row's 128 bytes), the codes and scales with 16- and 4-byte copies.
  auto load_block = [&](int64_t kb, int st) {
    uint8_t* sa = stage(st);
    {
      const int r = threadIdx.x >> 1, wi = threadIdx.x & 1;  // row, 64-byte window of the block
      const uint8_t* src = w.w + min64(n0 + r, N - 1) * w.row_bytes + kb * kFp8GemvBlock + wi * 64;
#pragma unroll
      for (int q = 0; q < 16; ++q) cp_async4(sa + fp8_weight_stage_offset(r, wi, q), src + 4 * q);
    }
    uint8_t* sb = sa + 8192;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // (token, step, half): 512 16-byte copies
      const int idx = threadIdx.x + 128 * i, m = idx >> 3, st4 = (idx >> 1) & 3, h = idx & 1;
      const bool valid = m0 + m < p.M;
      const uint8_t* src = codes + min64(m0 + m, p.M - 1) * K + (kb * 4 + st4) * 32 + h * 16;
      cp_async16(sb + st4 * 2048 + (m >> 3) * 256 + h * 128 + (m & 7) * 16, src, valid);
    }
    if (threadIdx.x < kFp8GemmCtaTokens) {
      const int64_t m = m0 + threadIdx.x;
      cp_async4_zfill(sa + 16384 + 4 * threadIdx.x, scales + min64(m, p.M - 1) * kb_count + kb, m < p.M);
    }
  };

  // Accumulators of m64n64: d[4 j + e] is row (column of C) 16 warp + g (+ 8 for e >= 2), token
  // 8 j + 2 c + (e & 1).
  float part[32], sum[32], total[32];
#pragma unroll
  for (int e = 0; e < 32; ++e) sum[e] = 0.0f, total[e] = 0.0f;
  griddep_wait();  // the codes come from the previous launch
#pragma unroll
  for (int st = 0; st < kFp8GemmStages - 1; ++st) {
    if (st < kb_count) load_block(st, st);
    cp_async_commit();
  }
  for (int64_t kb = 0; kb < kb_count; ++kb) {
    const int st = static_cast<int>(kb % kFp8GemmStages);
    cp_async_wait<kFp8GemmStages - 2>();
    fence_proxy_async();  // this thread's copies are read by wgmma (the async proxy)
    __syncthreads();      // block kb landed for every thread; stage (kb - 1) % S is free
    if (kb + kFp8GemmStages - 1 < kb_count)
      load_block(kb + kFp8GemmStages - 1, static_cast<int>((kb + kFp8GemmStages - 1) % kFp8GemmStages));
    cp_async_commit();
    const uint8_t* sa = stage(st);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      wgmma_m64n64k32_e4m3_ss(part, wgmma_desc(sa + s * 2048, 128, 256), wgmma_desc(sa + 8192 + s * 2048, 128, 256),
                              s > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(part);
    const float sw = e8m0_to_f32(w.scale[(n0 >> out_shift) * w.scale_cols + kb]);
    const float* s_tok = reinterpret_cast<const float*>(sa + 16384);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float s0 = sw * s_tok[8 * j + 2 * c], s1 = sw * s_tok[8 * j + 2 * c + 1];
      sum[4 * j] = fmaf(part[4 * j], s0, sum[4 * j]);
      sum[4 * j + 1] = fmaf(part[4 * j + 1], s1, sum[4 * j + 1]);
      sum[4 * j + 2] = fmaf(part[4 * j + 2], s0, sum[4 * j + 2]);
      sum[4 * j + 3] = fmaf(part[4 * j + 3], s1, sum[4 * j + 3]);
    }
    if ((kb + 1) % R_blocks == 0 || kb + 1 == kb_count) {  // a sub-range ends: into the total, in order
#pragma unroll
      for (int e = 0; e < 32; ++e) total[e] += sum[e], sum[e] = 0.0f;
    }
    __syncthreads();  // every warp is done with stage st before a later iteration refills it
  }
  void* const C = set == 0 ? p.C : p.C1;
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    const int64_t n = n0 + 16 * warp + g + ((e & 3) >= 2 ? 8 : 0);
    const int64_t m = m0 + 8 * (e >> 2) + 2 * c + (e & 1);
    if (n < N && m < p.M) store_out(C, p.c_bf16, m * ldc + n, total[e]);
  }
}

}  // namespace deepinfer::kernels
