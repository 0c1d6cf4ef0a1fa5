// Device helpers shared by every kernel family: activation loads/stores in F32 or BF16, warp and
// block reductions, and exact decoders for the checkpoint's low-precision formats (E4M3, UE8M0,
// E2M1) plus the round-to-nearest-even encoders the numerics contract uses. No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

// Activation element types the kernels are instantiated for.
template <typename T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Eight consecutive activations from a 16-byte aligned address as F32 (one or two vector loads).
template <typename T>
__device__ __forceinline__ void load8_f32(const T* p, float (&v)[8]) {
  if constexpr (sizeof(T) == 2) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}

// Programmatic dependent launch (sm_90): a kernel launched with the programmatic-serialization
// attribute may start before its predecessor finishes; griddep_wait() blocks until the
// predecessor has completed and its writes are visible, so everything before it must touch only
// data no earlier kernel writes (weights). griddep_launch_dependents() lets such a successor start
// once every CTA of this kernel has run it (harmless when the successor is launched normally).
// Both are no-ops on older architectures.
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The first statement of every kernel launched through launch_pdl() (pdl_launch.cuh): wait for
// the predecessor, then let the successor be scheduled (it waits in its own prologue). A kernel
// that may touch data before waiting (the streaming GEMV's weights) calls the two itself.
__device__ __forceinline__ void pdl_prologue() {
  griddep_wait();
  griddep_launch_dependents();
}

__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// RoPE of one pair: the angle's sine (times sign: -1 for the inverse rotation) and cosine, then
// element `odd` of the rotated pair (x0, x1) — the expressions the RoPE kernels and the attention
// output's de-rotation use, products rounded before the sum (no FMA contraction left to the
// compiler), so they agree bit for bit.
__device__ __forceinline__ void rope_sincos(float pos, float inv_freq, float sign, float& s, float& c) {
  sincosf(pos * inv_freq, &s, &c);
  s *= sign;
}
__device__ __forceinline__ float rope_pair(float x0, float x1, float s, float c, bool odd) {
  return odd ? __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c)) : __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum in a fixed order (warp partials summed by warp 0 in warp order), so the result
// is bitwise reproducible for a given block size. `scratch` holds >= 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  if (warp == 0) {
    total = lane < n_warps ? scratch[lane] : 0.0f;
    total = warp_sum(total);
    if (lane == 0) scratch[0] = total;
  }
  __syncthreads();
  total = scratch[0];
  __syncthreads();
  return total;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float m = lane < n_warps ? scratch[lane] : -INFINITY;
    m = warp_max(m);
    if (lane == 0) scratch[0] = m;
  }
  __syncthreads();
  const float out = scratch[0];
  __syncthreads();
  return out;
}

