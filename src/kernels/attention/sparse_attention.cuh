// Sparse shared-KV attention with sinks (model_v4_flash.md §4.8). One block per (token, group of
// G heads), 16 warps; the token's rows (window, then selected or all compressed rows) are cut
// into 16 contiguous ranges, one per warp, so even one decode token keeps 64 x 16 warps busy. A warp
// reads each of its rows once (lane = d/32 contiguous dims) for all G heads.
//   pass 1: per warp and head, running max / denominator over its rows (warp 0 also holds the
//           sink as exp(sink - max)); the block combines them in warp order;
//   pass 2: per warp, P.V over its rows with exactly normalised probabilities (rounded to BF16
//           under the official contract, as the reference feeds BF16 probabilities to P.V);
//           the block sums the warp partials in warp order.
// The split depends only on the token's own row count, so the result is batch invariant, and G
// (picked from the batch size for parallelism) does not change any head's arithmetic.
#pragma once

#include "kernels/attention/kv_state.cuh"
#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kAttnWarps = 16;
inline constexpr int kAttnMaxDimsPerLane = 16;  // head_dim <= 512

struct AttentionParamsDev {
  int64_t H = 0, d = 0, W = 0;
  int64_t ring = 0;           // window ring rows per slot: position p at p % ring (>= W)
  int ratio = 0;
  bool all_compressed = false;
  int rows_per_block = 0;
  int max_blocks = 0;
  int K = 0;                  // comp_idx columns (CSA)
  float softmax_scale = 0.0f;
  bool round_probs = false;
  // Non-null: the tensor-core kernel de-rotates the output's last rope_n dims (rope_kernel with
  // sign rope_sign at the token's position) in its epilogue.
  const float* rope_inv_freq = nullptr;
  int rope_n = 0;
  float rope_sign = 1.0f;
};

template <typename T>
__device__ __forceinline__ const T* attn_row(int64_t r, int64_t n_window, int64_t first, const SeqSpanDev& s,
                                             const T* kv_new, const T* window, const T* comp, const int32_t* idx,
                                             const int32_t* table, const AttentionParamsDev& p) {
  if (r < n_window) {
    const int64_t q = first + r;
    if (q >= s.start_pos) return kv_new + (s.token_begin + q - s.start_pos) * p.d;
    return window + (static_cast<int64_t>(s.slot) * p.ring + q % p.ring) * p.d;
  }
  const int64_t c = r - n_window;
  const int32_t g = p.all_compressed ? static_cast<int32_t>(c) : idx[c];
  const int32_t blk = table[g / p.rows_per_block];
  return comp + (static_cast<int64_t>(blk) * p.rows_per_block + g % p.rows_per_block) * p.d;
}

// The rows token t attends to: its window [first, pos] (window_floor bounds it after a prefix
// hit), then its selected (CSA: comp_idx, -1 padded: the rows before its first -1) or all (HCA)
// compressed rows — n_rows in all, row r resolved by attn_row. Both attention kernels start from
// this, with every thread of the block: the block finds the first -1 together (each thread scans
// a strided share of the K entries, then a shared-memory minimum) — one thread walking the row
// entry by entry took ~10 us of a decode token's attention at K = 512.
struct TokenRows {
  int64_t first = 0, n_window = 0, n_rows = 0;
  const int32_t* idx = nullptr;  // the token's comp_idx row (CSA), else nullptr
};
__device__ __forceinline__ TokenRows token_rows(int64_t t, int64_t pos, const SeqSpanDev& s, const int32_t* comp_idx,
                                                const AttentionParamsDev& p) {
  __shared__ int s_first_neg;
  TokenRows tr;
  tr.first = max64(max64(0, pos - p.W + 1), s.window_floor);
  tr.n_window = pos - tr.first + 1;
  tr.idx = p.all_compressed || comp_idx == nullptr ? nullptr : comp_idx + t * p.K;
  int64_t n_comp = 0;
  if (p.ratio > 0) {
    if (p.all_compressed) {
      n_comp = (pos + 1) / p.ratio;
    } else {
      if (threadIdx.x == 0) s_first_neg = p.K;
      __syncthreads();
      for (int i = threadIdx.x; i < p.K; i += blockDim.x) {
        if (tr.idx[i] < 0) {
          atomicMin(&s_first_neg, i);
          break;  // this thread's later entries cannot be the first
        }
      }
      __syncthreads();
      n_comp = s_first_neg;
    }
  }
  tr.n_rows = tr.n_window + n_comp;
  return tr;
}

