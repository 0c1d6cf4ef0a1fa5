// Lightning indexer (model_v4_flash.md §4.7): scores of every visible indexer key for each query
// token, then the exact top-k of them (topk_select.cuh).
#pragma once

#include "kernels/attention/kv_state.cuh"
#include "kernels/attention/topk_select.cuh"
#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kIdxKeysPerBlock = 32;

// grid: (T, ceil(ld / 32)) for ld >= max_avail; block 256. scores [T, ld] F32: [0, n_avail) written (-inf
// past n_avail within the last block), the rest untouched.
template <typename Tq, typename Tk>
__global__ void indexer_scores_kernel(const Tq* q, const float* w, const Tk* keys, const int32_t* positions,
                                      const int32_t* token_seq, const int32_t* block_tables, int max_blocks,
                                      int ratio, int rows_per_block, int Hi, int di, float weight_scale, float* scores,
                                      int64_t ld) {
  pdl_prologue();
  extern __shared__ float sh[];  // q: Hi*(di+1) (padded: heads read one channel in parallel
                                 // from distinct banks), keys: 32*di, dots: 32*Hi
  const int ldq = di + 1;
  float* sq = sh;
  float* sk = sq + Hi * ldq;
  float* sd = sk + kIdxKeysPerBlock * di;
  const int64_t t = blockIdx.x;
  const int32_t n_avail = (positions[t] + 1) / ratio;
  const int32_t g0 = blockIdx.y * kIdxKeysPerBlock;
  if (g0 >= ld || g0 >= n_avail) return;  // the top-k reads scores [0, n_avail) only
  const int32_t s = token_seq[t];
  for (int i = threadIdx.x; i < Hi * di; i += blockDim.x) sq[(i / di) * ldq + i % di] = to_f32(q[t * Hi * di + i]);
  for (int i = threadIdx.x; i < kIdxKeysPerBlock * di; i += blockDim.x) {
    const int32_t g = g0 + i / di;
    float v = 0.0f;
    if (g < n_avail) {
      const int32_t blk = block_tables[static_cast<int64_t>(s) * max_blocks + g / rows_per_block];
      v = to_f32(keys[(static_cast<int64_t>(blk) * rows_per_block + g % rows_per_block) * di + i % di]);
    }
    sk[i] = v;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kIdxKeysPerBlock * Hi; i += blockDim.x) {
    const int kg = i / Hi, h = i % Hi;
    float acc = 0.0f;
    for (int c = 0; c < di; ++c) acc += sq[h * ldq + c] * sk[kg * di + c];
    sd[kg * Hi + h] = fmaxf(acc, 0.0f) * w[t * Hi + h] * weight_scale;
  }
  __syncthreads();
  for (int kg = threadIdx.x; kg < kIdxKeysPerBlock; kg += blockDim.x) {
    const int32_t g = g0 + kg;
    if (g >= ld) continue;
    float acc = 0.0f;
    for (int h = 0; h < Hi; ++h) acc += sd[kg * Hi + h];  // heads in order
    scores[t * ld + g] = g < n_avail ? acc : -INFINITY;
  }
}

}  // namespace deepinfer::kernels
