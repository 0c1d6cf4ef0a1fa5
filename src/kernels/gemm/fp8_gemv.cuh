// FP8-operand decode GEMM: dense FP8 weights (128 x 128 UE8M0 blocks) x FP8-quantised activations
// (<= 32 rows: wgmma's N 8, 16 or 32), on Hopper's FP8 tensor cores — reachable only through wgmma (mma.sync with E4M3
// operands compiles to E4M3->F16 conversions and F16 HMMA: session 44, docs/cuda.md "The
// FP8-operand route"). The weights need no decode: the 16-byte loads the lean kernel streams go
// straight into wgmma's A registers.
//
// The FP8 order (what every kernel of this order computes, for C[m][n] = sum_k A[m][k] W[n][k]):
//   * K in the canonical sub-ranges of gemm_common.cuh (P = min(8, ceil(K / 512)) of R each);
//     total = ((0 + s_0) + s_1) + ... in F32;
//   * s_p = ((0 + b_0) + b_1) + ... over the sub-range's 128-input blocks, b = fmaf(part, sw * sa,
//     running sum) with sw the weight block's scale and sa the activation row's block scale;
//   * part = one wgmma chain of four k32 steps from zero over the block's E4M3 codes (F32
//     accumulation inside the tensor core; tools/device/probes/wgmma_fp8_probe.cu: the register-A
//     m64n8k32 and shared-memory m64n128k32 forms give the same bits, so large-M kernels can
//     join this order), k permuted within each 64-input window as below (both operands alike);
//   * activation codes: each 128-block of a row re-derived from its quantised values (scale
//     2^ceil(log2(max(amax, 1e-4) / 448)) of the quantised block, codes exact), so a row gives the
//     same codes whether its producer or this kernel quantised it (a_quant_block).
// Geometry (fp8_gemv_plan.h): CTA = one warpgroup, T column tiles of 64 output columns (wgmma's M:
// weight rows; streamed in turn through one register ring) x one sub-range; the P CTAs of a tile
// group are a cluster, and rank 0 folds their sums, pushed into its shared memory. Lane (warp w,
// g = lane / 4, c = lane % 4) streams rows 16 w + g and 16 w + g + 8, bytes [16 c, 16 c + 16) of
// each 64-byte window: word 2 s + h of that run is the a0 / a1 (h = 0) or a2 / a3 (h = 1) operand
// of the window's step s, i.e. physical input 16 c + 8 s + 4 h + j is logical k 16 h + 4 c + j of
// step s (fp8_order_layout.h). The activations are staged as E4M3 in that permuted order, per k32
// step one N x 32 K-major B operand (fp8_tile_offset: 8 x 16 core matrices, LBO 128, SBO 256).
#pragma once

#include <cuda_fp8.h>

#include "kernels/common/cluster_utils.cuh"
#include "kernels/common/wgmma_utils.cuh"
#include "kernels/gemm/fp8_gemv_plan.h"
#include "kernels/gemm/fp8_order_layout.h"
#include "kernels/gemm/gemm_common.cuh"
#include "kernels/gemm/weight_loads.cuh"

namespace deepinfer::kernels {

// D[64 x 8] (+)= A[64 x 32] (registers, E4M3) B[32 x 8] (shared memory, E4M3, descriptor).
__device__ __forceinline__ void wgmma_m64n8k32_e4m3_rs(float (&d)[4], const uint32_t (&a)[4], uint64_t b_desc,
                                                       bool accumulate) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#endif
}

// The same for N = 16 and 32 (8 and 16 accumulators: n8 tile j at d[4 j .. 4 j + 3]).
__device__ __forceinline__ void wgmma_m64n16k32_e4m3_rs(float (&d)[8], const uint32_t (&a)[4], uint64_t b_desc,
                                                        bool accumulate) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, "
      "1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#endif
}
__device__ __forceinline__ void wgmma_m64n32k32_e4m3_rs(float (&d)[16], const uint32_t (&a)[4], uint64_t b_desc,
                                                        bool accumulate) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "{%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#endif
}
template <int NR>
__device__ __forceinline__ void wgmma_m64nNRk32_e4m3_rs(float (&d)[NR / 2], const uint32_t (&a)[4], uint64_t b_desc,
                                                        bool accumulate) {
  if constexpr (NR == 8) {
    wgmma_m64n8k32_e4m3_rs(d, a, b_desc, accumulate);
  } else if constexpr (NR == 16) {
    wgmma_m64n16k32_e4m3_rs(d, a, b_desc, accumulate);
  } else {
    static_assert(NR == 32);
    wgmma_m64n32k32_e4m3_rs(d, a, b_desc, accumulate);
  }
}

