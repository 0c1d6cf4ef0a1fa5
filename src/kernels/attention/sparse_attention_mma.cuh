// Tensor-core sparse shared-KV attention with sinks (model_v4_flash.md §4.8) for BF16 rows under
// the official contract — the FlashMLA regime: 64 heads read one 512-d row, so a token's heads
// form the M side of the mma and its rows the N (Q.K^T) or K (P.V) side.
//
// One CTA per (token, 16 heads), 8 warps; the token's rows (window, then selected or all
// compressed rows) stream through shared memory in tiles of 64 (8 per warp in Q.K^T), double
// buffered with cp.async. The contract's probabilities are exactly normalised before they are
// rounded to BF16 and fed to P.V, so the kernel makes two passes:
//   pass 1: S = Q.K^T tile by tile (Q fragments stay in registers), per lane a running max and
//           denominator per head; combined over the quad, then over the warps in order, the sink
//           first (exp(sink - max));
//   pass 2: the same S again (same instructions, same bits), P = bf16(exp(S - max) / den) written
//           to shared memory, O[16 x D] += P[16 x 64] . V[64 x D], each warp owning D/8 columns.
// Pass 2 walks the tiles last to first, so the two tiles pass 1 ended on are reused without a
// reload.
// Tokens with at most kMmaAttnKeptRows rows keep pass 1's S in shared memory and pass 2 reads it
// back instead of recomputing Q.K^T (the same bits either way; the choice depends on the token's
// own row count only).
// Every sum runs in an order fixed by the token's own row count: batch invariant, like the
// scalar kernel (sparse_attention.cuh), which serves F32 rows, the plain numerics and odd head
// dims. Masked rows (past the token's count) are zero-filled and get probability 0.
// The per-tile steps (row copy, Q.K^T, the combine, P, P.V, the epilogue) are helpers that the
// cluster kernel (sparse_attention_cluster.cuh: decode-sized launches, one CTA's work over 2-8
// CTAs) shares, so both do the same operations per element; its fallback runs this kernel's body
// (sparse_attention_mma_cta).
#pragma once

#include "kernels/attention/sparse_attention.cuh"
#include "kernels/common/mma_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kMmaAttnWarps = 8;
inline constexpr int kMmaAttnHeads = 16;                // heads per CTA: the m16 of the mma
inline constexpr int kMmaAttnRows = 8 * kMmaAttnWarps;  // rows per tile: one n8 per warp in Q.K^T
inline constexpr int kMmaAttnPad = 8;                   // 16 B per row: ldmatrix rows hit distinct banks

__host__ __device__ constexpr bool mma_attention_supports(int64_t d) {
  return d == 64 || d == 128 || d == 256 || d == 512;
}

inline constexpr int kMmaAttnKeptRows = 1024, kMmaAttnKeptLd = kMmaAttnKeptRows + 8;
// Row addresses resolved once per CTA into shared memory (rows beyond: resolved per tile), so the
// tile loads of both passes skip the index and block-table lookups (two dependent global loads per
// tile, on the critical path of a decode token's attention): window + top-k of CSA, or the window
// and up to 1,024 compressed rows of HCA.
inline constexpr int kMmaAttnAddrRows = 1152;

// Dynamic shared memory: KV tiles [2][kMmaAttnRows][D + pad] and P [16][kMmaAttnRows + pad], BF16,
// then S [16][kMmaAttnKeptLd] F32 (padded: the quad's float2 stores of 8 heads take two wavefronts).
__host__ __device__ constexpr size_t mma_attention_smem_bytes(int64_t d) {
  return static_cast<size_t>(2 * kMmaAttnRows * (d + kMmaAttnPad) + kMmaAttnHeads * (kMmaAttnRows + kMmaAttnPad)) *
             sizeof(__nv_bfloat16) +
         static_cast<size_t>(kMmaAttnHeads) * kMmaAttnKeptLd * sizeof(float);
}

