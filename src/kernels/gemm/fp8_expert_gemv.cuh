// The FP4 experts in the FP8 order at decode (DEEPINFER_GEMM_FP8_EXPERTS=1; the lean form of
// fp8_expert_gemm.cuh, whose header defines the sums both compute, bit for bit). Decode steps route
// a few pairs to each expert, and the tiled kernel's three launches per weight set (tile table,
// code blocks, GEMM) and its 128-row tiles of whole-K streams left an H100's batch-1 step 18%
// slower than the BF16 order's lean kernel (docs/cuda.md "Session 49"). Here, one launch for both
// weight sets:
//   * CTA = one warpgroup = 64 weight rows (output columns) of one set of one active expert (grid
//     z: the routing's active list, as lean_gemv.cuh) x the whole K, the sub-ranges in turn, so
//     the fold (0 + s_0 x f_0) + s_1 x f_1 + ... happens in registers;
//   * the expert's pairs in chunks of 8 (wgmma's N; the columns past the chunk's pairs unused): each
//     chunk's activation rows are quantised into the FP8 order's codes in shared memory over all
//     of K (fp8_block_codes: the code-block pre-pass's codes), and the weights stream again (L2);
//   * the rows' 32-block scale words are staged once per CTA (64 rows x K / 128 words, the
//     prologue's loads in flight together), and from them every row's sub-range references
//     (fp4_fold_row_ref's maximum) once, into shared memory;
//   * the weight blocks stream straight into registers, NB in flight per lane (fp8_gemv.cuh's
//     ring: lane c loads 16 bytes of each of its two rows' 64-byte blocks), and block f + 1 is
//     decoded (fp4_fold_decode) while block f's four k32 steps run on the tensor cores; under
//     DEEPINFER_GEMM_L2_PREFETCH the rows' next blocks are also requested into the L2 ahead of
//     the ring (a hint: the same bits).
// Per block the same operations as the tiled kernel: part = four wgmma k32 steps from zero
// (m64n8k32 here, m64n32k32 / m64n128k32 there: the same bits per column, wgmma_fp8_probe),
// sum = fmaf(part, sa, sum) in block order, and per sub-range total = fmaf(sum, f, total) — or
// sum x f when K is one sub-range (fp8_totals_fold / fp8_totals_finish).
#pragma once

#include "kernels/gemm/fp4_fold_layout.h"
#include "kernels/gemm/fp4_fold_tables.cuh"
#include "kernels/gemm/fp8_expert_plan.h"
#include "kernels/gemm/fp8_gemv.cuh"

namespace deepinfer::kernels {

static_assert(kFp8ExpertLeanCols == kFp8GemvCols, "a warpgroup's wgmma M");

// A staged piece's words (16 bytes: four; a word: one) at d.
__device__ __forceinline__ void fp8_expert_put_words(uint32_t* d, const uint4& v) { d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w; }
__device__ __forceinline__ void fp8_expert_put_words(uint32_t* d, uint32_t v) { d[0] = v; }

// The rows' scale words [rows][stride] from their scale rows (row n - n0 of the tile; rows past N
// repeat row N - 1) in pieces of `Piece` (per_row of them a row), each thread's loads of a round
// issued before its stores.
template <typename Piece>
__device__ __forceinline__ void fp8_expert_stage_pieces(uint32_t* s_word, int stride, const uint8_t* scale, int64_t scale_cols,
                                                        int64_t n0, int64_t N, int rows, int per_row, int tid) {
  constexpr int U = 4, kWords = static_cast<int>(sizeof(Piece) / 4);
  const int total = rows * per_row;
  for (int i0 = 0; i0 < total; i0 += U * 128) {
    Piece v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + 128 * u + tid, r = i / per_row;
      if (i < total) v[u] = __ldg(reinterpret_cast<const Piece*>(scale + min64(n0 + r, N - 1) * scale_cols) + (i - r * per_row));
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + 128 * u + tid, r = i / per_row;
      if (i >= total) break;
      fp8_expert_put_words(s_word + r * stride + kWords * (i - r * per_row), v[u]);  // odd stride: no bank conflicts
    }
  }
}
// 16 bytes at a time when every row allows it (K a multiple of 512 and 16-byte rows: every V4
// expert), else a word.
__device__ __forceinline__ void fp8_expert_stage_words(uint32_t* s_word, int stride, const uint8_t* scale, int64_t scale_cols,
                                                       int64_t n0, int64_t N, int rows, int kb, int tid) {
  if (kb % 4 == 0 && scale_cols % 16 == 0 && reinterpret_cast<uintptr_t>(scale) % 16 == 0)
    fp8_expert_stage_pieces<uint4>(s_word, stride, scale, scale_cols, n0, N, rows, kb / 4, tid);
  else
    fp8_expert_stage_pieces<uint32_t>(s_word, stride, scale, scale_cols, n0, N, rows, kb, tid);
}

