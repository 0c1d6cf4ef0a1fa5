// Exact top-k of each token's indexer scores (model_v4_flash.md §4.7): radix select of the K-th
// largest key with lowest-index tie breaking, the selection emitted in ascending index order (-1
// padded). Deterministic: histograms count (order-free), the emission ranks indices in order, so
// the block size and the path below change no output.
//
// One block per token. Where the token's scores fit the block's shared-memory capacity (a decode
// token's 32,768 at 128K context over 1,024 threads) they are read from global memory once, kept
// as order-preserving keys in shared memory for the four 8-bit digit passes, and emitted in one
// pass: each thread owns a contiguous index range, two block scans rank its ties and its selected
// indices. (Grouping a warp's equal digits with __match_any_sync for one atomic per group made the
// 128K row's selection 128 us instead of 86: the match instruction costs more than the atomics'
// contention, H200, session 19.) Longer rows (prefill blocks beyond their capacity) take the
// strided path: the same digit passes from global memory, then the emission chunk by chunk.
#pragma once

#include <cstdint>

#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

// Order-preserving map float -> uint32 (larger float -> larger key).
__device__ __forceinline__ uint32_t float_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Shared-memory keys per thread of the fast path, and its padded layout: key g at g + g / 32, so a
// warp's 32 consecutive keys and 32 threads' contiguous ranges both hit 32 distinct banks.
inline constexpr int kTopkKeysPerThread = 32;
__host__ __device__ constexpr int64_t topk_smem_slot(int64_t g) { return g + (g >> 5); }
__host__ __device__ constexpr size_t topk_smem_bytes(int64_t capacity) {
  return capacity > 0 ? static_cast<size_t>(topk_smem_slot(capacity - 1) + 1) * sizeof(uint32_t) : 0;
}

struct TopkShared {
  uint32_t hist[256];
  uint32_t prefix, remaining;
  int32_t warp_counts[32];
  int32_t base, ties_left;
};

// After a digit's histogram: the digit is the highest d whose count from the top (bins d .. 255)
// reaches sh.remaining; the keys above it leave remaining - (bins above d). Warp 0 scans the 256
// bins from the top in parallel (lane l: bins 255 - 8l .. 248 - 8l) — one thread walking them
// took ~3 us per digit. Call with every thread of the block; ends with a barrier.
__device__ inline void topk_pick_digit(TopkShared& sh, int shift) {
  if (threadIdx.x < 32) {
    const int l = threadIdx.x;
    uint32_t cnt[8], sum = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += (cnt[j] = sh.hist[255 - 8 * l - j]);
    uint32_t incl = sum;  // bins 255 .. 248 - 8l
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
      if (l >= o) incl += v;
    }
    const uint32_t remaining = sh.remaining;
    uint32_t before = incl - sum;  // bins above this lane's
    __syncwarp();
    if (before < remaining && remaining <= incl) {  // the one lane where the count crosses
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (before + cnt[j] >= remaining) {
          sh.prefix |= static_cast<uint32_t>(255 - 8 * l - j) << shift;
          sh.remaining = remaining - before;
          break;
        }
        before += cnt[j];
      }
    }
  }
  __syncthreads();
}

// Exclusive prefix sum of v over the block's threads in thread order, through sh.warp_counts.
// Every thread must call it; it holds barriers.
__device__ inline int32_t topk_block_exclusive_scan(int32_t v, TopkShared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  int32_t incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t u = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += u;
  }
  if (lane == 31) sh.warp_counts[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int32_t w = lane < n_warps ? sh.warp_counts[lane] : 0, wi = w;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t u = __shfl_up_sync(0xffffffffu, wi, o);
      if (lane >= o) wi += u;
    }
    __syncwarp();
    if (lane < n_warps) sh.warp_counts[lane] = wi - w;  // exclusive, per warp
  }
  __syncthreads();
  const int32_t out = sh.warp_counts[warp] + incl - v;
  __syncthreads();  // warp_counts is free again
  return out;
}

// The four 8-bit digit passes of the radix select over keys [0, n) (key_at(g): row g's key):
// after them sh.prefix is the K-th largest key and sh.remaining the number of its ties selected.
template <typename KeyAt>
__device__ inline void topk_digit_passes(int32_t n, TopkShared& sh, KeyAt key_at) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sh.hist[i] = 0;
    __syncthreads();  // (also orders whatever the caller wrote before the first pass)
    const uint32_t mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8)), prefix = sh.prefix & mask;
    for (int32_t g = threadIdx.x; g < n; g += blockDim.x) {
      const uint32_t key = key_at(g);
      if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    topk_pick_digit(sh, shift);
  }
}

