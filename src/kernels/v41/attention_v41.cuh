// DeepSeek-V4.1 attention-side kernels (model_v41_flash.md §3.2, §7.2): the two-level indexer's
// scores and selections, and DSpark's block attention. The CPU reference's definitions
// (ops/cpu/cpu_v41_indexer.cc, cpu_v41_attention.cc), one token per block; the scores share the V4
// indexer's staging (indexer_head_terms) and the selections its exact radix top-k (topk_select.cuh:
// ties to the lower index).
#pragma once

#include <cstdint>

#include "kernels/attention/indexer_terms.cuh"
#include "kernels/attention/topk_select.cuh"
#include "kernels/common/device_utils.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {

inline constexpr int kIdxV41CandNone = 0, kIdxV41CandPublish = 1, kIdxV41CandRestrict = 2;

// Entry g of token t is visible when g < (pos + 1) / ratio; under restrict only inside its
// published candidate blocks cand[t, 0 .. nc) (ascending, -1 padded).
__device__ __forceinline__ bool idx_v41_allowed(const int32_t* cand, int nc, int block_size, int32_t g) {
  const int32_t b = g / block_size;
  for (int i = 0; i < nc; ++i) {
    if (cand[i] == b) return true;
  }
  return false;
}

// grid: (T, ceil(ld / 32)); block 256; dynamic shared memory indexer_smem_floats(Hi, di) floats.
// scores [T, ld]: score of every visible entry, -inf for one outside the candidate blocks
// (restrict) and past the visible ones within the launch's blocks. score = sum_h (relu(q_h . k)
// score_scale) (w_h weight_scale), heads in order.
template <typename Tq, typename Tk>
__global__ void indexer_v41_scores_kernel(const Tq* q, const float* w, const Tk* keys, const int32_t* positions,
                                          const int32_t* token_seq, const int32_t* block_tables, int max_blocks,
                                          int ratio, int rows_per_block, int Hi, int di, float score_scale,
                                          float weight_scale, int candidates, const int32_t* cand, int nc,
                                          int cand_block, float* scores, int64_t ld) {
  pdl_prologue();
  extern __shared__ float idx_sh[];
  const int64_t t = blockIdx.x;
  const int32_t n_vis = (positions[t] + 1) / ratio;
  const int32_t g0 = blockIdx.y * kIdxKeysPerBlock;
  if (g0 >= ld || g0 >= n_vis) return;  // the selection reads scores [0, n_vis) only
  const float* sd = indexer_head_terms(q, keys, block_tables, max_blocks, token_seq[t], t, g0, n_vis, rows_per_block,
                                       Hi, di, idx_sh, [&](float acc, int h) {
                                         return (fmaxf(acc, 0.0f) * score_scale) * (w[t * Hi + h] * weight_scale);
                                       });
  for (int kg = threadIdx.x; kg < kIdxKeysPerBlock; kg += blockDim.x) {
    const int32_t g = g0 + kg;
    if (g >= ld) continue;
    float acc = 0.0f;
    for (int h = 0; h < Hi; ++h) acc += sd[kg * Hi + h];
    const bool ok = g < n_vis && (candidates != kIdxV41CandRestrict || idx_v41_allowed(cand + t * nc, nc, cand_block, g));
    scores[t * ld + g] = ok ? acc + 0.0f /* -0 -> +0: keys order equal values as the reference */ : -INFINITY;
  }
}

// Writes the ascending list of the `n` indices [0, n) where keep(g), -1 padded to K: the
// selection when at most K entries compete — short rows (V4.1-Flash's candidate pool, 2,048 blocks
// of 8, is far above its K of 512) — and the candidate blocks of rows with at most nc blocks.
// Thread 0 walks them.
template <typename Keep>
__device__ inline void idx_v41_emit_all(int32_t n, int K, int32_t* out, Keep keep) {
  if (threadIdx.x != 0) return;
  int k = 0;
  for (int32_t g = 0; g < n && k < K; ++g) {
    if (keep(g)) out[k++] = g;
  }
  for (; k < K; ++k) out[k] = -1;
}

// The exact top-K of sc[0, n) (ascending, -1 padded; ties to the lower index) when `competing`
// entries (the finite ones) number more than K; otherwise every competing entry.
__device__ inline void idx_v41_select(const float* sc, int32_t n, int32_t competing, int K, int32_t* out,
                                      TopkShared& sh) {
  if (competing <= K) {
    idx_v41_emit_all(n, K, out, [&](int32_t g) { return sc[g] != -INFINITY; });
    return;
  }
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.remaining = static_cast<uint32_t>(K);
  }
  __syncthreads();
  topk_select_strided(sc, n, out, sh);
}

