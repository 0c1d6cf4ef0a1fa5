// The query latent's RMS norm folded into the lean decode GEMM's activation staging
// (GemmParams::a_norm_weight): the rows are staged as they are, then each is normalised and
// FP8-quantised in shared memory by one warp, with the arithmetic of rms_norm_warp_kernel's
// quantising form (norm/elementwise.cuh) — the same bits as launch_rms_norm with quant_block 128
// followed by the GEMM on its output (CudaOpsTest.RmsNormLinearIsBitwiseTheTwoOps), one kernel
// boundary less on a decode step's critical path (the 1-CTA norm between wq_a and wq_b cost 5-7
// us of each batch-1 layer).
#pragma once

#include "kernels/common/device_utils.cuh"
#include "kernels/gemm/lean_plan.h"
#include "kernels/launch.h"
#include "kernels/norm/elementwise.cuh"

namespace deepinfer::kernels {

// Where a folded norm's F32 weights start in the lean kernel's dynamic shared memory (after the
// staged rows), and the bytes they add to its launch.
__host__ __device__ inline size_t norm_weights_offset(const LeanGemvShape& sh) {
  return (static_cast<size_t>(sh.a_rows) * sh.lda_s * 2 + 15) / 16 * 16;
}
__host__ __device__ inline size_t norm_weights_bytes(int64_t K) { return static_cast<size_t>(K) * 4; }

// Rows 0 .. rows - 1 of sA (BF16, stride lda, p.K <= kRmsWarpMaxN columns, p.K % 128 == 0),
// normalised with the weights norm_w (F32, shared memory) and quantised in place, row r by warp r
// (rows <= the CTA's warps). Each lane touches
// only its own columns c = lane + 32 j, as the norm kernel's lane does:
//   ss = sum over j in order of v_j * v_j, inv = rsqrt(warp_sum(ss) / K + eps),
//   o_j = BF16(v_j * inv * w_j), and per block of 128 columns (j in [4b, 4b + 4) of every lane)
//   s = act_quant_scale(warp_max(|o|)), stored BF16(act_quant_value(o_j, s)).
// The caller synchronises the CTA before and after.
__device__ __forceinline__ void norm_quant_staged_rows(const GemmParams& p, const float* norm_w, int rows,
                                                       __nv_bfloat16* sA, int64_t lda) {
  constexpr int kPer = static_cast<int>(kRmsWarpMaxN / 32), kQJ = 4;  // 128-column blocks: 4 j's per lane
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp >= rows) return;  // warp-uniform
  const int n = static_cast<int>(p.K);
  __nv_bfloat16* row = sA + warp * lda;
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = lane + 32 * j;
    const float v = c < n ? to_f32(row[c]) : 0.0f;
    ss += v * v;
  }
  const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(n) + p.a_norm_eps);
  for (int b = 0; b < n / (32 * kQJ); ++b) {  // whole blocks (n % 128 == 0)
    float o[kQJ], amax = 0.0f;
#pragma unroll
    for (int i = 0; i < kQJ; ++i) {
      const int c = lane + 32 * (kQJ * b + i);
      o[i] = to_f32(from_f32<__nv_bfloat16>(to_f32(row[c]) * inv * norm_w[c]));  // as rms_norm writes it
      amax = fmaxf(amax, fabsf(o[i]));
    }
    const float s = act_quant_scale(warp_max(amax));
#pragma unroll
    for (int i = 0; i < kQJ; ++i) row[lane + 32 * (kQJ * b + i)] = from_f32<__nv_bfloat16>(act_quant_value(o[i], s));
  }
}

}  // namespace deepinfer::kernels
