// Lightning indexer (model_v4_flash.md §4.7): scores of every visible indexer key for each query
// token, then an exact top-k by radix select with lowest-index tie breaking, emitted in ascending
// index order (-1 padded). Deterministic: histograms count (order-free), selection scans indices
// in order.
#pragma once

#include "kernels/attention/kv_state.cuh"
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

// Order-preserving map float -> uint32 (larger float -> larger key).
__device__ __forceinline__ uint32_t float_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// grid: (T); block 256. idx [T, K]: the K best of scores[t, 0 .. n_avail) ascending, -1 padded.
__global__ void topk_select_kernel(const float* scores, int64_t ld, const int32_t* positions, int ratio, int K,
                                   int32_t* idx) {
  pdl_prologue();
  __shared__ uint32_t hist[256];
  __shared__ uint32_t s_prefix, s_remaining;
  __shared__ int32_t warp_counts[32];
  __shared__ int32_t s_base, s_ties_left;
  const int64_t t = blockIdx.x;
  const int32_t n = (positions[t] + 1) / ratio;
  const float* sc = scores + t * ld;
  int32_t* out = idx + t * K;
  if (n <= K) {  // everything is selected
    for (int i = threadIdx.x; i < K; i += blockDim.x) out[i] = i < n ? i : -1;
    return;
  }
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_remaining = K;
  }
  __syncthreads();
  // Radix select of the K-th largest key, 8 bits at a time from the top.
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    const uint32_t mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
      const uint32_t key = float_key(sc[i]);
      if ((key & mask) == (s_prefix & mask)) atomicAdd(&hist[(key >> shift) & 0xff], 1u);
    }
    __syncthreads();
    // The digit: the highest d whose count from the top (bins d .. 255) reaches s_remaining; the
    // keys above it leave s_remaining - (bins above d). Warp 0 scans the 256 bins from the top in
    // parallel (lane l: bins 255 - 8l .. 248 - 8l) — one thread walking them took ~3 us per digit.
    if (threadIdx.x < 32) {
      const int l = threadIdx.x;
      uint32_t cnt[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += (cnt[j] = hist[255 - 8 * l - j]);
      uint32_t incl = sum;  // bins 255 .. 248 - 8l
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
        if (l >= o) incl += v;
      }
      const uint32_t remaining = s_remaining;
      uint32_t before = incl - sum;  // bins above this lane's
      __syncwarp();
      if (before < remaining && remaining <= incl) {  // the one lane where the count crosses
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (before + cnt[j] >= remaining) {
            s_prefix |= static_cast<uint32_t>(255 - 8 * l - j) << shift;
            s_remaining = remaining - before;
            break;
          }
          before += cnt[j];
        }
      }
    }
    __syncthreads();
  }
  const uint32_t tau = s_prefix;  // the K-th largest key; s_remaining of its ties are selected
  if (threadIdx.x == 0) {
    s_base = 0;
    s_ties_left = static_cast<int32_t>(s_remaining);
  }
  __syncthreads();
  // Emit in index order: keys > tau, and the first s_remaining keys == tau.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int32_t c0 = 0; c0 < n; c0 += blockDim.x) {
    const int32_t i = c0 + threadIdx.x;
    const uint32_t key = i < n ? float_key(sc[i]) : 0u;
    const bool above = i < n && key > tau;
    const bool tie = i < n && key == tau;
    // Ties: rank among this chunk's ties, in index order.
    const uint32_t tie_ballot = __ballot_sync(0xffffffffu, tie);
    if (lane == 0) warp_counts[warp] = __popc(tie_ballot);
    __syncthreads();
    int32_t tie_rank = __popc(tie_ballot & ((1u << lane) - 1));
    for (int w2 = 0; w2 < warp; ++w2) tie_rank += warp_counts[w2];
    const bool take = above || (tie && tie_rank < s_ties_left);
    __syncthreads();
    const uint32_t take_ballot = __ballot_sync(0xffffffffu, take);
    if (lane == 0) warp_counts[warp] = __popc(take_ballot);
    __syncthreads();
    int32_t pos = s_base + __popc(take_ballot & ((1u << lane) - 1));
    int32_t n_tie_taken = 0, n_taken = 0;
    for (int w2 = 0; w2 < n_warps; ++w2) {
      if (w2 < warp) pos += warp_counts[w2];
      n_taken += warp_counts[w2];
    }
    if (take) out[pos] = i;
    // Count ties taken in this chunk (thread 0 recomputes from the shared counts).
    __syncthreads();
    const uint32_t tie_taken_ballot = __ballot_sync(0xffffffffu, take && tie);
    if (lane == 0) warp_counts[warp] = __popc(tie_taken_ballot);
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w2 = 0; w2 < n_warps; ++w2) n_tie_taken += warp_counts[w2];
      s_base += n_taken;
      s_ties_left -= n_tie_taken;
    }
    __syncthreads();
  }
}

}  // namespace deepinfer::kernels