// The per-element arithmetic of both tensor-core kernels (this one and the wgmma one of
// sparse_attention_wgmma.cuh), written once so that both do the same operations on the same
// values and a token's output has the same bits whichever kernel its launch takes.
// Pass 1: one more row of a (lane, head) running max and denominator.
__device__ __forceinline__ void attn_stat_update(float s, float scale, float& mx, float& den) {
  const float z = s * scale;
  const float new_mx = fmaxf(mx, z);
  den = den * expf(mx - new_mx) + expf(z - new_mx);
  mx = new_mx;
}
// Two (max, den) pairs into one (the quad butterfly, then the warps' or row blocks' in order).
__device__ __forceinline__ void attn_stat_merge(float& m, float& l, float m2, float l2) {
  const float mn = fmaxf(m, m2);
  l = (l > 0.0f ? l * expf(m - mn) : 0.0f) + (l2 > 0.0f ? l2 * expf(m2 - mn) : 0.0f);
  m = mn;
}
// Pass 2: the exactly normalised probability, rounded to BF16 (the official contract).
__device__ __forceinline__ float attn_prob(float s, float scale, float mx, float den) {
  return round_bf16(expf(s * scale - mx) / den);
}

// A lane's output pair (columns col, col + 1 of a head's row) stored as BF16; with
// p.rope_inv_freq the pairs from column rope0 on are de-rotated as rope_kernel does it to the stored
// output (rounded to BF16, rotated, rounded again): the bits of the kernel followed by rope().
__device__ __forceinline__ void attn_store_pair(__nv_bfloat16* dst, float x0, float x1, int64_t col, int64_t rope0,
                                                float pos, const AttentionParamsDev& p) {
  if (p.rope_inv_freq != nullptr && col >= rope0) {
    x0 = round_bf16(x0), x1 = round_bf16(x1);
    float sn, cs;
    rope_sincos(pos, p.rope_inv_freq[(col - rope0) >> 1], p.rope_sign, sn, cs);
    const float r0 = rope_pair(x0, x1, sn, cs, false), r1 = rope_pair(x0, x1, sn, cs, true);
    x0 = r0, x1 = r1;
  }
  *reinterpret_cast<uint32_t*>(dst) = pack_bf16(x0, x1);
}

// Static shared memory of the tensor-core kernels that walk a token's rows with 8 warps (this one
// and the cluster kernel of sparse_attention_cluster.cuh, which may call this one's body): one
// allocation per kernel whichever of them declares it.
struct MmaAttnShared {
  float mx[kMmaAttnWarps][kMmaAttnHeads], den[kMmaAttnWarps][kMmaAttnHeads];  // per-warp statistics
  const __nv_bfloat16* row_addr[kMmaAttnAddrRows];                           // resolved row addresses
};
__device__ __forceinline__ MmaAttnShared& mma_attn_shared() {
  __shared__ MmaAttnShared sh;
  return sh;
}

// The calling warp's 8 rows of a tile, rows row0 .. row0 + 7 of the token's, into dst [8][LD]
// (BF16): lane rr < 8 holds row rr's address in `src`; the warp copies each row in 16-byte chunks
// and zero-fills rows from n_rows on (their address is not read). The caller commits the group.
template <int CHUNKS, int LD>
__device__ __forceinline__ void mma_attn_copy_warp_rows(__nv_bfloat16* dst, const __nv_bfloat16* src, int64_t row0,
                                                        int64_t n_rows) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int rr = 0; rr < 8; ++rr) {
    const auto* row =
        reinterpret_cast<const __nv_bfloat16*>(__shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(src), rr));
    const bool valid = row0 + rr < n_rows;
    for (int ch = lane; ch < CHUNKS; ch += 32) cp_async16(dst + rr * LD + ch * 8, row + ch * 8, valid);
  }
}

// S for the calling warp's 8 rows of a tile [64 rows][LD] (BF16) in shared memory: lane holds
// heads g, g + 8 x rows 2c, 2c + 1 — one mma chain over the k16 steps in order.
template <int KS, int LD>
__device__ __forceinline__ void mma_attn_qk(float* acc, const uint32_t (&qf)[KS][4], const __nv_bfloat16* tile) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
  // ldmatrix x4: matrices (k 0-7, k 8-15) of step ks and of step ks + 1, rows = this warp's 8.
  const __nv_bfloat16* base = tile + (warp * 8 + (lane & 7)) * LD + (lane >> 3) * 8;
#pragma unroll
  for (int ks = 0; ks < KS; ks += 2) {
    uint32_t bf[4];
    ldmatrix_x4(bf, base + ks * 16);
    mma_bf16_16816(acc, qf[ks], bf);
    mma_bf16_16816(acc, qf[ks + 1], bf + 2);
  }
}