// The fast path: keys [0, n) in shared memory (n <= blockDim.x * kTopkKeysPerThread).
__device__ inline void topk_select_smem(const float* sc, int32_t n, int32_t* out, TopkShared& sh, uint32_t* keys) {
  for (int32_t g = threadIdx.x; g < n; g += blockDim.x) keys[topk_smem_slot(g)] = float_key(sc[g]);
  topk_digit_passes(n, sh, [&](int32_t g) { return keys[topk_smem_slot(g)]; });
  const uint32_t tau = sh.prefix;  // the K-th largest key; sh.remaining of its ties are selected
  const int32_t ties_wanted = static_cast<int32_t>(sh.remaining);
  // Each thread's contiguous range [begin, end): its keys above tau and its ties, ranked in
  // thread (= index) order by two block scans.
  const int32_t per = (n + static_cast<int32_t>(blockDim.x) - 1) / static_cast<int32_t>(blockDim.x);
  const int32_t begin = min(n, static_cast<int32_t>(threadIdx.x) * per), end = min(n, begin + per);
  int32_t above = 0, ties = 0;
  for (int32_t g = begin; g < end; ++g) {
    const uint32_t key = keys[topk_smem_slot(g)];
    above += key > tau;
    ties += key == tau;
  }
  const int32_t ties_before = topk_block_exclusive_scan(ties, sh);
  const int32_t my_ties = max(0, min(ties, ties_wanted - ties_before));  // the first ties in index order
  int32_t pos = topk_block_exclusive_scan(above + my_ties, sh);
  int32_t ties_taken = 0;
  for (int32_t g = begin; g < end; ++g) {
    const uint32_t key = keys[topk_smem_slot(g)];
    if (key > tau || (key == tau && ties_taken++ < my_ties)) out[pos++] = g;
  }
}

// The strided path (rows beyond the shared-memory capacity): the digit passes read the scores from
// global memory, and the emission walks the row in chunks of blockDim.x indices.
__device__ inline void topk_select_strided(const float* sc, int32_t n, int32_t* out, TopkShared& sh) {
  topk_digit_passes(n, sh, [&](int32_t g) { return float_key(sc[g]); });
  const uint32_t tau = sh.prefix;
  if (threadIdx.x == 0) {
    sh.base = 0;
    sh.ties_left = static_cast<int32_t>(sh.remaining);
  }
  __syncthreads();
  // Emit in index order: keys > tau, and the first sh.remaining keys == tau.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int32_t c0 = 0; c0 < n; c0 += blockDim.x) {
    const int32_t i = c0 + threadIdx.x;
    const uint32_t key = i < n ? float_key(sc[i]) : 0u;
    const bool above = i < n && key > tau;
    const bool tie = i < n && key == tau;
    // Ties: rank among this chunk's ties, in index order.
    const uint32_t tie_ballot = __ballot_sync(0xffffffffu, tie);
    if (lane == 0) sh.warp_counts[warp] = __popc(tie_ballot);
    __syncthreads();
    int32_t tie_rank = __popc(tie_ballot & ((1u << lane) - 1));
    for (int w2 = 0; w2 < warp; ++w2) tie_rank += sh.warp_counts[w2];
    const bool take = above || (tie && tie_rank < sh.ties_left);
    __syncthreads();
    const uint32_t take_ballot = __ballot_sync(0xffffffffu, take);
    if (lane == 0) sh.warp_counts[warp] = __popc(take_ballot);
    __syncthreads();
    int32_t pos = sh.base + __popc(take_ballot & ((1u << lane) - 1));
    int32_t n_tie_taken = 0, n_taken = 0;
    for (int w2 = 0; w2 < n_warps; ++w2) {
      if (w2 < warp) pos += sh.warp_counts[w2];
      n_taken += sh.warp_counts[w2];
    }
    if (take) out[pos] = i;
    // Count ties taken in this chunk (thread 0 recomputes from the shared counts).
    __syncthreads();
    const uint32_t tie_taken_ballot = __ballot_sync(0xffffffffu, take && tie);
    if (lane == 0) sh.warp_counts[warp] = __popc(tie_taken_ballot);
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w2 = 0; w2 < n_warps; ++w2) n_tie_taken += sh.warp_counts[w2];
      sh.base += n_taken;
      sh.ties_left -= n_tie_taken;
    }
    __syncthreads();
  }
}

// grid: (T); block: a multiple of 32 up to 1,024; dynamic shared memory topk_smem_bytes(capacity)
// with capacity <= blockDim.x * kTopkKeysPerThread (0: the strided path for every row).
// idx [T, K]: the K best of scores[t, 0 .. n_avail) ascending, -1 padded. Static: a header's
// kernel in every launch file that includes it (launch_kv.cu, launch_v41.cu) would be defined twice.
static __global__ void topk_select_kernel(const float* scores, int64_t ld, const int32_t* positions, int ratio, int K,
                                   int32_t capacity, int32_t* idx) {
  pdl_prologue();
  extern __shared__ uint32_t topk_keys[];
  __shared__ TopkShared sh;
  const int64_t t = blockIdx.x;
  const int32_t n = (positions[t] + 1) / ratio;
  const float* sc = scores + t * ld;
  int32_t* out = idx + t * K;
  if (n <= K) {  // everything is selected
    for (int i = threadIdx.x; i < K; i += blockDim.x) out[i] = i < n ? i : -1;
    return;
  }
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.remaining = K;
  }
  __syncthreads();
  if (n <= capacity) {
    topk_select_smem(sc, n, out, sh, topk_keys);
  } else {
    topk_select_strided(sc, n, out, sh);
  }
}

}  // namespace deepinfer::kernels
