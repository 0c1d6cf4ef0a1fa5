// Lightning indexer (model_v4_flash.md §4.7): scores of every visible indexer key for each query
// token, then the exact top-k of them (topk_select.cuh).
#pragma once

#include "kernels/attention/indexer_terms.cuh"
#include "kernels/attention/kv_state.cuh"
#include "kernels/attention/topk_select.cuh"
#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

// grid: (T, ceil(ld / 32)) for ld >= max_avail; block 256; dynamic shared memory
// indexer_smem_floats(Hi, di) floats. scores [T, ld] F32: [0, n_avail) written (-inf past n_avail
// within the last block), the rest untouched.
template <typename Tq, typename Tk>
__global__ void indexer_scores_kernel(const Tq* q, const float* w, const Tk* keys, const int32_t* positions,
                                      const int32_t* token_seq, const int32_t* block_tables, int max_blocks,
                                      int ratio, int rows_per_block, int Hi, int di, float weight_scale, float* scores,
                                      int64_t ld) {
  pdl_prologue();
  extern __shared__ float sh[];
  const int64_t t = blockIdx.x;
  const int32_t n_avail = (positions[t] + 1) / ratio;
  const int32_t g0 = blockIdx.y * kIdxKeysPerBlock;
  if (g0 >= ld || g0 >= n_avail) return;  // the top-k reads scores [0, n_avail) only
  const float* sd = indexer_head_terms(q, keys, block_tables, max_blocks, token_seq[t], t, g0, n_avail, rows_per_block,
                                       Hi, di, sh, [&](float acc, int h) {
                                         return fmaxf(acc, 0.0f) * w[t * Hi + h] * weight_scale;
                                       });
  for (int kg = threadIdx.x; kg < kIdxKeysPerBlock; kg += blockDim.x) {
    const int32_t g = g0 + kg;
    if (g >= ld) continue;
    float acc = 0.0f;
    for (int h = 0; h < Hi; ++h) acc += sd[kg * Hi + h];  // heads in order
    scores[t * ld + g] = g < n_avail ? acc : -INFINITY;
  }
}

}  // namespace deepinfer::kernels
