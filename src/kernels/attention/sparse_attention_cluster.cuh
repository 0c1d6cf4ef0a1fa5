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
//            over all tiles, last to first, with the same mma steps per column. P of every tile
//            is written once (one block barrier), then each warp streams only its own 8 NT
//            columns of each row through a ring of its own, so the tiles need no block barrier.
// A token with more rows than the S array holds (kMmaAttnKeptRows: a long HCA context) is done by
// CTA 0 alone with the one-CTA kernel's body; the others return (the choice is the token's, so
// every CTA of the cluster makes it alike and no cluster barrier is left waiting).
// Which kernel a launch takes (and C) depends on the batch, the bits never do.
#pragma once

#include "kernels/attention/sparse_attention_mma.cuh"
#include "kernels/common/cluster_utils.cuh"

namespace deepinfer::kernels {

// The geometry of a cluster size C at head_dim D. Phase A's two K tiles [2][64][D + 8] are reused in
// phase C for P of every tile [16][kMmaAttnKeptRows + 8] and the warps' V rings [8][kStages][64][kLdw].
__host__ __device__ constexpr int cluster_attention_nt(int64_t d, int c) { return static_cast<int>(d / c / 64); }
__host__ __device__ constexpr int cluster_attention_ldw(int64_t d, int c) {
  // A warp's 8 NT columns per row: one 16-byte chunk needs no pad for ldmatrix (8 rows = 128
  // contiguous bytes); wider rows get 16 bytes of pad so that 8 rows hit distinct banks.
  return cluster_attention_nt(d, c) == 1 ? 8 : 8 * cluster_attention_nt(d, c) + kMmaAttnPad;
}
__host__ __device__ constexpr int cluster_attention_stages(int64_t d, int c) {
  const int64_t area = 2LL * kMmaAttnRows * (d + kMmaAttnPad) - int64_t{kMmaAttnHeads} * (kMmaAttnKeptRows + 8);
  const int64_t per_stage = int64_t{kMmaAttnWarps} * kMmaAttnRows * cluster_attention_ldw(d, c);
  return per_stage <= 0 ? 0 : static_cast<int>(area / per_stage < 8 ? area / per_stage : 8);
}

// C CTAs per (token, 16 heads): every warp of every CTA keeps at least one n8 column tile in P.V
// (one or an even number), and its V ring has at least two stages. At head_dim 512: 2, 4 and 8;
// 256: 4; 128 and 64: none.
__host__ __device__ constexpr bool cluster_attention_supports(int64_t d, int c) {
  return mma_attention_supports(d) && (c == 2 || c == 4 || c == 8) && d % (8 * kMmaAttnWarps * c) == 0 &&
         (cluster_attention_nt(d, c) == 1 || cluster_attention_nt(d, c) % 2 == 0) &&
         cluster_attention_stages(d, c) >= 2;
}

template <int D, int C>
struct ClusterAttnGeom {
  static constexpr int kSlice = D / C;                          // output columns per CTA
  static constexpr int kNt = cluster_attention_nt(D, C);        // n8 column tiles per warp
  static constexpr int kLdw = cluster_attention_ldw(D, C);      // a warp's V row stride (elements)
  static constexpr int kStage = kMmaAttnRows * kLdw;            // one V tile of a warp (elements)
  static constexpr int kStages = cluster_attention_stages(D, C);
  static constexpr int kLdpa = kMmaAttnKeptRows + 8;            // P of every tile: row stride
  static_assert(cluster_attention_supports(D, C));
};

// Grid (T * C, ceil(H / 16)), clusters of (C, 1, 1), 8 warps; dynamic shared memory
// mma_attention_smem_bytes(D): the K tiles (phase C: P and the V rings), P's one-tile array
// (unused here), and S (first Q's staging).
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
  constexpr int LD = D + kMmaAttnPad, LDS = kMmaAttnKeptLd, LDPA = G::kLdpa;
  constexpr int KS = D / 16, CHUNKS = D / 8, SLICE = G::kSlice, LDW = G::kLdw, NS = G::kStages, NT = G::kNt;
  constexpr int WC = 8 * NT;  // a warp's output columns
  extern __shared__ __align__(16) unsigned char attn_smem[];
  bf16* s_kv = reinterpret_cast<bf16*>(attn_smem);  // phase A: [2][64][LD] K tiles
  bf16* s_pall = s_kv;                              // phase C: P [16 heads][LDPA] of every tile
  bf16* s_v = s_pall + kMmaAttnHeads * LDPA;        // ... and V [8 warps][NS][64][LDW]
  float* s_s = reinterpret_cast<float*>(s_kv + 2 * kMmaAttnRows * LD + kMmaAttnHeads * (kMmaAttnRows + kMmaAttnPad));
  bf16* s_q = reinterpret_cast<bf16*>(s_s);  // [16 heads][LD], before S: S [16 heads][LDS]

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
  __syncthreads();

