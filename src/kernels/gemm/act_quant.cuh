// Activation preparation for the tensor-core GEMM: BF16 copies of activation rows, FP8 E4M3
// fake-quantised per block of `block` channels with power-of-two scales (model_v4_flash.md §3.2)
// when block > 0. The quantised values are exact in BF16. grid: (rows, n_blocks) for quantising,
// one warp per block; (rows) with 256 threads for a plain conversion.
#pragma once

#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

template <typename T>
__global__ void act_quant_bf16_kernel(const T* x, __nv_bfloat16* out, int64_t width, int block) {
  pdl_prologue();  // a GEMM that follows may start streaming its weights
  const int64_t r = blockIdx.x;
  if (block <= 0) {
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) out[r * width + c] = __float2bfloat16_rn(to_f32(x[r * width + c]));
    return;
  }
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * block;
  const int64_t b1 = min64(width, b0 + block);
  const int lane = threadIdx.x;
  float amax = 0.0f;
  for (int64_t c = b0 + lane; c < b1; c += 32) amax = fmaxf(amax, fabsf(to_f32(x[r * width + c])));
  amax = warp_max(amax);
  const float s = act_quant_scale(amax);
  for (int64_t c = b0 + lane; c < b1; c += 32) out[r * width + c] = __float2bfloat16_rn(act_quant_value(to_f32(x[r * width + c]), s));
}

// The same results, vectorised (what the launcher picks when the shapes allow: the one-warp
// blocks above, with 2-byte loads, ran at ~10% of the copy bandwidth in an 8K prefill, where
// these launches were ~10% of the time): one warp per block of 32 V channels, each lane V
// consecutive channels in one (or two) vector loads and one store; 8 warps per CTA over the
// flattened [rows][blocks] grid (the launcher takes V = 4: 128-channel blocks). Needs width %
// (32 V) == 0 and x, out aligned to their vectors.
template <typename T, int V>
struct alignas(sizeof(T) * V) ActVec {
  T v[V];
};
// A lane's V consecutive values of a warp-wide quantisation block (32 V channels, every lane of
// the warp present) quantised with the block's scale and stored as BF16 at out (aligned to 2 V
// bytes) in one store of V / 2 packed pairs: the vectorised kernel's arithmetic, shared with the
// fused MoE SwiGLU kernel.
template <int V>
__device__ __forceinline__ void act_quant_lane_store(const float (&v)[V], __nv_bfloat16* out) {
  static_assert(V % 2 == 0);
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i) amax = fmaxf(amax, fabsf(v[i]));
  const float s = act_quant_scale(warp_max(amax));
  uint32_t w[V / 2];  // element 2i in the low half of word i (memory order)
#pragma unroll
  for (int i = 0; i < V / 2; ++i)
    w[i] = __bfloat16_as_ushort(__float2bfloat16_rn(act_quant_value(v[2 * i], s))) |
           (uint32_t{__bfloat16_as_ushort(__float2bfloat16_rn(act_quant_value(v[2 * i + 1], s)))} << 16);
  if constexpr (V == 4) {
    *reinterpret_cast<uint2*>(out) = make_uint2(w[0], w[1]);
  } else if constexpr (V == 8) {
    *reinterpret_cast<uint4*>(out) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (int i = 0; i < V / 2; ++i) reinterpret_cast<uint32_t*>(out)[i] = w[i];
  }
}
// The lane's V values at x + off (one vector load) quantised into out + off: the vectorised
// kernel's step, shared with the MoE grouping kernel's quantisation of decode-sized batches.
template <typename T, int V>
__device__ __forceinline__ void act_quant_lane(const T* x, __nv_bfloat16* out, int64_t off) {
  const ActVec<T, V> in = *reinterpret_cast<const ActVec<T, V>*>(x + off);
  float v[V];
#pragma unroll
  for (int i = 0; i < V; ++i) v[i] = to_f32(in.v[i]);
  act_quant_lane_store<V>(v, out + off);
}
template <typename T, int V>
__global__ void __launch_bounds__(256) act_quant_bf16_vec_kernel(const T* x, __nv_bfloat16* out, int64_t blocks) {
  pdl_prologue();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (b >= blocks) return;
  act_quant_lane<T, V>(x, out, b * 32 * V + (threadIdx.x & 31) * V);  // rows are whole blocks: flat offsets
}
// The plain conversion (block <= 0), four elements per thread over the flat array (n % 4 == 0).
template <typename T>
__global__ void __launch_bounds__(256) act_to_bf16_vec_kernel(const T* x, __nv_bfloat16* out, int64_t n) {
  pdl_prologue();
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x) * 4;
  if (i >= n) return;
  const ActVec<T, 4> in = *reinterpret_cast<const ActVec<T, 4>*>(x + i);
  ActVec<__nv_bfloat16, 4> o;
#pragma unroll
  for (int j = 0; j < 4; ++j) o.v[j] = __float2bfloat16_rn(to_f32(in.v[j]));
  *reinterpret_cast<ActVec<__nv_bfloat16, 4>*>(out + i) = o;
}

}  // namespace deepinfer::kernels
