// Lightning-indexer scores on tensor cores for BF16 queries and keys (the official numerics):
// score[t][g] = sum_h relu(q[t][h] . k[g]) * w[t][h] * weight_scale (model_v4_flash.md §4.7).
// Per token the dots are a [heads x di] x [di x keys] product — the scalar kernel (indexer.cuh)
// spent 30 ms per CSA layer on it at an 8K prefill and grows quadratically with the context.
//
// One CTA per (token, 128 keys), 4 warps of 32 keys x all (up to 64) heads; Q and the key block
// are staged in shared memory by cp.async (zero-padded to 64 heads x 128 dims, so smaller models
// run the same code), fragments come from ldmatrix, BF16 mma with F32 accumulation. A lane then
// weighs its 8 heads of each of its key columns and the 8 lanes sharing the columns add their
// sums by a fixed butterfly: every score depends only on its token and key (batch invariant). The
// dots are summed in tensor-core order rather than the reference's sequential one, so scores
// agree with it to rounding (exactly for integer-valued inputs, which the tests use to demand
// the same top-k, ties included).
#pragma once

#include "kernels/attention/indexer.cuh"
#include "kernels/common/mma_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kIdxMmaKeys = 128, kIdxMmaHeads = 64, kIdxMmaDims = 128, kIdxMmaPad = 8;

__host__ __device__ constexpr bool indexer_mma_supports(int Hi, int di) {
  return Hi <= kIdxMmaHeads && di <= kIdxMmaDims && di % 8 == 0;
}
// Dynamic shared memory: Q [64][128 + pad] and keys [128][128 + pad], BF16.
__host__ __device__ constexpr size_t indexer_mma_smem_bytes() {
  return static_cast<size_t>(kIdxMmaHeads + kIdxMmaKeys) * (kIdxMmaDims + kIdxMmaPad) * 2;
}

// grid: (T, ceil(ld / 128)), block 128. Same contract as indexer_scores_kernel: scores [T, ld]
// F32, [0, n_avail) written (-inf past n_avail within the last block), the rest untouched.
__global__ void __launch_bounds__(128) indexer_scores_mma_kernel(const __nv_bfloat16* q, const float* w,
                                                                 const __nv_bfloat16* keys, const int32_t* positions,
                                                                 const int32_t* token_seq, const int32_t* block_tables,
                                                                 int max_blocks, int ratio, int rows_per_block, int Hi,
                                                                 int di, float weight_scale, float* scores,
                                                                 int64_t ld) {
  pdl_prologue();
  using bf16 = __nv_bfloat16;
  constexpr int LD = kIdxMmaDims + kIdxMmaPad;
  extern __shared__ __align__(16) unsigned char idx_smem[];
  bf16* sQ = reinterpret_cast<bf16*>(idx_smem);  // [64][LD]
  bf16* sK = sQ + kIdxMmaHeads * LD;              // [128][LD]
  const int64_t t = blockIdx.x;
  const int32_t n_avail = (positions[t] + 1) / ratio;
  const int64_t g0 = static_cast<int64_t>(blockIdx.y) * kIdxMmaKeys;
  if (g0 >= ld || g0 >= n_avail) return;  // the top-k reads scores [0, n_avail) only
  const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * max_blocks;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;

  constexpr int kChunks = kIdxMmaDims / 8;  // 16-byte chunks per padded row
  for (int i = threadIdx.x; i < kIdxMmaHeads * kChunks; i += blockDim.x) {
    const int h = i / kChunks, ch = i % kChunks;
    const bool ok = h < Hi && ch * 8 < di;
    cp_async16(sQ + h * LD + ch * 8, ok ? q + (t * Hi + h) * di + ch * 8 : q, ok);
  }
  for (int i = threadIdx.x; i < kIdxMmaKeys * kChunks; i += blockDim.x) {
    const int kk = i / kChunks, ch = i % kChunks;
    const int64_t gk = g0 + kk;
    const bool ok = gk < n_avail && ch * 8 < di;
    const bf16* src = keys;
    if (ok) {
      const int32_t blk = table[gk / rows_per_block];
      src = keys + (static_cast<int64_t>(blk) * rows_per_block + gk % rows_per_block) * di + ch * 8;
    }
    cp_async16(sK + kk * LD + ch * 8, src, ok);
  }
  cp_async_commit();
  // The lane's head weights (heads mt * 16 + g + 8 half), zero past Hi.
  float wh[4][2];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int h = mt * 16 + g + 8 * half;
      wh[mt][half] = h < Hi ? w[t * Hi + h] : 0.0f;
    }
  cp_async_wait<0>();
  __syncthreads();

  float acc[4][4][4] = {};  // [m16 head tile][n8 key tile][fragment]
  const int key0 = warp * 32;
#pragma unroll
  for (int ks = 0; ks < kIdxMmaDims / 16; ++ks) {
    if (ks * 16 >= di) break;  // zero-padded dims add nothing
    uint32_t af[4][4];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
      ldmatrix_x4(af[mt], sQ + (mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + ks * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int nt = 0; nt < 4; nt += 2) {
      uint32_t bf[4];
      ldmatrix_x4(bf, sK + (key0 + nt * 8 + (lane & 7) + (lane >> 4) * 8) * LD + ks * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        mma_bf16_16816(acc[mt][nt], af[mt], bf);
        mma_bf16_16816(acc[mt][nt + 1], af[mt], bf + 2);
      }
    }
  }

  // Per key column: relu(dot) x weight x scale over the lane's 8 heads (mt, half order), then
  // the butterfly over g (lanes 4 apart) — a fixed order.
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
    for (int col = 0; col < 2; ++col) {
      float sum = 0.0f;
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          sum += fmaxf(acc[mt][nt][2 * half + col], 0.0f) * wh[mt][half] * weight_scale;
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      const int64_t gk = g0 + key0 + nt * 8 + 2 * c + col;
      if (g == 0 && gk < ld) scores[t * ld + gk] = gk < n_avail ? sum : -INFINITY;
    }
  }
}

}  // namespace deepinfer::kernels