  // Phase A: this CTA's tiles i = rank + j C, double buffered (each warp copies and reads only
  // its own 8 rows of a tile, as in the one-CTA kernel); the first two in flight before Q is read.
  const int n_mine = rank < n_tiles ? (n_tiles - rank + C - 1) / C : 0;
  auto load_k = [&](int j) {
    const int i = rank + j * C;
    const int64_t r = static_cast<int64_t>(i) * kMmaAttnRows + warp * 8 + (lane & 7);
    const bf16* src = r < n_rows ? s_row_addr[r] : kv_new;
    mma_attn_copy_warp_rows<CHUNKS, LD>(s_kv + ((j & 1) * kMmaAttnRows + warp * 8) * LD, src,
                                        static_cast<int64_t>(i) * kMmaAttnRows + warp * 8, n_rows);
    cp_async_commit();
  };
  if (n_mine > 0) load_k(0);
  if (n_mine > 1) load_k(1);
  // Q's group is the oldest: done once at most the K groups are pending.
  if (n_mine > 1) {
    cp_async_wait<2>();
  } else if (n_mine == 1) {
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
  // The A fragments of Q (rows = heads g, g + 8): the one-CTA kernel's registers, via ldmatrix.
  uint32_t qf[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
    ldmatrix_x4(qf[ks], s_q + ((lane & 7) + ((lane >> 3) & 1) * 8) * LD + ks * 16 + (lane >> 4) * 8);
  cluster_arrive();  // barrier 1: this CTA's Q is in registers, its S array may be written

  for (int j = 0; j < n_mine; ++j) {
    const int i = rank + j * C;
    if (j + 1 < n_mine) {
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
    __syncwarp();  // this warp's reads of the buffer finish before tile j + 2 lands there
    if (j + 2 < n_mine) load_k(j + 2);
  }
  if (n_mine == 0) cluster_wait();
  __syncthreads();  // every warp is done with the K tiles: P and the V rings may overwrite them

  // Phase C's V: slice k is tile n_tiles - 1 - k; each warp copies its own WC columns of the
  // tile's rows into stage k % NS of its ring, one commit group per slice (empty past the last).
  bf16* my_v = s_v + warp * NS * G::kStage;
  const int col_off = rank * SLICE + warp * WC;
  auto load_v = [&](int k) {
    if (k < n_tiles) {
      const int64_t r0 = static_cast<int64_t>(n_tiles - 1 - k) * kMmaAttnRows;
      bf16* dst = my_v + (k % NS) * G::kStage;
      constexpr int WCH = WC / 8;  // 16-byte chunks per row
#pragma unroll
      for (int e = lane; e < kMmaAttnRows * WCH; e += 32) {
        const int rr = e / WCH, ch = e % WCH;
        const bool valid = r0 + rr < n_rows;
        const bf16* row = valid ? s_row_addr[r0 + rr] + col_off : kv_new;  // (kv_new: not read)
        cp_async16(dst + rr * LDW + ch * 8, row + ch * 8, valid);
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

  // Phase C: P of every tile (each warp its rows), then P.V over this warp's columns, tiles last
  // to first.
  for (int i = 0; i < n_tiles; ++i) {
    float acc[4];
    s_of(i, acc);
    mma_attn_write_p<LDPA>(s_pall + i * kMmaAttnRows, acc, row_of(i, 0), n_rows, p.softmax_scale, mx, den);
  }
  __syncthreads();  // P of every tile is in shared memory
  float o[NT][4] = {};
  for (int k = 0; k < n_tiles; ++k) {
    cp_async_wait<NS - 2>();  // slice k (groups 0 .. k of the NS - 1 + k committed)
    __syncwarp();             // ... of every lane; the stage of slice k - 1 is free again
    load_v(k + NS - 1);
    mma_attn_pv<NT, LDPA, LDW>(o, s_pall + (n_tiles - 1 - k) * kMmaAttnRows, my_v + (k % NS) * G::kStage, 0);
  }
  cp_async_wait<0>();  // (the trailing empty groups)
  mma_attn_store<D, NT>(out, o, t, h0, rank * SLICE + warp * WC, positions, p);
}

}  // namespace deepinfer::kernels
