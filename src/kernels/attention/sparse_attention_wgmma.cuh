// Sparse shared-KV attention with sinks on Hopper's warpgroup MMA, for prefill-sized launches:
// one CTA per (token, 64 heads) instead of the mma.sync kernel's (token, 16 heads), so a token's
// rows cross from L2 into shared memory once rather than four times, and Q.K^T / P.V run as wgmma
// chains instead of one dependent mma.sync chain per warp (ncu, 8K prefill, session 21: the
// mma.sync kernel issued in 21% of cycles, stalled on its MMA chain and its loads; 22 ms of the
// 87 ms prefill).
//
// The same arithmetic as sparse_attention_mma_kernel, value for value, so a token's output has the
// same bits whichever kernel its launch takes (batch invariance; GPU suite: the attention tests
// with DEEPINFER_ATTN_WGMMA_MIN_TOKENS=2 compare a decode token alone, on the mma.sync kernel,
// with the same token in a batch on this one):
//   - S = Q.K^T as the same chain of k16 steps from zero (a wgmma k16 chain is bitwise the
//     mma.sync chain: tools/device/probes/wgmma_probe.cu);
//   - pass 1's statistics: in a warpgroup's Q.K^T accumulator (64 heads x its row blocks), lane
//     (g, c) of warp v holds heads 16 v + g, + 8 and, in n8 block jj, the tile's rows 8 j + 2c, + 1
//     (row block j = 8 wg / NWG + jj) — exactly the rows lane (g, c) of warp j holds in the mma.sync
//     kernel, so keeping one running (max, den) per (j, head) and merging them as that kernel merges
//     its warps (quad butterfly, then j in order after the sink) repeats its operations
//     (attn_stat_update / attn_stat_merge);
//   - pass 2: tiles last to first, P = attn_prob(S) in BF16, O += P.V as the same k16 steps.
// S is recomputed in pass 2 (64 heads x 1,024 rows of F32 would not fit beside the tiles).
//
// CTA: NWG warpgroups (2, or 4 at head_dim 512: kWgAttnThreads); shared memory: Q [64 heads x D],
// two row tiles [64 x D] and P [64 heads x 64 rows], each in core matrices of 8 rows x 16 bytes
// (wg_attn_offset), the layout both a K-major operand (Q.K^T: rows as N; P.V's P) and an MN-major
// one (P.V's V: rows as K, transposed B) read. Every thread copies its share of each tile with
// cp.async (a tile's rows are gathered: window, then selected compressed rows). Warpgroup w takes
// the tile's row blocks 8 w / NWG .. in Q.K^T, the statistics and P — no work done twice — and P
// goes through shared memory, so that in P.V each warpgroup accumulates its D / NWG of O's columns
// (64 heads x D / 2 in 128 registers per thread with two warpgroups) over all 64 rows.
#pragma once

#include "kernels/attention/sparse_attention_mma.cuh"
#include "kernels/common/wgmma_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kWgAttnHeads = 64;     // heads per CTA: wgmma's M
inline constexpr int kWgAttnRows = 64;      // rows per tile (the mma.sync kernel's: 8 row blocks)
// Warpgroups per CTA: 2 (default) or 4 (DEEPINFER_ATTN_WGMMA_WARPGROUPS=4, head_dim 512 only):
// warpgroup w takes rows 64 w / NWG .. of each tile in Q.K^T, the statistics and P, and O's
// columns D w / NWG .. in P.V; four give 16 warps per SM for the same shared memory (each holding
// 64 of O's registers instead of 128).
template <int NWG>
inline constexpr int kWgAttnThreads = 128 * NWG;

// head_dim 512 (V4, V4.1): the only size the GPU tests run it at; other sizes keep the mma.sync
// kernel (the template also compiles for 256).
__host__ __device__ constexpr bool wgmma_attention_supports(int64_t d) { return d == 512; }

// Dynamic shared memory: Q, then two row tiles, each [64][D] BF16, then P [64 heads][64 rows] BF16.
__host__ __device__ constexpr size_t wgmma_attention_smem_bytes(int64_t d) {
  return (3 * static_cast<size_t>(kWgAttnRows) * static_cast<size_t>(d) + kWgAttnHeads * kWgAttnRows) *
         sizeof(__nv_bfloat16);
}