__device__ __forceinline__ uint32_t e4m3_code(float x) {
  return static_cast<uint32_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// The large-M FP8-order kernels' sub-range totals in shared memory (fp8_gemm.cuh,
// fp8_expert_gemm.cuh): a thread's running sum over R accumulators is [R / 4][128 threads] float4
// from its slot `t` — accumulators 4 j .. 4 j + 3 (one n8 group) in one 16-byte slot, so a fold is
// R / 4 vector loads and stores (consecutive threads' slots: conflict-free) instead of R scalar
// ones of each (~70 instructions per block of the expert kernel's ~486: ncu, session 50).
// kRowScaled (the FP4 experts, fp8_expert_gemm.cuh: one weight scale per row and sub-range, applied
// when the sub-range's sum is added): a slot's accumulators 4 j + 2 h + e are of row h, scale f[h];
// total + fmaf-ed sum x f[h] is exactly total + the per-block-scaled sum (f is a power of two).
template <bool kRowScaled>
__device__ __forceinline__ float4 fp8_totals_add(float4 v, const float* s, const float* f) {
  if constexpr (kRowScaled) {
    return make_float4(fmaf(s[0], f[0], v.x), fmaf(s[1], f[0], v.y), fmaf(s[2], f[1], v.z), fmaf(s[3], f[1], v.w));
  } else {
    return make_float4(v.x + s[0], v.y + s[1], v.z + s[2], v.w + s[3]);
  }
}
// A sub-range ends: total = (first ? 0 : total) + sum, in order; sum restarts from zero.
template <int R, bool kRowScaled = false>
__device__ __forceinline__ void fp8_totals_fold(float4* t, float (&sum)[R], bool first, const float* f = nullptr) {
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    t[j * 128] = fp8_totals_add<kRowScaled>(first ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : t[j * 128], sum + 4 * j, f);
    sum[4 * j] = sum[4 * j + 1] = sum[4 * j + 2] = sum[4 * j + 3] = 0.0f;
  }
}
// The last sub-range ends: sum = total + sum (the tile's result, in registers); first (the only
// sub-range): sum as it is, or times the rows' scales.
template <int R, bool kRowScaled = false>
__device__ __forceinline__ void fp8_totals_finish(const float4* t, float (&sum)[R], bool first, const float* f = nullptr) {
  if (first) {
    if constexpr (kRowScaled) {
#pragma unroll
      for (int e = 0; e < R; ++e) sum[e] *= f[(e >> 1) & 1];
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const float4 v = fp8_totals_add<kRowScaled>(t[j * 128], sum + 4 * j, f);
    sum[4 * j] = v.x, sum[4 * j + 1] = v.y, sum[4 * j + 2] = v.z, sum[4 * j + 3] = v.w;
  }
}
// A split form's one sub-range sum into the totals, for the cluster's fold to read.
template <int R>
__device__ __forceinline__ void fp8_totals_store(float4* t, const float (&sum)[R]) {
#pragma unroll
  for (int j = 0; j < R / 4; ++j) t[j * 128] = make_float4(sum[4 * j], sum[4 * j + 1], sum[4 * j + 2], sum[4 * j + 3]);
}
// Accumulator e of the totals at slot t (another CTA's, through cluster_map).
__device__ __forceinline__ const float* fp8_totals_at(const float4* t, int e) {
  return reinterpret_cast<const float*>(t + (e >> 2) * 128) + (e & 3);
}

// Eight BF16 values (a uint4 of the row) as floats.
__device__ __forceinline__ void bf16x8_to_f32(const uint4& x, float (&v)[8]) {
  const uint32_t u[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = __uint_as_float(u[j] << 16);
    v[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
  }
}
// The FP8 order's activation codes of a lane's 8 quantised values, whose 128-input block's largest
// magnitude is amax: the block's scale (returned) and the codes of values 0-3 (lo) and 4-7 (hi),
// exact — the one form both the decode staging and the large-M pre-pass use, so they give the same
// codes for the same row.
__device__ __forceinline__ float fp8_block_codes(const float (&v)[8], float amax, uint32_t& lo, uint32_t& hi) {
  const float s = act_quant_scale(amax), inv = __frcp_rn(s);
  lo = 0, hi = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    lo |= e4m3_code(v[j] * inv) << (8 * j);
    hi |= e4m3_code(v[4 + j] * inv) << (8 * j);
  }
  return s;
}
// The largest |v| over a half-warp's 8 x 16 values (one 128-input block), `half` its lane mask.
__device__ __forceinline__ float half_warp_amax(const float (&v)[8], uint32_t half) {
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(v[j]));
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(half, amax, o));
  return amax;
}


