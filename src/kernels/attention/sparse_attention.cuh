// Sparse shared-KV attention with sinks (model_v4_flash.md §4.8). One block per (token, group of
// 8 heads); warp = head; the block stages tiles of 16 K=V rows in shared memory (shared by its 8
// heads). Each lane owns d/32 dims of the query and the output. Two passes over the rows: the
// first finds the max logit and the softmax denominator (sink included), the second accumulates
// P.V with exactly normalised probabilities — rounded to BF16 under the official contract, as the
// reference feeds BF16 probabilities to its P.V product.
#pragma once

#include "kernels/attention/kv_state.cuh"
#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kAttnHeadsPerBlock = 8;
inline constexpr int kAttnRowsPerTile = 16;
inline constexpr int kAttnMaxDimsPerLane = 16;  // head_dim <= 512

struct AttentionParamsDev {
  int64_t H = 0, d = 0, W = 0;
  int ratio = 0;
  bool all_compressed = false;
  int rows_per_block = 0;
  int max_blocks = 0;
  int K = 0;                  // comp_idx columns (CSA)
  float softmax_scale = 0.0f;
  bool round_probs = false;
};

template <typename T>
__device__ __forceinline__ const T* attn_row(int64_t r, int64_t n_window, int64_t first, const SeqSpanDev& s,
                                             const T* kv_new, const T* window, const T* comp, const int32_t* idx,
                                             const int32_t* table, const AttentionParamsDev& p) {
  if (r < n_window) {
    const int64_t q = first + r;
    if (q >= s.start_pos) return kv_new + (s.token_begin + q - s.start_pos) * p.d;
    return window + (static_cast<int64_t>(s.slot) * p.W + q % p.W) * p.d;
  }
  const int64_t c = r - n_window;
  const int32_t g = p.all_compressed ? static_cast<int32_t>(c) : idx[c];
  const int32_t blk = table[g / p.rows_per_block];
  return comp + (static_cast<int64_t>(blk) * p.rows_per_block + g % p.rows_per_block) * p.d;
}

template <typename T>
__global__ void __launch_bounds__(256) sparse_attention_kernel(const T* q, const T* kv_new, const T* window,
                                                               const T* comp, const int32_t* comp_idx,
                                                               const float* sinks, const int32_t* positions,
                                                               const int32_t* token_seq, const SeqSpanDev* seqs,
                                                               const int32_t* block_tables, AttentionParamsDev p,
                                                               T* out) {
  extern __shared__ float s_rows[];  // [kAttnRowsPerTile][d]
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t h = static_cast<int64_t>(blockIdx.y) * kAttnHeadsPerBlock + warp;
  const SeqSpanDev s = seqs[token_seq[t]];
  const int64_t pos = positions[t];
  const int64_t first = max64(max64(0, pos - p.W + 1), s.window_floor);
  const int64_t n_window = pos - first + 1;
  const int32_t* idx = p.all_compressed || comp_idx == nullptr ? nullptr : comp_idx + t * p.K;
  int64_t n_comp = 0;
  if (p.ratio > 0) {
    if (p.all_compressed) {
      n_comp = (pos + 1) / p.ratio;
    } else {
      while (n_comp < p.K && idx[n_comp] >= 0) ++n_comp;
    }
  }
  const int64_t n_rows = n_window + n_comp;
  const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * p.max_blocks;
  const int dpl = static_cast<int>(p.d / 32);  // dims per lane
  const bool active = h < p.H;
  float qv[kAttnMaxDimsPerLane], acc[kAttnMaxDimsPerLane];
#pragma unroll
  for (int i = 0; i < kAttnMaxDimsPerLane; ++i) {
    qv[i] = (active && i < dpl) ? to_f32(q[(t * p.H + h) * p.d + lane + 32 * i]) : 0.0f;
    acc[i] = 0.0f;
  }
  const float sink = active ? sinks[h] : 0.0f;
  float mx = sink, den = 1.0f;  // running max and denominator, sink included (exp(sink - mx) = 1)
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t r0 = 0; r0 < n_rows; r0 += kAttnRowsPerTile) {
      const int n_tile = static_cast<int>(min64(kAttnRowsPerTile, n_rows - r0));
      __syncthreads();
      for (int64_t i = threadIdx.x; i < n_tile * p.d; i += blockDim.x) {
        const int64_t r = i / p.d, c = i % p.d;
        s_rows[i] = to_f32(attn_row(r0 + r, n_window, first, s, kv_new, window, comp, idx, table, p)[c]);
      }
      __syncthreads();
      if (!active) continue;
      for (int r = 0; r < n_tile; ++r) {
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < kAttnMaxDimsPerLane; ++i)
          if (i < dpl) part += qv[i] * s_rows[r * p.d + lane + 32 * i];
        const float z = warp_sum(part) * p.softmax_scale;
        if (pass == 0) {
          const float new_mx = fmaxf(mx, z);
          den = den * expf(mx - new_mx) + expf(z - new_mx);
          mx = new_mx;
        } else {
          float pr = expf(z - mx) / den;
          if (p.round_probs) pr = round_bf16(pr);
#pragma unroll
          for (int i = 0; i < kAttnMaxDimsPerLane; ++i)
            if (i < dpl) acc[i] += pr * s_rows[r * p.d + lane + 32 * i];
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int i = 0; i < kAttnMaxDimsPerLane; ++i)
    if (i < dpl) out[(t * p.H + h) * p.d + lane + 32 * i] = from_f32<T>(acc[i]);
}

}  // namespace deepinfer::kernels
