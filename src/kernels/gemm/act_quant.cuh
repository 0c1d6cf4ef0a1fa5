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
template <typename T, int V>
__global__ void __launch_bounds__(256) act_quant_bf16_vec_kernel(const T* x, __nv_bfloat16* out, int64_t blocks) {
  pdl_prologue();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (b >= blocks) return;
  const int64_t off = b * 32 * V + (threadIdx.x & 31) * V;  // rows are whole blocks: flat offsets
  const ActVec<T, V> in = *reinterpret_cast<const ActVec<T, V>*>(x + off);
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i) amax = fmaxf(amax, fabsf(to_f32(in.v[i])));
  const float s = act_quant_scale(warp_max(amax));
  ActVec<__nv_bfloat16, V> o;
#pragma unroll
  for (int i = 0; i < V; ++i) o.v[i] = __float2bfloat16_rn(act_quant_value(to_f32(in.v[i]), s));
  *reinterpret_cast<ActVec<__nv_bfloat16, V>*>(out + off) = o;
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