// NB: 128-input blocks in flight per lane (four 16-byte loads each), a ring continuing across the
// CTA's column tiles; T: column tiles per CTA (Fp8GemvShape::tiles); NR: wgmma's N (rows rounded up
// to 8, 16 or 32: Fp8GemvShape::nr). Dynamic shared memory: fp8_gemv_smem_bytes(NR, T) (41 KB at
// NR = 32; 128 registers a thread spilled there, hence its bound of 3 CTAs per SM).
template <int NB, int T, int NR>
__global__ void __launch_bounds__(128, NR == 32 ? 3 : 4) fp8_gemv_kernel(GemmParams p, Fp8GemvShape sh) {
  extern __shared__ __align__(128) uint8_t fp8_gemv_smem[];
  uint8_t* const sB = fp8_gemv_smem;  // [block][step][NR x 32] E4M3 (fp8_tile_offset with NR rows)
  float(*const s_scale)[kFp8GemvMaxBlocks] =  // [NR][block] activation scales
      reinterpret_cast<float(*)[kFp8GemvMaxBlocks]>(fp8_gemv_smem + kFp8GemvMaxBlocks * 4 * NR * 32);
  // The fold's sums (fp8_gemv_pushes): pushed, rank 0's [tile][sub][col][row]; pulled, this CTA's
  // [tile][col][row] (the same array with one sub-range).
  constexpr bool kPush = fp8_gemv_pushes(NR);
  float(*const red)[kPush ? 8 : 1][kFp8GemvCols][NR] =
      reinterpret_cast<float(*)[kPush ? 8 : 1][kFp8GemvCols][NR]>(fp8_gemv_smem + kFp8GemvMaxBlocks * 4 * NR * 32 +
                                                                  NR * kFp8GemvMaxBlocks * 4);

  griddep_launch_dependents();
  // Pushing: barrier 1 (waited before the pushes) — every CTA of the cluster has started. Relaxed:
  // a release arrival's fence was ~7% of the stall samples here (ncu, H100).
  if constexpr (kPush) cluster_arrive_relaxed();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int sub = static_cast<int>(blockIdx.x) % sh.P;  // = the cluster rank
  const int group = static_cast<int>(blockIdx.x) / sh.P;
  const int set = p.n_sets > 1 && group >= sh.groups0 ? 1 : 0;
  const WeightDesc& w = set == 0 ? p.w : p.w1;
  const int64_t N = set == 0 ? p.N : p.N1, ldc = set == 0 ? p.ldc : p.ldc1;
  const int64_t n0 = static_cast<int64_t>(group - set * sh.groups0) * T * kFp8GemvCols;  // first tile's column
  const int nt = T == 1 ? 1 : static_cast<int>(min64(T, (N - n0 + kFp8GemvCols - 1) / kFp8GemvCols));
  const int k0 = sub * sh.R;
  const int nblk = min(sh.R, static_cast<int>(p.K) - k0) / kFp8GemvBlock;
  const int total = nt * nblk;  // blocks the CTA streams: tile f / nblk, block f % nblk

  // The lane's two weight rows of each tile (past N: row N - 1, outputs dropped), at its 16 bytes
  // of a window.
  const uint8_t* wr[T][2];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    const int64_t r0 = min64(n0 + t * kFp8GemvCols + 16 * warp + g, N - 1);
    const int64_t r1 = min64(n0 + t * kFp8GemvCols + 16 * warp + g + 8, N - 1);
    wr[t][0] = w.w + r0 * w.row_bytes + k0 + 16 * c;
    wr[t][1] = w.w + r1 * w.row_bytes + k0 + 16 * c;
  }
  const uint64_t pol = weight_l2_policy(true);
  uint4 buf[NB][4];  // block slot: row 0 window 0, row 1 window 0, row 0 window 1, row 1 window 1
  // The load cursor (tile lt, block lb): the next block into a slot when `pred` (warp-uniform),
  // predicated inside the loads (ldg_weight16_if); the cursor advances either way.
  int lt = 0, lb = 0;
  auto load = [&](int slot, bool pred) {
    const uint8_t* q0 = T == 1 || lt == 0 ? wr[0][0] : wr[T - 1][0];
    const uint8_t* q1 = T == 1 || lt == 0 ? wr[0][1] : wr[T - 1][1];
    const int off = lb * kFp8GemvBlock;
    ldg_weight16_if(buf[slot][0], q0 + off, pol, pred);
    ldg_weight16_if(buf[slot][1], q1 + off, pol, pred);
    ldg_weight16_if(buf[slot][2], q0 + off + 64, pol, pred);
    ldg_weight16_if(buf[slot][3], q1 + off + 64, pol, pred);
    if (++lb == nblk) lb = 0, lt = min(lt + 1, T - 1);
  };
  // The first NB blocks, unconditionally (a short stream reloads its last block: L2 hits), so the
  // loads write the slots directly.
