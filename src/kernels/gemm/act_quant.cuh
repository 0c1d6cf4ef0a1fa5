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

}  // namespace deepinfer::kernels