// grid: (T); block 256 (a multiple of 32). Under publish: each candidate block's maximum visible
// score (the newest entry's block +inf) into block_max [T, ld_blocks], its top candidate blocks
// into cand [T, nc]; then the token's top-K entries into idx [T, K].
__global__ void indexer_v41_select_kernel(const float* scores, int64_t ld, const int32_t* positions, int ratio, int K,
                                          int candidates, int32_t* cand, int nc, int cand_block, float* block_max,
                                          int64_t ld_blocks, int32_t* idx) {
  pdl_prologue();
  __shared__ TopkShared sh;
  __shared__ int32_t competing;
  const int64_t t = blockIdx.x;
  const int32_t n_vis = (positions[t] + 1) / ratio;
  const float* sc = scores + t * ld;
  if (candidates == kIdxV41CandPublish) {
    const int32_t n_blocks = (n_vis + cand_block - 1) / cand_block;
    float* bm = block_max + t * ld_blocks;
    for (int32_t b = threadIdx.x; b < n_blocks; b += blockDim.x) {
      float m = -INFINITY;
      for (int32_t g = b * cand_block; g < min(n_vis, (b + 1) * cand_block); ++g) m = fmaxf(m, sc[g]);
      bm[b] = b == (n_vis - 1) / cand_block ? INFINITY : m;
    }
    __syncthreads();
    int32_t* c = cand + t * nc;
    if (n_blocks <= nc) {
      idx_v41_emit_all(n_blocks, nc, c, [](int32_t) { return true; });
    } else {
      if (threadIdx.x == 0) {
        sh.prefix = 0;
        sh.remaining = static_cast<uint32_t>(nc);
      }
      __syncthreads();
      topk_select_strided(bm, n_blocks, c, sh);
    }
    __syncthreads();
  }
  // The competing entries: the finite scores (restrict marked the others -inf).
  if (threadIdx.x == 0) competing = 0;
  __syncthreads();
  int32_t mine = 0;
  for (int32_t g = threadIdx.x; g < n_vis; g += blockDim.x) mine += sc[g] != -INFINITY;
  atomicAdd(&competing, mine);
  __syncthreads();
  idx_v41_select(sc, n_vis, competing, K, idx + t * K, sh);
}

// ---- DSpark block attention (§7.2) ---------------------------------------------------------
// grid: (T, H); block 128; dynamic shared memory (d + max_rows) floats. A row of token t attends to
// its sequence's window ring positions [max(0, start - W, floor), start) and to every row of its
// own block, with the head's sink; probabilities rounded to BF16 for a BF16 output (the
// reference's P rounding); P V summed over the rows in order.
template <typename T>
__global__ void block_attention_kernel(const T* q, const T* kv_block, const T* window, const float* sinks,
                                       const SeqSpanDev* seqs, const int32_t* token_seq, T* out, int64_t H, int64_t d,
                                       int64_t W, int64_t ring, float softmax_scale) {
  pdl_prologue();
  extern __shared__ float ba_sh[];  // q [d], z [rows]
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const SeqSpanDev seq = seqs[token_seq[t]];
  const int64_t lo = max64(max64(0, static_cast<int64_t>(seq.start_pos) - W), seq.window_floor);
  const int64_t n_win = max64(0, seq.start_pos - lo), n = n_win + seq.n_tokens;
  float* sq = ba_sh;
  float* z = ba_sh + d;
  auto row = [&](int64_t j) -> const T* {
    return j < n_win ? window + (static_cast<int64_t>(seq.slot) * ring + (lo + j) % ring) * d
                     : kv_block + (seq.token_begin + (j - n_win)) * d;
  };
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) sq[c] = to_f32(q[(t * H + h) * d + c]);
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int64_t j = warp; j < n; j += n_warps) {  // a warp per row's logit
    const T* r = row(j);
    float acc = 0.0f;
    for (int64_t c = lane; c < d; c += 32) acc += sq[c] * to_f32(r[c]);
    acc = warp_sum(acc);
    if (lane == 0) z[j] = acc * softmax_scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, z[j]);
  mx = fmaxf(block_max(mx, scratch), sinks[h]);
  float den = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) den += (z[j] = expf(z[j] - mx));
  den = block_sum(den, scratch) + expf(sinks[h] - mx);
  const bool round_probs = sizeof(T) == 2;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float p = z[j] / den;
    z[j] = round_probs ? round_bf16(p) : p;
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float o = 0.0f;
    for (int64_t j = 0; j < n; ++j) o += z[j] * to_f32(row(j)[c]);
    out[(t * H + h) * d + c] = from_f32<T>(o);
  }
}

}  // namespace deepinfer::kernels