#pragma unroll
  for (int f = 0; f < NB; ++f) {
    if (f >= total) lt = (total - 1) / nblk, lb = (total - 1) % nblk;
    load(f, true);
  }
  lt = NB / nblk < T ? NB / nblk : T - 1, lb = NB % nblk;  // the cursor at block NB
  if (NB >= total) lt = T - 1, lb = 0;                      // (no further loads: predicated off)
  // Weight scale of stream block f in lane f (a tile's 64 columns lie in one block of outputs).
  float my_sw = 0.0f;
  if (lane < total) {
    const int t = lane / nblk, b = lane - t * nblk;
    my_sw = e8m0_to_f32(w.scale[((n0 + t * kFp8GemvCols) >> sh.out_shift) * w.scale_cols + (k0 >> 7) + b]);
  }

  griddep_wait();  // the activations come from the previous kernel
  // Staging: item i = (row r < M, block b, chunk q of 8 inputs); a half-warp holds one (r, b).
  // The rows past M (up to wgmma's N) are zeros, written as 16-byte runs.
  const int M = static_cast<int>(p.M);
  for (int i = threadIdx.x; i < (NR - M) * 8 * nblk; i += 128) {
    const int n = M + i % (NR - M), step_half = i / (NR - M);
    *reinterpret_cast<uint4*>(sB + (step_half >> 1) * (NR * 32) + (n >> 3) * 256 + (step_half & 1) * 128 +
                              (n & 7) * 16) = make_uint4(0, 0, 0, 0);
  }
  for (int i = threadIdx.x; i < NR * kFp8GemvMaxBlocks; i += 128)
    if (i / kFp8GemvMaxBlocks >= M) s_scale[i / kFp8GemvMaxBlocks][i % kFp8GemvMaxBlocks] = 0.0f;
  const uint32_t half = 0xffffu << (threadIdx.x & 16);
  for (int i = threadIdx.x; i < M * nblk * 16; i += 128) {
    const int q = i & 15, rb = i >> 4, r = rb / nblk, b = rb - r * nblk;
    const int k = b * kFp8GemvBlock + 8 * q;  // within the sub-range
    const int64_t off = r * p.lda + k0 + k;
    float v[8];
    if (p.a_f32) {
      const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(p.A) + off);
      const float4 x0 = src[0], x1 = src[1];
      v[0] = x0.x, v[1] = x0.y, v[2] = x0.z, v[3] = x0.w, v[4] = x1.x, v[5] = x1.y, v[6] = x1.z, v[7] = x1.w;
    } else {
      bf16x8_to_f32(*reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.A) + off), v);
    }
    float amax = half_warp_amax(v, half);
    if (p.a_quant_block > 0) {  // raw rows: quantised as act_quant_bf16 would ...
      const float s = act_quant_scale(amax);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = act_quant_value(v[j], s);
      amax = act_quant_value(amax, s);  // ... whose largest magnitude is the block's quantised
    }
    uint32_t lo, hi;
    const float s = fp8_block_codes(v, amax, lo, hi);  // the quantised block's own scale
    const int o = fp8_tile_offset(r, k, NR);  // k % 8 == 0: codes 0-3 at h = 0, 4-7 at h = 1
    *reinterpret_cast<uint32_t*>(sB + o) = lo;
    *reinterpret_cast<uint32_t*>(sB + o + 128) = hi;
    if (q == 0) s_scale[r][b] = s;
  }
  fence_proxy_async();  // the codes are read by wgmma (the async proxy)
  __syncthreads();

  // Each block's chain is waited for before the next is issued: ptxas serialises the wgmmas of a
  // form that waits for block b - 1 (wgmma.wait_group 1) with block b in flight and promotes its
  // partial meanwhile (C7514: accumulators read inside a pipeline stage), as DeepGEMM's
  // per-block promotion also waits for every block. At the end of each tile its sums go to rank 0
  // (pushing) or stay in this CTA's shared memory for rank 0 to read.
  if constexpr (kPush) cluster_wait();  // barrier 1
  const int row = 16 * warp + g;
  // The sub-range sum: accumulator 4 j + e is column row (+ 8 for e >= 2), token 8 j + 2 c + e % 2.
  constexpr int kAcc = NR / 2;
  float sum[kAcc];
