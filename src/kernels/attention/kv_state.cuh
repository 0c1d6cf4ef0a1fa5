// KV-state kernels: window-ring stores, the streaming compressor (model_v4_flash.md §4.6) and
// history-row scatters. Sequences are independent; within one sequence the compressor walks its
// tokens in order (its state is a recurrence), parallel over channels.
#pragma once

#include "kernels/common/device_utils.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {


// grid: (n_seqs); copies the last min(n, W) rows of each sequence into its ring.
template <typename Tin, typename Tw>
__global__ void window_store_kernel(const Tin* kv, const SeqSpanDev* seqs, Tw* window, int64_t W, int64_t d) {
  const SeqSpanDev s = seqs[blockIdx.x];
  const int32_t first = max(0, s.n_tokens - static_cast<int32_t>(W));
  for (int32_t i = first; i < s.n_tokens; ++i) {
    const int64_t pos = s.start_pos + i;
    Tw* dst = window + (static_cast<int64_t>(s.slot) * W + pos % W) * d;
    const Tin* src = kv + static_cast<int64_t>(s.token_begin + i) * d;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) dst[c] = from_f32<Tw>(to_f32(src[c]));
  }
}

struct CompressParamsDev {
  int ratio = 0;
  bool overlapped = false;
  int64_t dc = 0;
  int64_t width = 0;    // kappa * dc
  int64_t n_state = 0;  // 2m (overlapped) or m
};

// grid: (n_seqs, ceil(dc / blockDim.x)); thread owns output channel j (and for overlapped, both
// halves j and dc + j of the state). emit_base[s] = index of the sequence's first emitted row.
__global__ void compress_kernel(const float* kv, const float* score, const float* ape, const SeqSpanDev* seqs,
                                const int32_t* emit_base, CompressParamsDev p, float* state_kv, float* state_score,
                                float* rows) {
  const SeqSpanDev s = seqs[blockIdx.x];
  const int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (j >= p.dc) return;
  const int m = p.ratio;
  float* sk = state_kv + static_cast<int64_t>(s.slot) * p.n_state * p.width;
  float* ss = state_score + static_cast<int64_t>(s.slot) * p.n_state * p.width;
  int32_t emit = emit_base[blockIdx.x];
  const int n_half = p.overlapped ? 2 : 1;
  for (int32_t i = 0; i < s.n_tokens; ++i) {
    const int64_t t = s.token_begin + i;
    const int64_t pos = s.start_pos + i;
    const int64_t slot = (p.overlapped ? m : 0) + pos % m;
    for (int h = 0; h < n_half; ++h) {
      const int64_t c = j + h * p.dc;
      sk[slot * p.width + c] = kv[t * p.width + c];
      ss[slot * p.width + c] = score[t * p.width + c] + ape[(pos % m) * p.width + c];
    }
    if ((pos + 1) % m != 0) continue;
    float mx = -INFINITY;
    for (int64_t k = 0; k < p.n_state; ++k) {
      const int64_t c = (p.overlapped && k >= m) ? p.dc + j : j;
      mx = fmaxf(mx, ss[k * p.width + c]);
    }
    float den = 0.0f, acc = 0.0f;
    for (int64_t k = 0; k < p.n_state; ++k) {
      const int64_t c = (p.overlapped && k >= m) ? p.dc + j : j;
      const float sc = ss[k * p.width + c];
      const float e = sc == -INFINITY ? 0.0f : expf(sc - mx);
      den += e;
      acc += e * sk[k * p.width + c];
    }
    rows[static_cast<int64_t>(emit) * p.dc + j] = acc / den;
    ++emit;
    if (p.overlapped) {  // current group -> previous group (both halves this thread owns)
      for (int k = 0; k < m; ++k)
        for (int h = 0; h < 2; ++h) {
          const int64_t c = j + h * p.dc;
          sk[k * p.width + c] = sk[(m + k) * p.width + c];
          ss[k * p.width + c] = ss[(m + k) * p.width + c];
        }
    }
  }
}

// grid: (n_emit); pool[dst[i]] = rows[i] when dst >= 0.
template <typename Tin, typename Tp>
__global__ void store_rows_kernel(const Tin* rows, const int32_t* dst, Tp* pool, int64_t width) {
  const int64_t i = blockIdx.x;
  const int32_t d = dst[i];
  if (d < 0) return;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) pool[static_cast<int64_t>(d) * width + c] = from_f32<Tp>(to_f32(rows[i * width + c]));
}

}  // namespace deepinfer::kernels
