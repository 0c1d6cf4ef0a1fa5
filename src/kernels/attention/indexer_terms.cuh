// The lightning indexers' shared score staging (V4: indexer.cuh; V4.1: v41/attention_v41.cuh):
// queries and 32 keys of a token in shared memory, and the per-(key, head) terms. Device functions
// only, no kernels, so any launch file may include it.
#pragma once

#include <cstdint>

#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kIdxKeysPerBlock = 32;

// The shared part of the indexer score kernels (V4's below, V4.1's in v41/attention_v41.cuh): stages
// token t's queries (rows padded to di + 1: heads read one channel in parallel from distinct banks)
// and keys g0 .. g0 + 31 of sequence s (zeros past n_avail) in sh, then writes each (key, head)
// term(dot, h) into the returned [32, Hi] array. sh holds indexer_smem_floats(Hi, di). Every
// thread calls it; it ends with a barrier.
__host__ __device__ constexpr int64_t indexer_smem_floats(int Hi, int di) {
  return static_cast<int64_t>(Hi) * (di + 1) + static_cast<int64_t>(kIdxKeysPerBlock) * di +
         static_cast<int64_t>(kIdxKeysPerBlock) * Hi;
}
template <typename Tq, typename Tk, typename Term>
__device__ inline float* indexer_head_terms(const Tq* q, const Tk* keys, const int32_t* block_tables, int max_blocks,
                                            int32_t s, int64_t t, int32_t g0, int32_t n_avail, int rows_per_block,
                                            int Hi, int di, float* sh, Term term) {
  const int ldq = di + 1;
  float* sq = sh;
  float* sk = sq + Hi * ldq;
  float* sd = sk + kIdxKeysPerBlock * di;
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
    sd[kg * Hi + h] = term(acc, h);
  }
  __syncthreads();
  return sd;
}

}  // namespace deepinfer::kernels