// Dynamic shared memory: kAttnWarps x G x d floats (warp partials of P.V).
template <typename T, int G>
__global__ void __launch_bounds__(kAttnWarps * 32) sparse_attention_kernel(const T* q, const T* kv_new, const T* window,
                                                               const T* comp, const int32_t* comp_idx,
                                                               const float* sinks, const int32_t* positions,
                                                               const int32_t* token_seq, const SeqSpanDev* seqs,
                                                               const int32_t* block_tables, AttentionParamsDev p,
                                                               T* out) {
  pdl_prologue();
  extern __shared__ float s_acc[];  // [kAttnWarps][G][d]
  __shared__ float s_mx[kAttnWarps][G], s_den[kAttnWarps][G];
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * G;
  const SeqSpanDev s = seqs[token_seq[t]];
  const TokenRows tr = token_rows(t, positions[t], s, comp_idx, p);
  const int64_t first = tr.first, n_window = tr.n_window, n_rows = tr.n_rows;
  const int32_t* idx = tr.idx;
  const int64_t per_warp = (n_rows + kAttnWarps - 1) / kAttnWarps;
  const int64_t r_begin = min64(n_rows, warp * per_warp), r_end = min64(n_rows, r_begin + per_warp);
  const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * p.max_blocks;
  const int dpl = static_cast<int>(p.d / 32);  // dims per lane, contiguous: [lane * dpl, +dpl)
  const int64_t c0 = static_cast<int64_t>(lane) * dpl;

  float qv[G][kAttnMaxDimsPerLane];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < kAttnMaxDimsPerLane; ++i)
      qv[g][i] = (h0 + g < p.H && i < dpl) ? to_f32(q[(t * p.H + h0 + g) * p.d + c0 + i]) : 0.0f;

  const bool vec = dpl == kAttnMaxDimsPerLane;  // d = 512: 32 or 64 contiguous bytes per lane
  auto load_row = [&](int64_t r, float* v) {
    const T* row = attn_row(r, n_window, first, s, kv_new, window, comp, idx, table, p) + c0;
    if (vec) {
      constexpr int kPer = 16 / sizeof(T);  // elements per 16-byte load
#pragma unroll
      for (int i = 0; i < kAttnMaxDimsPerLane; i += kPer) {
        const uint4 raw = *reinterpret_cast<const uint4*>(row + i);
        const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int j = 0; j < kPer; ++j) v[i + j] = to_f32(e[j]);
      }
      return;
    }
#pragma unroll
    for (int i = 0; i < kAttnMaxDimsPerLane; ++i) v[i] = i < dpl ? to_f32(row[i]) : 0.0f;
  };
  auto logit = [&](const float* v, int g) {
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < kAttnMaxDimsPerLane; ++i) part += qv[g][i] * v[i];
    return warp_sum(part) * p.softmax_scale;
  };

  // Pass 1: this warp's running max / denominator per head (warp 0 starts from the sink).
  float mx[G], den[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const bool has_sink = warp == 0 && h0 + g < p.H;
    mx[g] = has_sink ? sinks[h0 + g] : -INFINITY;
    den[g] = has_sink ? 1.0f : 0.0f;
  }
  // Calls f(row values) for each of this warp's rows in order, loading one row ahead of its use
  // (a warp's rows form a dependent chain otherwise). Both passes stream the rows this way.
  auto for_each_row = [&](auto&& f) {
    float v[kAttnMaxDimsPerLane], next[kAttnMaxDimsPerLane];
    if (r_begin < r_end) load_row(r_begin, next);
    for (int64_t r = r_begin; r < r_end; ++r) {
#pragma unroll
      for (int i = 0; i < kAttnMaxDimsPerLane; ++i) v[i] = next[i];
      if (r + 1 < r_end) load_row(r + 1, next);
      f(v);
    }
  };
  for_each_row([&](const float* v) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float z = logit(v, g);
      const float new_mx = fmaxf(mx[g], z);
      den[g] = den[g] * expf(mx[g] - new_mx) + expf(z - new_mx);
      mx[g] = new_mx;
    }
  });
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) s_mx[warp][g] = mx[g], s_den[warp][g] = den[g];
  }
  __syncthreads();
  // Block max and denominator per head, combined in warp order (every thread alike).
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float m = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w) m = fmaxf(m, s_mx[w][g]);
    float d = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w)
      if (s_den[w][g] > 0.0f) d += s_den[w][g] * expf(s_mx[w][g] - m);
    mx[g] = m;
    den[g] = d;
  }

  // Pass 2: P.V over this warp's rows.
  float acc[G][kAttnMaxDimsPerLane];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < kAttnMaxDimsPerLane; ++i) acc[g][i] = 0.0f;
  for_each_row([&](const float* v) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float pr = expf(logit(v, g) - mx[g]) / den[g];
      if (p.round_probs) pr = round_bf16(pr);
#pragma unroll
      for (int i = 0; i < kAttnMaxDimsPerLane; ++i) acc[g][i] += pr * v[i];
    }
  });
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < kAttnMaxDimsPerLane; ++i)
      if (i < dpl) s_acc[(warp * G + g) * p.d + c0 + i] = acc[g][i];
  __syncthreads();
  for (int64_t e = threadIdx.x; e < G * p.d; e += blockDim.x) {
    const int g = static_cast<int>(e / p.d);
    if (h0 + g >= p.H) continue;
    float o = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) o += s_acc[w * G * p.d + e];
    out[(t * p.H + h0) * p.d + e] = from_f32<T>(o);
  }
}

}  // namespace deepinfer::kernels