// The end of pass 1: a lane's (max, den) pairs of heads g, g + 8 combined over the quad (lanes
// c = 0..3) by a fixed butterfly, then over the warps in order with the sink first; every lane
// leaves with its heads' final pair. One block barrier.
__device__ __forceinline__ void mma_attn_combine(float (&mx)[2], float (&den)[2], const float* sinks, int64_t h0,
                                                 int64_t H) {
  MmaAttnShared& sh = mma_attn_shared();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, mx[hh], off), l2 = __shfl_xor_sync(0xffffffffu, den[hh], off);
      attn_stat_merge(mx[hh], den[hh], m2, l2);
    }
    if (c == 0) sh.mx[warp][g + 8 * hh] = mx[hh], sh.den[warp][g + 8 * hh] = den[hh];
  }
  __syncthreads();
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int64_t h = h0 + g + 8 * hh;
    float m = h < H ? sinks[h] : -INFINITY, l = h < H ? 1.0f : 0.0f;
    for (int w = 0; w < kMmaAttnWarps; ++w) attn_stat_merge(m, l, sh.mx[w][g + 8 * hh], sh.den[w][g + 8 * hh]);
    mx[hh] = m;
    den[hh] = l;
  }
}

// Pass 2's probabilities of one tile: a lane's S values (heads g, g + 8 x rows 2c, 2c + 1 of its
// warp's 8; `row` is the first one's index, rows >= n_rows get 0) into P [16 heads][LDP] as BF16.
template <int LDP>
__device__ __forceinline__ void mma_attn_write_p(__nv_bfloat16* s_p, const float (&acc)[4], int64_t row,
                                                 int64_t n_rows, float scale, const float (&mx)[2],
                                                 const float (&den)[2]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  float pr[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int hh = e >> 1;
    pr[e] = row + (e & 1) < n_rows ? attn_prob(acc[e], scale, mx[hh], den[hh]) : 0.0f;
  }
  *reinterpret_cast<uint32_t*>(s_p + g * LDP + warp * 8 + 2 * c) = pack_bf16(pr[0], pr[1]);
  *reinterpret_cast<uint32_t*>(s_p + (g + 8) * LDP + warp * 8 + 2 * c) = pack_bf16(pr[2], pr[3]);
}

// O[16 x 8 NT] += P[16 x 64] . V[64 x 8 NT]: the warp's NT n8 column tiles from column col0 of a
// tile V [64 rows][LDV] (BF16) in shared memory, k16 steps in row order.
template <int NT, int LDP, int LDV>
__device__ __forceinline__ void mma_attn_pv(float (&o)[NT][4], const __nv_bfloat16* s_p, const __nv_bfloat16* v,
                                            int col0) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int ks = 0; ks < kMmaAttnRows / 16; ++ks) {
    uint32_t af[4];
    ldmatrix_x4(af, s_p + ((lane & 7) + ((lane >> 3) & 1) * 8) * LDP + ks * 16 + (lane >> 4) * 8);
    const __nv_bfloat16* vrow = v + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDV + col0 + (lane >> 4) * 8;
    if constexpr (NT == 1) {
      uint32_t bf[2];
      ldmatrix_x2_trans(bf, vrow);
      mma_bf16_16816(o[0], af, bf);
    } else {
#pragma unroll
      for (int nt = 0; nt < NT; nt += 2) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, vrow + nt * 8);
        mma_bf16_16816(o[nt], af, bf);
        mma_bf16_16816(o[nt + 1], af, bf + 2);
      }
    }
  }
}

// A lane holds output columns col0 + 8 nt + 2c and + 1 of heads h0 + g, + 8: a RoPE pair each. With
// p.rope_inv_freq the pairs of the last rope_n dims are de-rotated as rope_kernel does it to the
// stored output (rounded to BF16, rotated, rounded again): the bits of the kernel followed by rope().
template <int D, int NT>
__device__ __forceinline__ void mma_attn_store(__nv_bfloat16* out, const float (&o)[NT][4], int64_t t, int64_t h0,
                                               int col0, const int32_t* positions, const AttentionParamsDev& p) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const float pos = static_cast<float>(positions[t]);
  const int64_t rope0 = D - p.rope_n;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int64_t h = h0 + g + 8 * hh;
    if (h >= p.H) continue;
    __nv_bfloat16* dst = out + (t * p.H + h) * D + col0 + 2 * c;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      attn_store_pair(dst + nt * 8, o[nt][2 * hh], o[nt][2 * hh + 1], col0 + nt * 8 + 2 * c, rope0, pos, p);
    }
  }
}