// Byte offset of (row r < 64, 16-byte chunk ch) in a [64][D] operand: core matrices of 8 rows x
// 16 bytes; the 8 row blocks of one chunk column 128 bytes apart, chunk columns 1 KB apart.
// Descriptors: K-major (chunks along K) lbo = 1024, sbo = 128; MN-major (rows along K) lbo = 128,
// sbo = 1024.
__device__ __forceinline__ uint32_t wg_attn_offset(int r, int ch) {
  return static_cast<uint32_t>((ch * 8 + (r >> 3)) * 128 + (r & 7) * 16);
}

// attn_store_pair as a call: the epilogue's 64 pairs per thread inlined with their RoPE made the
// kernel ~11K instructions, and ncu counted 37% of its warps' stalls as instruction fetch.
__device__ __noinline__ void attn_store_pair_call(__nv_bfloat16* dst, float x0, float x1, int64_t col, int64_t rope0,
                                                  float pos, const AttentionParamsDev& p) {
  attn_store_pair(dst, x0, x1, col, rope0, pos, p);
}

template <int D, int NWG>
__global__ void __launch_bounds__(kWgAttnThreads<NWG>, 1)
    sparse_attention_wgmma_kernel(const __nv_bfloat16* q, const __nv_bfloat16* kv_new, const __nv_bfloat16* window,
                                  const __nv_bfloat16* comp, const int32_t* comp_idx, const float* sinks,
                                  const int32_t* positions, const int32_t* token_seq, const SeqSpanDev* seqs,
                                  const int32_t* block_tables, AttentionParamsDev p, __nv_bfloat16* out) {
  pdl_prologue();
  using bf16 = __nv_bfloat16;
  static_assert((D == 256 || D == 512) && (NWG == 2 || NWG == 4) && D % (128 * NWG) == 0);
  constexpr int KS = D / 16;          // k16 steps of Q.K^T
  constexpr int CH = D / 8;           // 16-byte chunks per row
  constexpr int JB = 8 / NWG;         // row blocks of a tile per warpgroup (Q.K^T's N = 8 JB)
  constexpr int NH = D / 128 / NWG;   // n128 blocks of P.V per warpgroup (its D / NWG columns)
  constexpr int kOpBytes = kWgAttnRows * D * 2;
  extern __shared__ __align__(128) unsigned char wg_attn_smem[];
  unsigned char* s_q = wg_attn_smem;               // [64 heads][D]
  unsigned char* s_tiles = wg_attn_smem + kOpBytes;  // [2][64 rows][D]
  __shared__ float s_mx[kWgAttnHeads], s_den[kWgAttnHeads];
  __shared__ float s_st[8][kWgAttnHeads][2];  // (max, den) per row block after the quad merge
  __shared__ const bf16* s_row_addr[kMmaAttnAddrRows];

  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int wg = warp >> 2, wv = warp & 3;  // warpgroup; warp within it (heads 16 wv .. 16 wv + 15)
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * kWgAttnHeads;
  const SeqSpanDev s = seqs[token_seq[t]];
  const TokenRows tr = token_rows(t, positions[t], s, comp_idx, p);
  const int64_t first = tr.first, n_window = tr.n_window, n_rows = tr.n_rows;
  const int32_t* idx = tr.idx;
  const int n_tiles = static_cast<int>((n_rows + kWgAttnRows - 1) / kWgAttnRows);
  const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * p.max_blocks;

  // Copies: warp w takes rows (heads) 8 rb .. 8 rb + 7 of an operand (rb = w % 8), each lane row
  // 8 rb + rr, chunks cc + 4 k for k = w / 8, w / 8 + NWG / 2, ..: per instruction 8 rows x 64
  // contiguous bytes from global memory. A 16-byte copy is issued per quarter warp (8 lanes), so
  // quarter q takes rows 4 (q & 1) .. + 3 and the two chunks 2 (q >> 1), + 1 of each — full 32-byte
  // sectors. (With the 8 lanes of a quarter on 8 rows of one chunk, every sector was requested
  // twice, once per half: ncu, session 22, 2x the ideal L2 sectors on these copies.) In shared
  // memory a quarter's two chunks of a row are 1 KB apart: a 2-way bank conflict. Measured: the
  // CSA launch of an 8K prefill 1% faster, the others level (the copies' cost is their issue).
  const int q4 = lane >> 3, rr = 4 * (q4 & 1) + ((lane >> 1) & 3), cc = 2 * (q4 >> 1) + (lane & 1);
  const int rb = warp & 7, k0 = warp >> 3;
  constexpr int kStep = NWG / 2;
  {  // Q, heads past H zero-filled (their outputs are not stored); committed with tile 0
    const int64_t h = h0 + rb * 8 + rr;
    const bool valid = h < p.H;
    const bf16* src = q + (t * p.H + (valid ? h : 0)) * D;
#pragma unroll 4
    for (int k = k0; k < CH / 4; k += kStep)
      cp_async16(s_q + wg_attn_offset(rb * 8 + rr, cc + 4 * k), src + (cc + 4 * k) * 8, valid);
  }
  const int n_addr = static_cast<int>(min64(n_rows, kMmaAttnAddrRows));
  for (int r = threadIdx.x; r < n_addr; r += blockDim.x)
    s_row_addr[r] = attn_row(r, n_window, first, s, kv_new, window, comp, idx, table, p);
  __syncthreads();

  // Tile i into buffer i & 1 (rows past n_rows zero-filled), one commit group.
  auto load_rows = [&](int i) {
    const int64_t r = static_cast<int64_t>(i) * kWgAttnRows + rb * 8 + rr;
    const bool valid = r < n_rows;
    const bf16* src = !valid                 ? kv_new
                      : r < kMmaAttnAddrRows ? s_row_addr[r]
                                             : attn_row(r, n_window, first, s, kv_new, window, comp, idx, table, p);
    unsigned char* dst = s_tiles + (i & 1) * kOpBytes;
#pragma unroll 4
    for (int k = k0; k < CH / 4; k += kStep)
      cp_async16(dst + wg_attn_offset(rb * 8 + rr, cc + 4 * k), src + (cc + 4 * k) * 8, valid);
    cp_async_commit();
  };
  // The tile's copies (this thread's) complete and are visible to the MMAs (async proxy), then
  // everyone's.
  auto tile_ready = [&](bool newer_in_flight) {
    if (newer_in_flight) {
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    fence_proxy_async();
    __syncthreads();
  };
  // S of the warpgroup's rows of the tile in buffer b (row blocks JB wg .. JB wg + JB - 1) for the
  // 64 heads: sc[4 jj + e] = (head 16 wv + g + 8 (e >> 1), row 8 (JB wg + jj) + 2c + (e & 1)) — row
  // block j = JB wg + jj of the tile.
  auto qk = [&](int b, float (&sc)[4 * JB]) {
#pragma unroll
    for (int k = 0; k < 4 * JB; ++k) sc[k] = 0.0f;
    // Step ks's operands start 2 KB on (two chunk columns): 128 in the descriptors' address field.
    const uint64_t q_desc = wgmma_desc(s_q, 1024, 128);
    const uint64_t k_desc = wgmma_desc(s_tiles + b * kOpBytes + wg * JB * 128, 1024, 128);  // row blocks JB wg ..
    wgmma_fence_operands(sc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) wgmma_m64k16_ss(sc, q_desc + 128 * ks, k_desc + 128 * ks);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(sc);
  };
  auto row_of = [&](int i, int jj, int e) {
    return static_cast<int64_t>(i) * kWgAttnRows + 8 * (JB * wg + jj) + 2 * c + (e & 1);
  };

  // Pass 1: running (max, den) per (row block j = JB wg + jj, head half hh), rows in order; each
  // warpgroup its JB row blocks of every tile.
  load_rows(0);
  {
    float mx[JB][2], den[JB][2];
#pragma unroll
    for (int jj = 0; jj < JB; ++jj) mx[jj][0] = mx[jj][1] = -INFINITY, den[jj][0] = den[jj][1] = 0.0f;
    for (int i = 0; i < n_tiles; ++i) {
      if (i + 1 < n_tiles) load_rows(i + 1);
      tile_ready(i + 1 < n_tiles);
      float sc[4 * JB];
      qk(i & 1, sc);
#pragma unroll
      for (int jj = 0; jj < JB; ++jj)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (row_of(i, jj, e) < n_rows) attn_stat_update(sc[4 * jj + e], p.softmax_scale, mx[jj][e >> 1], den[jj][e >> 1]);
      __syncthreads();  // buffer i & 1 is read before tile i + 2 lands there
    }
    // The quad butterfly per row block; then the blocks in order 0..7 after the sink, gathered
    // through shared memory.
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int jj = 0; jj < JB; ++jj)
#pragma unroll
        for (int off = 1; off <= 2; off <<= 1) {
          const float m2 = __shfl_xor_sync(0xffffffffu, mx[jj][hh], off);
          const float l2 = __shfl_xor_sync(0xffffffffu, den[jj][hh], off);
          attn_stat_merge(mx[jj][hh], den[jj][hh], m2, l2);
        }
    if (n_tiles == 0) cp_async_wait<0>();  // (no rows: tile 0's zero-fill was the only copy)
    if (c == 0) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int jj = 0; jj < JB; ++jj) {
          s_st[JB * wg + jj][16 * wv + g + 8 * hh][0] = mx[jj][hh];
          s_st[JB * wg + jj][16 * wv + g + 8 * hh][1] = den[jj][hh];
        }
    }
    __syncthreads();
    if (wg == 0 && c == 0) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int hl = 16 * wv + g + 8 * hh;
        const int64_t h = h0 + hl;
        float m = h < p.H ? sinks[h] : -INFINITY, l = h < p.H ? 1.0f : 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) attn_stat_merge(m, l, s_st[j][hl][0], s_st[j][hl][1]);
        s_mx[hl] = m, s_den[hl] = l;
      }
    }
  }
  __syncthreads();
  float fmx[2], fden[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) fmx[hh] = s_mx[16 * wv + g + 8 * hh], fden[hh] = s_den[16 * wv + g + 8 * hh];

  // Pass 2: tiles last to first; each warpgroup S and P of its rows of the tile, P to shared memory
  // ([64 heads][64 rows] as a K-major A operand, wg_attn_offset), then each O's columns
  // (D / NWG) wg + 128 nh + 8 nt + 2c (+ 1) in o[nh][4 nt + e] over all 64 rows.
  unsigned char* s_p = s_tiles + 2 * kOpBytes;
  float o[NH][64];
