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
  pdl_prologue();
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
  int64_t n_state = 0;  // positions an emission reads: 2m (overlapped) or m
  int64_t ring = 0;     // positions a slot holds (position p at slot p % ring), >= n_state
};

// The streaming compressor in two parallel steps with the sequential recurrence's exact results.
// Writing the per-sequence state position by position while walking the tokens (the reference's
// form) is a serial chain of n_tokens steps — 12 ms per layer for an 8K prefill — yet the state is
// positional (position p's projections at slot p % ring), so every value it produces is known in
// closed form: an emission at position q reads positions q + 1 - n_state .. q from the chunk, or
// from the state where they came before it. compress_rows_kernel computes the emitted rows from
// the chunk and the state as it was on entry; compress_state_kernel then writes the chunk's last
// `ring` positions into the state. Same values, same summation order as the sequential form (max
// first, then den and acc over the candidates in position order), so rows and state match it bit
// for bit.

// A token's (value, score) for channel c at position pos of sequence s: from the chunk when
// pos >= start_pos (score + ape, as the state would hold it), absent (score -inf) below position
// 0, else from the state's slot pos % ring.
__device__ __forceinline__ float compress_cand(const float* kv, const float* score, const float* ape,
                                               const SeqSpanDev& s, const CompressParamsDev& p, const float* sk,
                                               const float* ss, int64_t pos, int64_t c, float* val) {
  if (pos >= s.start_pos) {
    const int64_t t = s.token_begin + (pos - s.start_pos);
    *val = kv[t * p.width + c];
    return score[t * p.width + c] + ape[(pos % p.ratio) * p.width + c];
  }
  if (pos < 0) {
    *val = 0.0f;
    return -INFINITY;
  }
  const int64_t slot = pos % p.ring;
  *val = sk[slot * p.width + c];
  return ss[slot * p.width + c];
}

// grid: (n_emit, ceil(dc / blockDim.x)); row e of the emission plan (token[e] >= n_tokens: a pad,
// nothing to do), channel j. Reads the state as it was before the chunk.
__global__ void compress_rows_kernel(const float* kv, const float* score, const float* ape, const SeqSpanDev* seqs,
                                     const int32_t* token_seq, const int32_t* emit_token, int64_t n_tokens,
                                     CompressParamsDev p, const float* state_kv, const float* state_score,
                                     float* rows) {
  pdl_prologue();
  const int64_t e = blockIdx.x;
  const int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int32_t t = emit_token[e];
  if (j >= p.dc || t >= n_tokens) return;
  const SeqSpanDev s = seqs[token_seq[t]];
  const int64_t m = p.ratio, q = s.start_pos + (t - s.token_begin), first = q + 1 - p.n_state;
  const float* sk = state_kv + static_cast<int64_t>(s.slot) * p.ring * p.width;
  const float* ss = state_score + static_cast<int64_t>(s.slot) * p.ring * p.width;
  // Candidate k is position first + k: overlapped = the previous group's tokens in the first half
  // of the channels and the current group's in the second half; plain = the current group's.
  auto cand = [&](int64_t k, float* val) {
    const int64_t c = p.overlapped && k >= m ? p.dc + j : j;
    return compress_cand(kv, score, ape, s, p, sk, ss, first + k, c, val);
  };
  float val, mx = -INFINITY;
  for (int64_t k = 0; k < p.n_state; ++k) mx = fmaxf(mx, cand(k, &val));
  float den = 0.0f, acc = 0.0f;
  for (int64_t k = 0; k < p.n_state; ++k) {
    const float sc = cand(k, &val);
    const float ex = sc == -INFINITY ? 0.0f : expf(sc - mx);
    den += ex;
    acc += ex * val;
  }
  rows[e * p.dc + j] = acc / den;
}

// grid: (n_seqs, ring, ceil(width / blockDim.x)); slot r, channel c: the chunk's last position at
// that slot, if the chunk has one (slots of positions before the chunk keep what they hold).
__global__ void compress_state_kernel(const float* kv, const float* score, const float* ape, const SeqSpanDev* seqs,
                                      CompressParamsDev p, float* state_kv, float* state_score) {
  pdl_prologue();
  const SeqSpanDev s = seqs[blockIdx.x];
  const int64_t r = blockIdx.y, c = static_cast<int64_t>(blockIdx.z) * blockDim.x + threadIdx.x;
  if (c >= p.width || s.n_tokens == 0) return;
  const int64_t L = s.start_pos + s.n_tokens - 1;  // the chunk's last position
  if (L < r) return;
  const int64_t q = L - (L - r) % p.ring;  // the last position at slot r
  if (q < s.start_pos) return;
  float v;
  const float sc = compress_cand(kv, score, ape, s, p, nullptr, nullptr, q, c, &v);
  const int64_t at = (static_cast<int64_t>(s.slot) * p.ring + r) * p.width + c;
  state_kv[at] = v;
  state_score[at] = sc;
}

// grid: (n_emit); pool[dst[i]] = rows[i] when dst >= 0.
template <typename Tin, typename Tp>
__global__ void store_rows_kernel(const Tin* rows, const int32_t* dst, Tp* pool, int64_t width) {
  pdl_prologue();
  const int64_t i = blockIdx.x;
  const int32_t d = dst[i];
  if (d < 0) return;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) pool[static_cast<int64_t>(d) * width + c] = from_f32<Tp>(to_f32(rows[i * width + c]));
}

}  // namespace deepinfer::kernels