#pragma unroll
  for (int e = 0; e < kAcc; ++e) sum[e] = 0.0f;
  int ct = 0, cb = 0;  // the block being computed: tile, block
  for (int f0 = 0; f0 < total; f0 += NB) {
#pragma unroll
    for (int u = 0; u < NB; ++u) {
      const int f = f0 + u;
      if (f >= total) break;  // CTA-uniform
      float part[kAcc];
      wgmma_fence();
#pragma unroll
      for (int st = 0; st < 4; ++st) {
        const int h = st >> 1, s = st & 1;  // window, step within it
        const uint4& x0 = buf[u][2 * h];
        const uint4& x1 = buf[u][2 * h + 1];
        const uint32_t a[4] = {s ? x0.z : x0.x, s ? x1.z : x1.x, s ? x0.w : x0.y, s ? x1.w : x1.y};
        wgmma_m64nNRk32_e4m3_rs<NR>(part, a, wgmma_desc(sB + (4 * cb + st) * (NR * 32), 128, 256), st > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(part);
      load(u, f + NB < total);
      const float sw = __shfl_sync(0xffffffffu, my_sw, f);
#pragma unroll
      for (int j = 0; j < NR / 8; ++j) {
        const float s0 = sw * s_scale[8 * j + 2 * c][cb], s1 = sw * s_scale[8 * j + 2 * c + 1][cb];
        sum[4 * j] = fmaf(part[4 * j], s0, sum[4 * j]);
        sum[4 * j + 1] = fmaf(part[4 * j + 1], s1, sum[4 * j + 1]);
        sum[4 * j + 2] = fmaf(part[4 * j + 2], s0, sum[4 * j + 2]);
        sum[4 * j + 3] = fmaf(part[4 * j + 3], s1, sum[4 * j + 3]);
      }
      if (++cb == nblk) {  // the tile's sub-range sum is complete
#pragma unroll
        for (int j = 0; j < NR / 8; ++j) {
          float* const d0 = &red[T == 1 ? 0 : ct][kPush ? sub : 0][row][8 * j + 2 * c];
          float* const d1 = &red[T == 1 ? 0 : ct][kPush ? sub : 0][row + 8][8 * j + 2 * c];
          if constexpr (kPush) {
            cluster_store_f2(cluster_map(d0, 0), sum[4 * j], sum[4 * j + 1]);
            cluster_store_f2(cluster_map(d1, 0), sum[4 * j + 2], sum[4 * j + 3]);
          } else {
            *reinterpret_cast<float2*>(d0) = make_float2(sum[4 * j], sum[4 * j + 1]);
            *reinterpret_cast<float2*>(d1) = make_float2(sum[4 * j + 2], sum[4 * j + 3]);
          }
        }
#pragma unroll
        for (int e = 0; e < kAcc; ++e) sum[e] = 0.0f;
        cb = 0, ++ct;
      }
    }
  }

  // The fold in rank 0, in sub-range order.
  cluster_arrive();
  cluster_wait();  // every CTA's sums are written (in rank 0, or in their own CTA)
  if (sub == 0) {
    void* const C = set == 0 ? p.C : p.C1;
    for (int t = 0; t < nt; ++t) {
#pragma unroll
      for (int e = 0; e < kAcc; ++e) {
        const int col = row + ((e & 3) >= 2 ? 8 : 0), m = 8 * (e >> 2) + 2 * c + (e & 1);
        const int64_t n = n0 + t * kFp8GemvCols + col;
        if (n >= N || m >= M) continue;
        float total_sum = 0.0f;
        for (int q = 0; q < sh.P; ++q)
          total_sum += kPush ? red[t][q][col][m] : cluster_load_f32(cluster_map(&red[t][0][col][m], q));
        store_out(C, p.c_bf16, m * ldc + n, total_sum);
      }
    }
  }
  if constexpr (!kPush) {
    cluster_arrive();
    cluster_wait();  // rank 0 has read every CTA's sums (they live until then)
  }
}

}  // namespace deepinfer::kernels