// ---- formats ---------------------------------------------------------------------------
__device__ __forceinline__ float e4m3_to_f32(uint8_t b) {
  __nv_fp8_e4m3 v;
  v.__x = b;
  return static_cast<float>(v);
}
__device__ __forceinline__ float e8m0_to_f32(uint8_t e) {
  return e == 0 ? 5.877471754111438e-39f /* 2^-127 */ : __uint_as_float(static_cast<uint32_t>(e) << 23);
}
__device__ __forceinline__ float e2m1_to_f32(uint32_t code) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = mag[code & 7];
  return (code & 8) ? -m : m;
}
// Nearest E4M3 value of x (saturating to +-448, ties to even), as the reference's cast.
__device__ __forceinline__ float round_e4m3(float x) {
  __nv_fp8_e4m3 v(fminf(fmaxf(x, -448.0f), 448.0f));
  return static_cast<float>(v);
}
// Nearest E2M1 value of clamp(x, -6, 6); ties to the even code.
__device__ __forceinline__ float round_e2m1(float x) {
  const float a = fminf(fabsf(x), 6.0f);
  float m;
  if (a <= 0.25f) m = 0.0f;
  else if (a < 0.75f) m = 0.5f;
  else if (a <= 1.25f) m = 1.0f;
  else if (a < 1.75f) m = 1.5f;
  else if (a <= 2.5f) m = 2.0f;
  else if (a < 3.5f) m = 3.0f;
  else if (a <= 5.0f) m = 4.0f;
  else m = 6.0f;
  return x < 0.0f ? -m : m;
}
// 2^ceil(log2(amax / qmax)) as the reference computes it in F32.
__device__ __forceinline__ float pow2_scale(float amax, float qmax) {
  return exp2f(ceilf(log2f(amax / qmax)));
}
// FP8 E4M3 block fake-quantisation with a power-of-two scale, the one form every user shares
// (activation quantisation, the small-M GEMM's folded staging, the KV fake-quant), so they give
// the same bits: the scale of a block whose largest |x| is amax — the reference's
// 2^ceil(log2(max(amax, 1e-4) / 448)) — and one element quantised with it.
__device__ __forceinline__ float act_quant_scale(float amax) { return pow2_scale(fmaxf(amax, 1e-4f), 448.0f); }
// x / s as x times the reciprocal: s is a power of two, so 1 / s is exact and the product has the
// quotient's bits (the CPU reference multiplies by ldexp(1, -k) too) — a multiply instead of an
// IEEE division per element (8 divisions were ~70 of the ~330 instructions a decode GEMM's CTA
// spent quantising each 8-element chunk it staged); callers with one scale per block share the
// reciprocal (one per s, hoisted by the compiler).
__device__ __forceinline__ float act_quant_value(float x, float s) { return round_e4m3(x * __frcp_rn(s)) * s; }

__device__ __forceinline__ int div_up(int a, int b) { return (a + b - 1) / b; }
__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// ((0 + p[0]) + p[stride]) + ... over n partial sums, in that order, with each group of 8 loads
// issued before its adds: folding split partials is a few L2 round trips instead of a chain of n
// (decode-step GEMV and mHC folds were dominated by such chains). L2 loads (__ldcg): partials may
// come from other CTAs of the same launch.
__device__ __forceinline__ float sum_in_order(const float* p, int64_t stride, int n) {
  float sum = 0.0f;
  for (int s0 = 0; s0 < n; s0 += 8) {
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = s0 + i < n ? __ldcg(p + (s0 + i) * stride) : 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (s0 + i < n) sum += v[i];
  }
  return sum;
}

// A CTA's fold of `count` outputs, each sum_in_order over n partials `stride` apart (the same adds
// in the same order: the same bits), B outputs per thread at a time so that B x 8 loads are in
// flight per L2 round trip: the last CTA of a split-K tile folding a 16 x 128 tile with 128
// threads paid 16 dependent round trips, the hottest instructions of the batch-512 expert and
// projection launches (ncu). `at(i)`: offset of output i's first partial (and of output i in C);
// `store(offset, v)`.
template <int B = 4, typename At, typename Store>
__device__ __forceinline__ void fold_in_order(const float* partial, int64_t stride, int n, int64_t count, At at,
                                              Store store) {
  for (int64_t i0 = threadIdx.x; i0 < count; i0 += static_cast<int64_t>(B) * blockDim.x) {
    int64_t off[B];
    bool ok[B];
    float sum[B];
#pragma unroll
    for (int u = 0; u < B; ++u) {
      const int64_t i = i0 + static_cast<int64_t>(u) * blockDim.x;
      ok[u] = i < count;
      off[u] = ok[u] ? at(i) : 0;
      sum[u] = 0.0f;
    }
    for (int s0 = 0; s0 < n; s0 += 8) {
      float v[B][8];
#pragma unroll
      for (int u = 0; u < B; ++u)
#pragma unroll
        for (int k = 0; k < 8; ++k) v[u][k] = ok[u] && s0 + k < n ? __ldcg(partial + off[u] + (s0 + k) * stride) : 0.0f;
#pragma unroll
      for (int u = 0; u < B; ++u)
#pragma unroll
        for (int k = 0; k < 8; ++k)
          if (s0 + k < n) sum[u] += v[u][k];
    }
#pragma unroll
    for (int u = 0; u < B; ++u)
      if (ok[u]) store(off[u], sum[u]);
  }
}

}  // namespace deepinfer::kernels
