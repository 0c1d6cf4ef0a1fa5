// Decode-sized sparse attention over a cluster of C CTAs per (token, 16 heads): the tensor-core
// kernel's arithmetic (sparse_attention_mma.cuh) in its order, bit for bit, spread over C SMs.
//
// A batch-1 decode step launches the one-CTA kernel on 4 CTAs (64 heads / 16): each walks its
// token's rows serially — pass 1 Q.K^T tile by tile, pass 2 P.V tile by tile, one 64-row tile in
// flight — so a CSA layer's 640 rows took 42-45 us and a 128-row window layer 17.6 us on the H200
// while 128 SMs idled (ncu, session 25). The work that has an order is split where the order
// allows it:
//   phase A: CTA r computes S = Q.K^T of tiles r, r + C, .. (each element one mma chain over the
//            k16 steps, the same instructions whichever CTA runs them) and stores it into the S
//            array of every CTA of the cluster (distributed shared memory);
//   phase B: after a cluster barrier every CTA holds all of S and runs pass 1's statistics from
//            it — each lane its rows in tile order, then the combine — exactly as the one-CTA
//            kernel does from the same values;
//   phase C: pass 2 with the output's columns split: CTA r computes O[:, r D/C .. (r + 1) D/C)
//            over all tiles, last to first, with the same mma steps per column, streaming only
//            its column slice of each row (the slices of the next tiles in flight in a ring).
// A token with more rows than the S array holds (kMmaAttnKeptRows: a long HCA context) is done by
// CTA 0 alone with the one-CTA kernel's body; the others return (the choice is the token's, so
// every CTA of the cluster makes it alike and no cluster barrier is left waiting).
// Which kernel a launch takes (and C) depends on the batch, the bits never do.
// (A second form — the K tiles copied before Q is read, P of every tile written once and each warp
// streaming its own columns of V without per-tile block barriers — was 1-5% slower per launch on
// the H200, session 25 — likely its per-warp 16-byte row pieces, twice the L2 requests of the
// CTA-wide 128-byte ones; not profiled.)
#pragma once

#include "kernels/attention/cluster_plan.h"
#include "kernels/attention/sparse_attention_mma.cuh"
#include "kernels/common/cluster_utils.cuh"