// One CTA's work: token t, heads h0 .. h0 + 15 (the kernel below; the cluster kernel's fallback for
// tokens with more rows than its S store holds).
template <int D>
__device__ __forceinline__ void sparse_attention_mma_cta(const __nv_bfloat16* q, const __nv_bfloat16* kv_new,
                                                         const __nv_bfloat16* window, const __nv_bfloat16* comp,
                                                         const int32_t* comp_idx, const float* sinks,
                                                         const int32_t* positions, const int32_t* token_seq,
                                                         const SeqSpanDev* seqs, const int32_t* block_tables,
                                                         const AttentionParamsDev& p, __nv_bfloat16* out, int64_t t,
                                                         int64_t h0) {
  using bf16 = __nv_bfloat16;
  constexpr int LD = D + kMmaAttnPad, LDP = kMmaAttnRows + kMmaAttnPad;
  constexpr int KS = D / 16;                          // k16 steps of Q.K^T
  constexpr int NT = D / (8 * kMmaAttnWarps);         // n8 column tiles per warp in P.V
  constexpr int CHUNKS = D / 8;                       // 16-byte chunks per row
  static_assert(mma_attention_supports(D) && KS % 2 == 0 && (NT == 1 || NT % 2 == 0));
  extern __shared__ __align__(16) unsigned char attn_smem[];
  bf16* s_kv = reinterpret_cast<bf16*>(attn_smem);  // [2][kMmaAttnRows][LD]
  bf16* s_p = s_kv + 2 * kMmaAttnRows * LD;          // [16 heads][LDP]
  float* s_s = reinterpret_cast<float*>(s_p + kMmaAttnHeads * LDP);  // [16 heads][kMmaAttnKeptLd]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const SeqSpanDev s = seqs[token_seq[t]];
  const TokenRows tr = token_rows(t, positions[t], s, comp_idx, p);
  const int64_t first = tr.first, n_window = tr.n_window, n_rows = tr.n_rows;
  const int32_t* idx = tr.idx;
  const int n_tiles = static_cast<int>((n_rows + kMmaAttnRows - 1) / kMmaAttnRows);
  const bool keep_s = static_cast<int64_t>(n_tiles) * kMmaAttnRows <= kMmaAttnKeptRows;
  const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * p.max_blocks;
  // Q fragments over the whole head_dim, rows = heads h0 + g and h0 + g + 8 (zero past H): loaded
  // before the row addresses are resolved, so that the two chains of loads overlap.
  uint32_t qf[KS][4];
  {
    const bool v0 = h0 + g < p.H, v1 = h0 + g + 8 < p.H;
    const bf16* q0 = q + (t * p.H + h0 + g) * D;
    const bf16* q1 = q0 + 8 * D;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const int col = ks * 16 + 2 * c;
      qf[ks][0] = v0 ? *reinterpret_cast<const uint32_t*>(q0 + col) : 0u;
      qf[ks][1] = v1 ? *reinterpret_cast<const uint32_t*>(q1 + col) : 0u;
      qf[ks][2] = v0 ? *reinterpret_cast<const uint32_t*>(q0 + col + 8) : 0u;
      qf[ks][3] = v1 ? *reinterpret_cast<const uint32_t*>(q1 + col + 8) : 0u;
    }
  }

  const bf16** s_row_addr = mma_attn_shared().row_addr;
  const int n_addr = static_cast<int>(min64(n_rows, kMmaAttnAddrRows));
  for (int r = threadIdx.x; r < n_addr; r += blockDim.x)
    s_row_addr[r] = attn_row(r, n_window, first, s, kv_new, window, comp, idx, table, p);
  __syncthreads();

  // This warp's 8 rows of tile i into buffer i & 1: lane rr < 8 takes row rr's address, the warp
  // copies it in 16-byte chunks (rows past n_rows are zero-filled).
  auto load_rows = [&](int i) {
    const int64_t r = static_cast<int64_t>(i) * kMmaAttnRows + warp * 8 + (lane & 7);
    const bf16* src = r >= n_rows                 ? kv_new
                      : r < kMmaAttnAddrRows      ? s_row_addr[r]
                                                  : attn_row(r, n_window, first, s, kv_new, window, comp, idx, table, p);
    mma_attn_copy_warp_rows<CHUNKS, LD>(s_kv + ((i & 1) * kMmaAttnRows + warp * 8) * LD, src,
                                        static_cast<int64_t>(i) * kMmaAttnRows + warp * 8, n_rows);
    cp_async_commit();
  };

  auto qk = [&](int b, float* acc) { mma_attn_qk<KS, LD>(acc, qf, s_kv + b * kMmaAttnRows * LD); };
  auto row_of = [&](int i, int e) { return static_cast<int64_t>(i) * kMmaAttnRows + warp * 8 + 2 * c + (e & 1); };

  // Pass 1: running max / denominator per (lane, head); lane-local rows in order.
  float mx[2] = {-INFINITY, -INFINITY}, den[2] = {0.0f, 0.0f};
  load_rows(0);
  for (int i = 0; i < n_tiles; ++i) {
    if (i + 1 < n_tiles) {
      load_rows(i + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();
    float acc[4];
    qk(i & 1, acc);
    if (keep_s) {  // rows g, g + 8 x columns 2c, 2c + 1 of this warp's 8
      const int64_t r0 = row_of(i, 0);
      *reinterpret_cast<float2*>(s_s + g * kMmaAttnKeptLd + r0) = make_float2(acc[0], acc[1]);
      *reinterpret_cast<float2*>(s_s + (g + 8) * kMmaAttnKeptLd + r0) = make_float2(acc[2], acc[3]);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (row_of(i, e) >= n_rows) continue;
      attn_stat_update(acc[e], p.softmax_scale, mx[e >> 1], den[e >> 1]);
    }
    __syncwarp();  // this warp's reads of buffer i & 1 finish before tile i + 2 lands there
  }
  mma_attn_combine(mx, den, sinks, h0, p.H);

  // Pass 2: tiles last to first; the last two tiles of pass 1 are still in their buffers (tile i
  // in buffer i & 1), so the first reload is of tile n_tiles - 3.
  float o[NT][4] = {};
  const int col0 = warp * (D / kMmaAttnWarps);
  for (int i = n_tiles - 1; i >= 0; --i) {
    if (i > 0 && i - 1 <= n_tiles - 3) {
      load_rows(i - 1);
      cp_async_wait<1>();  // tile i (loaded one iteration ago, or resident)
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();
    float acc[4];
    if (keep_s) {  // pass 1's S, read back by the lanes that stored it
      const int64_t r0 = row_of(i, 0);
      const float2 lo = *reinterpret_cast<const float2*>(s_s + g * kMmaAttnKeptLd + r0);
      const float2 hi = *reinterpret_cast<const float2*>(s_s + (g + 8) * kMmaAttnKeptLd + r0);
      acc[0] = lo.x, acc[1] = lo.y, acc[2] = hi.x, acc[3] = hi.y;
    } else {
      qk(i & 1, acc);
    }
    mma_attn_write_p<LDP>(s_p, acc, row_of(i, 0), n_rows, p.softmax_scale, mx, den);
    __syncthreads();  // P and every warp's rows of tile i are in shared memory
    mma_attn_pv<NT, LDP, LD>(o, s_p, s_kv + (i & 1) * kMmaAttnRows * LD, col0);
    __syncthreads();  // every warp is done with P and with buffer i & 1
  }

  mma_attn_store<D, NT>(out, o, t, h0, col0, positions, p);
}

template <int D>
__global__ void __launch_bounds__(kMmaAttnWarps * 32, 1)
    sparse_attention_mma_kernel(const __nv_bfloat16* q, const __nv_bfloat16* kv_new, const __nv_bfloat16* window,
                                const __nv_bfloat16* comp, const int32_t* comp_idx, const float* sinks,
                                const int32_t* positions, const int32_t* token_seq, const SeqSpanDev* seqs,
                                const int32_t* block_tables, AttentionParamsDev p, __nv_bfloat16* out) {
  pdl_prologue();
  sparse_attention_mma_cta<D>(q, kv_new, window, comp, comp_idx, sinks, positions, token_seq, seqs, block_tables, p,
                              out, blockIdx.x, static_cast<int64_t>(blockIdx.y) * kMmaAttnHeads);
}

}  // namespace deepinfer::kernels