#pragma unroll
  for (int nh = 0; nh < NH; ++nh)
#pragma unroll
    for (int k = 0; k < 64; ++k) o[nh][k] = 0.0f;
  for (int i = n_tiles - 1; i >= 0; --i) {
    const bool load = i > 0 && i - 1 <= n_tiles - 3;
    if (load) load_rows(i - 1);
    tile_ready(load);
    float sc[4 * JB];
    qk(i & 1, sc);
#pragma unroll
    for (int jj = 0; jj < JB; ++jj) {
      float pr[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        pr[e] = row_of(i, jj, e) < n_rows ? attn_prob(sc[4 * jj + e], p.softmax_scale, fmx[e >> 1], fden[e >> 1]) : 0.0f;
      const int chunk = JB * wg + jj, hl = 16 * wv + g;
      *reinterpret_cast<uint32_t*>(s_p + wg_attn_offset(hl, chunk) + 4 * c) = pack_bf16(pr[0], pr[1]);
      *reinterpret_cast<uint32_t*>(s_p + wg_attn_offset(hl + 8, chunk) + 4 * c) = pack_bf16(pr[2], pr[3]);
    }
    fence_proxy_async();
    __syncthreads();  // P complete
    // P's step ks: 2 KB on; V's: row blocks 2 ks (256 bytes on), columns 128 nh (16 chunk columns:
    // 16 KB on) — 16 and 1,024 in the descriptors' address field.
    const uint64_t p_desc = wgmma_desc(s_p, 1024, 128);
    const uint64_t v_desc =
        wgmma_desc(s_tiles + (i & 1) * kOpBytes + wg_attn_offset(0, (D / 8 / NWG) * wg), 128, 1024);
#pragma unroll
    for (int nh = 0; nh < NH; ++nh) wgmma_fence_operands(o[nh]);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int nh = 0; nh < NH; ++nh) wgmma_m64n128k16_ss<1>(o[nh], p_desc + 128 * ks, v_desc + 16 * ks + 1024 * nh);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int nh = 0; nh < NH; ++nh) wgmma_fence_operands(o[nh]);
    __syncthreads();  // both warpgroups are done with buffer i & 1 and with P
  }

  const float pos = static_cast<float>(positions[t]);
  const int64_t rope0 = D - p.rope_n;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int64_t h = h0 + 16 * wv + g + 8 * hh;
    if (h >= p.H) continue;
    bf16* dst = out + (t * p.H + h) * D;
#pragma unroll
    for (int nh = 0; nh < NH; ++nh)
#pragma unroll
      for (int nt = 0; nt < 16; ++nt) {
        const int64_t col = (D / NWG) * wg + 128 * nh + 8 * nt + 2 * c;
        const float x0 = o[nh][4 * nt + 2 * hh], x1 = o[nh][4 * nt + 2 * hh + 1];
        if (p.rope_inv_freq != nullptr && col >= rope0) {
          attn_store_pair_call(dst + col, x0, x1, col, rope0, pos, p);
        } else {
          *reinterpret_cast<uint32_t*>(dst + col) = pack_bf16(x0, x1);  // (attn_store_pair without RoPE)
        }
      }
  }
}

}  // namespace deepinfer::kernels