// NB: weight blocks in flight per lane (a ring of registers; even, so the two fragment sets keep
// fixed roles in the unrolled loop). G: 64-row groups per CTA, in turn (Fp8ExpertPlan::lean_per_cta).
// grid: (ctas0 CTAs of set 0, then those of set 1) x 1 x plan.lean_z (slot z takes active expert z,
// if there are that many); 128 threads.
template <int NB, int G>
__global__ void __launch_bounds__(128, 4) fp8_expert_gemv_kernel(GemmParams p, int ctas0, int prefetch) {
  static_assert(NB % 2 == 0 && NB >= 2 && (G == 1 || G == 2));
  constexpr int NR = kFp8ExpertLeanRows;
  extern __shared__ __align__(128) uint8_t fp8_eg_smem[];
  const int kb = static_cast<int>(p.K / kFp8GemvBlock);  // int: the loop's compares stay 32-bit
  uint8_t* const sB = fp8_eg_smem;                                                      // codes
  float* const s_scale = reinterpret_cast<float*>(fp8_eg_smem + kb * 4 * NR * 32);       // [kb][NR]
  uint32_t* const s_word = reinterpret_cast<uint32_t*>(s_scale + NR * kb);               // [G x 64][stride]
  const int stride = fp8_expert_gemv_word_stride(kb);
  __shared__ uint2 tables[kFp4FoldTableRows];  // d = 0 .. -kFp4FoldMaxShift, then zeros
  __shared__ int32_t c_row[NR];
  // The G x 64 rows' fold references, one per K sub-range (at most 8; odd stride: 2-way conflicts
  // at worst) — each the largest of the sub-range's codes (fp4_fold_row_ref). Computed once per CTA:
  // scanning a row's words at each sub-range's end was ~a fifth of the main loop's instructions.
  constexpr int kRefStride = 9;
  __shared__ int32_t s_ref[G * kFp8ExpertLeanCols * kRefStride];

  griddep_launch_dependents();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
  fp4_fold_tables_to_shared(tables, tid);
  griddep_wait();  // the routing (and the activations) come from the previous kernels
  if (static_cast<int>(blockIdx.z) >= p.active[p.n_experts]) return;  // fewer active experts
  const int expert = p.active[blockIdx.z];
  const int set = static_cast<int>(blockIdx.x) >= ctas0 ? 1 : 0;
  const WeightDesc w = p.experts[set * p.n_experts + expert];
  const int64_t N = p.N, ldc = set == 0 ? p.ldc : p.ldc1;
  void* const C = set == 0 ? p.C : p.C1;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) - set * ctas0) * (G * kFp8ExpertLeanCols);  // group 0's
  const int32_t rows_begin = p.offsets[expert], m_count = p.offsets[expert + 1] - rows_begin;
  const int blocks_per_sub = static_cast<int>(gemm_subrange(p.K) / kFp8GemvBlock);
  // The first chunk's pair rows, loaded before the weights and scale words so that their latency
  // overlaps those loads' rather than following them (the activations' loads need them).
  const int32_t first_row = tid < min(NR, m_count) ? p.perm[rows_begin + tid] : 0;

  // The lane's rows (past N: row N - 1, outputs dropped) and its 16 bytes of their blocks.
  const int n_local = 16 * warp + g;
  const uint8_t* wr[2];
  auto set_rows = [&](int64_t first) {  // the group of 64 rows from `first`
#pragma unroll
    for (int h = 0; h < 2; ++h) wr[h] = w.w + min64(first + n_local + 8 * h, N - 1) * w.row_bytes + 16 * c;
  };
  set_rows(n0);
  const uint64_t pol = weight_l2_policy(true);
  uint4 buf[NB][2];
  auto load = [&](int slot, int f) {  // block f into a slot (f past K: a no-op)
    const bool pred = f < kb;
#pragma unroll
    for (int h = 0; h < 2; ++h) ldg_weight16_if(buf[slot][h], wr[h] + static_cast<int64_t>(f) * kFp4FoldBlockBytes, pol, pred);
  };
  auto prime = [&] {  // the ring's first NB blocks
#pragma unroll
    for (int f = 0; f < NB; ++f) load(f, f);
  };
  prime();
  // Rolling L2 prefetch (DEEPINFER_GEMM_L2_PREFETCH = D blocks, 0 = none): lane c = 0 asks for its
  // two rows' next D blocks (64 bytes each, contiguous in the row) whenever the requested lead over
  // the ring drops to D, so 2 D blocks of every row are in flight beyond the registers' NB. pf: the
  // first block not yet requested (CTA-uniform).
  const bool pf_on = prefetch > 0 && w.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(w.w) % 16 == 0;
  int pf = pf_on ? NB : kb;
  auto prefetch_to = [&](int end) {  // request blocks [pf, end)
    end = min(end, kb);
    if (pf >= end) return;
    if (c == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        l2_prefetch_weights(wr[h] + pf * kFp4FoldBlockBytes, static_cast<uint32_t>((end - pf) * kFp4FoldBlockBytes), pol);
    }
    pf = end;
  };
  prefetch_to(pf + 2 * prefetch);

  // The tile's scale words (row-major code bytes: block b's four at byte 4 b of the row), every
  // load of a thread in flight before its stores: as a loop of dependent load-store pairs (16 per
  // thread at K 4096) they took a fifth of a batch-1 launch's stall samples (docs/cuda.md
  // "Session 53").
  fp8_expert_stage_words(s_word, stride, w.scale, w.scale_cols, n0, N, G * kFp8ExpertLeanCols, kb, tid);
  const uint32_t byte_sel = 0x4440u + static_cast<uint32_t>(c / 2);  // PRMT: code byte c / 2, zero-extended
  // Group gi's row n_local + 8 h: its staged words and its fold reference in sub-range `sub`
  // (s_ref, computed with the first chunk).
  int gi = 0;
  auto my_words = [&](int h) { return s_word + (gi * kFp8ExpertLeanCols + n_local + 8 * h) * stride; };
  auto row_refs = [&](int sub, int (&ref)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) ref[h] = s_ref[(gi * kFp8ExpertLeanCols + n_local + 8 * h) * kRefStride + sub];
  };

  const uint32_t half = 0xffffu << (tid & 16);
  for (int m0 = 0; m0 < m_count; m0 += NR) {
    const int rows = min(NR, m_count - m0);
    if (m0 > 0) {
      __syncthreads();  // the previous chunk is done with sB, s_scale and c_row
      // The weights again (L2), group 0's rows (the ring left on the last group's), before the
      // staging so that the loads overlap it.
      set_rows(n0);
      prime();
    }
    if (tid < rows) c_row[tid] = m0 == 0 ? first_row : p.perm[rows_begin + m0 + tid];
    __syncthreads();
    if (m0 == 0) {  // the references (the staged words are visible now; read after the sync below)
      const int n_sub = (kb + blocks_per_sub - 1) / blocks_per_sub;
      for (int i = tid; i < G * kFp8ExpertLeanCols * n_sub; i += 128) {
        const int r = i / n_sub, sb = i - r * n_sub, b0 = sb * blocks_per_sub;
        const int n = min(blocks_per_sub, kb - b0);
        uint32_t m = 0;
        for (int q = 0; q < n; ++q) m = fp4_fold_ref_add(m, s_word[r * stride + b0 + q]);
        s_ref[r * kRefStride + sb] = fp4_fold_ref(m);
      }
    }
    // Staging: item (pair r, block b, chunk q of 8 inputs), a half-warp per (r, b). The chunk's
    // columns past its pairs are never stored, and a wgmma column depends on its own B column
    // only, so their codes and scales stay as they are (a batch-1 CTA stages 1 row of 8).
    // Four items' activation loads in flight per thread before their codes (at batch 1, 512 items:
    // one round trip, where a loop of load-then-quantise made four).
    const int items = rows * kb * 16;  // a multiple of 16: half-warps stay whole
    for (int i0 = 0; i0 < items; i0 += 4 * 128) {
      uint4 raw[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = i0 + 128 * u + tid, rb = i >> 4, r = rb / kb, b = rb - r * kb;
        if (i < items)
          raw[u] = *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.A) +
                                                   static_cast<int64_t>(c_row[r] / p.a_div) * p.lda +
                                                   b * kFp8GemvBlock + 8 * (i & 15));
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = i0 + 128 * u + tid, q = i & 15, rb = i >> 4, r = rb / kb, b = rb - r * kb;
        if (i >= items) break;  // half-warp-uniform, and so for every later u
        float v[8];
        bf16x8_to_f32(raw[u], v);
        uint32_t lo, hi;
        const float s = fp8_block_codes(v, half_warp_amax(v, half), lo, hi);  // the code-block pre-pass's codes
        const int o = fp8_tile_offset(r, b * kFp8GemvBlock + 8 * q, NR);  // codes 0-3 at h = 0, 4-7 at h = 1
        *reinterpret_cast<uint32_t*>(sB + o) = lo;
        *reinterpret_cast<uint32_t*>(sB + o + 128) = hi;
        if (q == 0) s_scale[b * NR + r] = s;
      }
    }
    fence_proxy_async();  // the codes are read by wgmma (the async proxy)
    __syncthreads();

    // The CTA's G groups of 64 rows in turn over the staged codes (G = 2: DEEPINFER_GEMM_FP8_EXPERTS_LEAN_GROUPS,
    // the activation staging and the prologue shared by twice the rows); a group past N ends it.
    for (gi = 0; gi < G; ++gi) {
      const int64_t ng = n0 + gi * kFp8ExpertLeanCols;  // the group's first row
      if (ng >= N) break;  // CTA-uniform
      if (gi > 0) {  // the ring again, on the group's rows
        set_rows(ng);
        if (pf_on) pf = NB, prefetch_to(NB + 2 * prefetch);
        prime();
      }
      // Accumulator e: row n_local + 8 (e >> 1), pair 2 c + (e & 1) of the chunk.
      float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f}, total[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // (each block's first MMA overwrites them; the asm reads them)
      int ref[2];
      row_refs(0, ref);
      uint32_t fa[4][4], fb[4][4];
      {
        const uint32_t word[2] = {my_words(0)[0], my_words(1)[0]};
        fp8_expert_decode_block(buf[0], word, ref, tables, byte_sel, fa);
      }
      // The codes' descriptor: a k32 step's 256 bytes further is 16 more in its address field (shared
      // addresses >> 4 stay below 2^14, so the add never carries out of it).
      const uint64_t b_desc = wgmma_desc(sB, 128, 256);
      int sub = 0, in_sub = 0;  // the block's sub-range, and its blocks before it there
      // Block f on fragments x (slot u of the ring); block f + 1 decoded into nx while its MMAs run.
      auto block = [&](int f, int u, const uint32_t (&x)[4][4], uint32_t (&nx)[4][4]) {
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < 4; ++j)
          wgmma_m64n8k32_e4m3_rs(part, x[j], b_desc + static_cast<uint64_t>((4 * f + j) * (NR * 32 / 16)), j > 0);
        wgmma_commit();
        const bool last = f + 1 == kb, ends_sub = last || in_sub + 1 == blocks_per_sub;
        int nref[2] = {ref[0], ref[1]};
        if (!last) {
          if (ends_sub) row_refs(sub + 1, nref);
          const uint32_t word[2] = {my_words(0)[f + 1], my_words(1)[f + 1]};
          fp8_expert_decode_block(buf[(u + 1) % NB], word, nref, tables, byte_sel, nx);
        }
        wgmma_wait<0>();
        wgmma_fence_operands(part);
        load(u, f + NB);
        if (f + NB + prefetch >= pf) prefetch_to(pf + prefetch);  // (never when off: pf is kb)
        const float2 sa = *reinterpret_cast<const float2*>(s_scale + f * NR + 2 * c);  // pairs 2 c, 2 c + 1
        sum[0] = fmaf(part[0], sa.x, sum[0]), sum[1] = fmaf(part[1], sa.y, sum[1]);
        sum[2] = fmaf(part[2], sa.x, sum[2]), sum[3] = fmaf(part[3], sa.y, sum[3]);
        if (!ends_sub) {
          ++in_sub;
          return;
        }
        // The sub-range's sum times the rows' scales into the total, in order: fp8_totals_fold's
        // fmaf(sum, f, 0) for the first, fp8_totals_finish's sum x f when it is the only one.
        const float fs[2] = {fp4_fold_scale(ref[0]), fp4_fold_scale(ref[1])};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float s = sum[e], fe = fs[e >> 1];
          total[e] = sub > 0 ? fmaf(s, fe, total[e]) : (last ? s * fe : fmaf(s, fe, 0.0f));
          sum[e] = 0.0f;
        }
        ++sub, in_sub = 0;
        ref[0] = nref[0], ref[1] = nref[1];
      };
      for (int f0 = 0; f0 < kb; f0 += NB) {
#pragma unroll
        for (int u = 0; u < NB; u += 2) {
          if (f0 + u >= kb) break;  // CTA-uniform
          block(f0 + u, u, fa, fb);
          if (f0 + u + 1 >= kb) break;
          block(f0 + u + 1, u + 1, fb, fa);
        }
      }

#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 2 * c + (e & 1);
        const int64_t n = ng + n_local + 8 * (e >> 1);
        if (r < rows && n < N) store_out(C, p.c_bf16, static_cast<int64_t>(c_row[r]) * ldc + n, total[e]);
      }
    }
  }
}

}  // namespace deepinfer::kernels