namespace deepinfer::kernels {

static_assert(kClusterAttnWarps == kMmaAttnWarps && cluster_attention_supports(512, 8) &&
              !cluster_attention_supports(128, 4));

template <int D, int C>
struct ClusterAttnGeom {
  static constexpr int kSlice = D / C;                         // output columns per CTA
  static constexpr int kLdv = kSlice + kMmaAttnPad;            // V slice row stride (elements)
  static constexpr int kStage = kMmaAttnRows * kLdv;           // one V slice tile (elements)
  static constexpr int kKArea = 2 * kMmaAttnRows * (D + kMmaAttnPad);  // phase A's two K tiles
  static constexpr int kStages = kKArea / kStage < 8 ? kKArea / kStage : 8;  // V ring (aliases them)
  static constexpr int kNt = kSlice / (8 * kMmaAttnWarps);     // n8 column tiles per warp
  static_assert(kStages >= 2 && kNt >= 1 && (kNt == 1 || kNt % 2 == 0));
};

// Grid (T * C, ceil(H / 16)), clusters of (C, 1, 1), 8 warps; dynamic shared memory
// mma_attention_smem_bytes(D): the K tiles (later the V ring), P, and S (first Q's staging).
template <int D, int C>
__global__ void __launch_bounds__(kMmaAttnWarps * 32, 1)
    sparse_attention_cluster_kernel(const __nv_bfloat16* q, const __nv_bfloat16* kv_new,
                                    const __nv_bfloat16* window, const __nv_bfloat16* comp, const int32_t* comp_idx,
                                    const float* sinks, const int32_t* positions, const int32_t* token_seq,
                                    const SeqSpanDev* seqs, const int32_t* block_tables, AttentionParamsDev p,
                                    __nv_bfloat16* out) {
  pdl_prologue();
  using bf16 = __nv_bfloat16;
  using G = ClusterAttnGeom<D, C>;
  constexpr int LD = D + kMmaAttnPad, LDP = kMmaAttnRows + kMmaAttnPad, LDS = kMmaAttnKeptLd;
  constexpr int KS = D / 16, CHUNKS = D / 8, SLICE = G::kSlice, LDV = G::kLdv, NS = G::kStages, NT = G::kNt;
  extern __shared__ __align__(16) unsigned char attn_smem[];
  bf16* s_kv = reinterpret_cast<bf16*>(attn_smem);                   // [2][64][LD]; phase C: [NS][64][LDV]
  bf16* s_p = s_kv + 2 * kMmaAttnRows * LD;                           // [16 heads][LDP]
  float* s_s = reinterpret_cast<float*>(s_p + kMmaAttnHeads * LDP);  // [16 heads][LDS]
  bf16* s_q = reinterpret_cast<bf16*>(s_s);                           // [16 heads][LD], before S

  const int rank = cluster_cta_rank();
  const int64_t t = blockIdx.x / C, h0 = static_cast<int64_t>(blockIdx.y) * kMmaAttnHeads;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const SeqSpanDev s = seqs[token_seq[t]];
  const TokenRows tr = token_rows(t, positions[t], s, comp_idx, p);
  const int64_t n_rows = tr.n_rows;
  const int n_tiles = static_cast<int>((n_rows + kMmaAttnRows - 1) / kMmaAttnRows);
  if (static_cast<int64_t>(n_tiles) * kMmaAttnRows > kMmaAttnKeptRows) {  // S does not fit: one CTA
    if (rank == 0) {
      sparse_attention_mma_cta<D>(q, kv_new, window, comp, comp_idx, sinks, positions, token_seq, seqs, block_tables,
                                  p, out, t, h0);
    }
    return;
  }

  // Q [16 heads][D] staged (heads past H zero-filled) while the row addresses resolve.
  for (int i = threadIdx.x; i < kMmaAttnHeads * CHUNKS; i += blockDim.x) {
    const int hr = i / CHUNKS, ch = i % CHUNKS;
    const bool valid = h0 + hr < p.H;
    cp_async16(s_q + hr * LD + ch * 8, q + (t * p.H + (valid ? h0 + hr : 0)) * D + ch * 8, valid);
  }
  cp_async_commit();
  const bf16** s_row_addr = mma_attn_shared().row_addr;
  const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * p.max_blocks;
  for (int r = threadIdx.x; r < n_rows; r += blockDim.x)
    s_row_addr[r] = attn_row(r, tr.n_window, tr.first, s, kv_new, window, comp, tr.idx, table, p);
  cp_async_wait<0>();
  __syncthreads();
  // The A fragments of Q (rows = heads g, g + 8): the one-CTA kernel's registers, via ldmatrix.
  uint32_t qf[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
    ldmatrix_x4(qf[ks], s_q + ((lane & 7) + ((lane >> 3) & 1) * 8) * LD + ks * 16 + (lane >> 4) * 8);
  cluster_arrive();  // barrier 1: this CTA's Q is in registers, its S array may be written

  // Phase A: this CTA's tiles i = rank + j C, double buffered (each warp copies and reads only
  // its own 8 rows of a tile, as in the one-CTA kernel).
  const int n_mine = rank < n_tiles ? (n_tiles - rank + C - 1) / C : 0;
  auto load_k = [&](int i, int b) {
    const int64_t r = static_cast<int64_t>(i) * kMmaAttnRows + warp * 8 + (lane & 7);
    const bf16* src = r < n_rows ? s_row_addr[r] : kv_new;
    mma_attn_copy_warp_rows<CHUNKS, LD>(s_kv + (b * kMmaAttnRows + warp * 8) * LD, src,
                                        static_cast<int64_t>(i) * kMmaAttnRows + warp * 8, n_rows);
    cp_async_commit();
  };
  if (n_mine > 0) load_k(rank, 0);
  for (int j = 0; j < n_mine; ++j) {
    const int i = rank + j * C;
    if (j + 1 < n_mine) {
      load_k(i + C, (j + 1) & 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();
    float acc[4];
    mma_attn_qk<KS, LD>(acc, qf, s_kv + (j & 1) * kMmaAttnRows * LD);
    if (j == 0) cluster_wait();  // barrier 1 done: every CTA's Q is read, S may be stored
    // S of heads g, g + 8 at this lane's rows into every CTA's array (its own included).
    float* lo = s_s + g * LDS + i * kMmaAttnRows + warp * 8 + 2 * c;
#pragma unroll
    for (int k = 0; k < C; ++k) {
      cluster_store_f2(cluster_map(lo, k), acc[0], acc[1]);
      cluster_store_f2(cluster_map(lo + 8 * LDS, k), acc[2], acc[3]);
    }
    __syncwarp();  // this warp's reads of the buffer finish before its next tile lands there
  }
  if (n_mine == 0) cluster_wait();
  __syncthreads();  // every warp is done with the K tiles: the V ring may overwrite them

  // Phase C's V slices (columns rank * SLICE ..), tiles last to first: slice k is tile
  // n_tiles - 1 - k in stage k % NS; one commit group per slice (empty past the last).
  auto load_v = [&](int k) {
    if (k < n_tiles) {
      const int64_t r0 = static_cast<int64_t>(n_tiles - 1 - k) * kMmaAttnRows;
      bf16* dst = s_kv + (k % NS) * G::kStage;
      constexpr int SCH = SLICE / 8;  // 16-byte chunks per row slice
      for (int e = threadIdx.x; e < kMmaAttnRows * SCH; e += blockDim.x) {
        const int rr = e / SCH, ch = e % SCH;
        const bool valid = r0 + rr < n_rows;
        const bf16* row = valid ? s_row_addr[r0 + rr] : kv_new;
        cp_async16(dst + rr * LDV + ch * 8, row + rank * SLICE + ch * 8, valid);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int k = 0; k < NS - 1; ++k) load_v(k);
  cluster_arrive();
  cluster_wait();  // barrier 2: every tile's S is in every CTA (no remote access after this)

  // Phase B: pass 1's statistics from S, each lane its rows in tile order.
  auto row_of = [&](int i, int e) { return static_cast<int64_t>(i) * kMmaAttnRows + warp * 8 + 2 * c + (e & 1); };
  auto s_of = [&](int i, float (&acc)[4]) {
    const int64_t r0 = row_of(i, 0);
    const float2 lo = *reinterpret_cast<const float2*>(s_s + g * LDS + r0);
    const float2 hi = *reinterpret_cast<const float2*>(s_s + (g + 8) * LDS + r0);
    acc[0] = lo.x, acc[1] = lo.y, acc[2] = hi.x, acc[3] = hi.y;
  };
  float mx[2] = {-INFINITY, -INFINITY}, den[2] = {0.0f, 0.0f};
  for (int i = 0; i < n_tiles; ++i) {
    float acc[4];
    s_of(i, acc);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (row_of(i, e) >= n_rows) continue;
      attn_stat_update(acc[e], p.softmax_scale, mx[e >> 1], den[e >> 1]);
    }
  }
  mma_attn_combine(mx, den, sinks, h0, p.H);

  // Phase C: P.V over this CTA's columns, tiles last to first.
  float o[NT][4] = {};
  const int col0 = warp * (SLICE / kMmaAttnWarps);  // the warp's first column within the slice
  for (int k = 0; k < n_tiles; ++k) {
    const int i = n_tiles - 1 - k;
    cp_async_wait<NS - 2>();  // slice k (groups 0 .. k of the NS - 1 + k committed)
    __syncthreads();          // ... of every thread; iteration k - 1's P and stage are free
    load_v(k + NS - 1);
    float acc[4];
    s_of(i, acc);
    mma_attn_write_p<LDP>(s_p, acc, row_of(i, 0), n_rows, p.softmax_scale, mx, den);
    __syncthreads();  // P of tile i is in shared memory
    mma_attn_pv<NT, LDP, LDV>(o, s_p, s_kv + (k % NS) * G::kStage, col0);
  }
  cp_async_wait<0>();  // (the trailing empty groups)
  mma_attn_store<D, NT>(out, o, t, h0, rank * SLICE + col0, positions, p);
}

}  // namespace deepinfer::kernels
