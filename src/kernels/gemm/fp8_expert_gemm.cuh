// FP4 experts on the FP8 tensor cores, in the FP8 order (fp8_gemv.cuh's header defines it;
// docs/cuda.md "Session 48"; DEEPINFER_GEMM_FP8_EXPERTS=1, off by default). The 32-block scales of
// a row's canonical K sub-range are folded into its codes (fp4_fold_layout.h: E4M3 codes
// fp4 x 2^(6 + d), one scale sw = 2^(ref - 133) per row and sub-range), so an expert block is a
// dense FP8 weight block and the sums are the dense FP8 order's: per block four wgmma k32 steps
// from zero, promoted as fmaf(part, sw x sa, sum) — here as fmaf(part, sa, sum) and the sub-range's
// sum times sw at its end, the same bits (sw is a power of two: it commutes with each rounding);
// per canonical K sub-range from zero, the sub-ranges folded in order.
//
// Three launches (plan: fp8_expert_plan.h), blocks in the staging workspace:
//   * expert_tile_table_kernel (packed_expert_gemm.cuh): the (expert, token tile) table;
//   * fp8_expert_pack_kernel: each tile's pairs' activation rows (through the routing's
//     permutation) as E4M3 codes per 128-input block (fp8_block_codes: the codes and scale the
//     dense order derives) in the FP8 order's image, fp8_tile_offset with rows = NT;
//   * fp8_expert_gemm_kernel<NT>: persistent CTAs over (token tile, 128-column) output tiles. A
//     producer warpgroup moves each block's code block (one bulk copy) and the tile rows' raw FP4
//     runs and scale words (cp.async: swap_stage_rows, the swapped BF16 kernel's copy) into a ring
//     of stages; two consumer warpgroups (64 weight rows each) decode their rows' runs in registers
//     into wgmma's A fragments (one PRMT and two logic ops per four codes) and multiply the codes
//     from shared memory as B (N = NT; a tile's rows past its pairs are zero codes); the next
//     block is decoded into a second fragment set while a block's MMAs run. Split form (kSplit,
//     decode steps' few tiles): a cluster per tile, one K sub-range per CTA, the sub-range sums
//     folded in order through distributed shared memory (fp8_gemm.cuh's split form).
// The weights' device layout puts lane c's run of a block at bytes 16 c (the words of its two
// k32 steps of each window), so the copy is the swapped kernel's, and the decode's words are the
// a0 / a2 (row g) and a1 / a3 (row g + 8) operands of wgmma's register-A layout.
#pragma once

#include "kernels/gemm/expert_swap_gemm.cuh"
#include "kernels/gemm/fp4_fold_layout.h"
#include "kernels/gemm/fp4_fold_tables.cuh"
#include "kernels/gemm/fp8_expert_plan.h"
#include "kernels/gemm/fp8_gemv.cuh"

namespace deepinfer::kernels {

// D[64 x 128] (+)= A[64 x 32] (registers, E4M3) B[32 x 128] (shared memory, E4M3).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b_desc,
                                                         bool accumulate) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " DI_WGMMA_D64_REGS ", {%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
      : DI_WGMMA_D64_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#endif
}

// The fold layout, in place: each row's 64-byte block (fp4_fold_layout.h: words to their slots,
// sign bits moved). One thread per block; the buffer is whole 64-byte blocks.
__global__ void __launch_bounds__(256) fp4_fold_layout_kernel(uint8_t* codes, int64_t blocks) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  if (b >= blocks) return;
  uint4* p = reinterpret_cast<uint4*>(codes + b * kFp4FoldBlockBytes);
  uint32_t in[16], out[16];
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const uint4 x = p[v];
    in[4 * v] = x.x, in[4 * v + 1] = x.y, in[4 * v + 2] = x.z, in[4 * v + 3] = x.w;
  }
#pragma unroll
  for (int q = 0; q < 16; ++q) out[fp4_fold_word_slot(q)] = fp4_fold_word_bits(in[q]);
#pragma unroll
  for (int v = 0; v < 4; ++v) p[v] = make_uint4(out[4 * v], out[4 * v + 1], out[4 * v + 2], out[4 * v + 3]);
}

// grid: y_tiles x NT x kb / 8 CTAs of 128 threads; a half-warp per (tile row, block) as in
// fp8_pack_codes_kernel. Rows past the tile's pairs (and tiles past the table's) pack zeros.
template <int NT>
__global__ void __launch_bounds__(128) fp8_expert_pack_kernel(const __nv_bfloat16* A, int64_t lda, int64_t kb_count,
                                                              PackedRows rows, uint8_t* out) {
  pdl_prologue();  // A and the table come from the previous launches
  const int64_t item = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 16;  // (y, tile row, block)
  const int64_t b = item % kb_count, rest = item / kb_count;
  const int r = static_cast<int>(rest % NT);
  const int64_t y = rest / NT;
  const int q = threadIdx.x & 15;
  int64_t src = -1;  // uniform in the half-warp, whose shuffles stay within it
  if (rows.table[y] >= 0 && r < rows.table[2 * rows.y_tiles + y])
    src = rows.perm[rows.table[rows.y_tiles + y] + r] / rows.a_div;
  uint32_t lo = 0, hi = 0;
  float s = 0.0f;
  if (src >= 0) {
    float v[8];
    bf16x8_to_f32(*reinterpret_cast<const uint4*>(A + src * lda + b * kFp8GemvBlock + 8 * q), v);
    s = fp8_block_codes(v, half_warp_amax(v, 0xffffu << (threadIdx.x & 16)), lo, hi);
  }
  uint8_t* blk = out + (y * kb_count + b) * fp8_expert_codes_block_bytes(NT);
  const int o = fp8_tile_offset(r, 8 * q, NT);
  *reinterpret_cast<uint32_t*>(blk + o) = lo;        // inputs 8 q .. + 3: positions 4 c .. (h = 0)
  *reinterpret_cast<uint32_t*>(blk + o + 128) = hi;  // inputs 8 q + 4 .. + 7: h = 1
  if (q == 0) reinterpret_cast<float*>(blk + int64_t{NT} * 128)[fp8_expert_scale_slot(NT, r)] = s;
}

template <int NT>
struct Fp8ExpertShape {
  static_assert(NT == 128 || NT == 32);
  static constexpr int kThreads = kSwapThreads;  // two consumer warpgroups + a producer warpgroup
  static constexpr int R = NT / 2;               // accumulators per thread
  static constexpr int kCodesBytes = static_cast<int>(fp8_expert_codes_block_bytes(NT));
  static constexpr int kStageBytes = kCodesBytes + kSwapRunBytes + kPackRows * 4;
  static constexpr int kTotalsBytes = 2 * R * 128 * 4;  // [warpgroup] fp8_totals_fold's slots
  static constexpr int kStages = NT == 128 ? 6 : 8;
  static constexpr int kSmem = kStages * kStageBytes + kTotalsBytes;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;  // (65536 - 40 x 128) / 256, multiple of 8
  static_assert(kCodesBytes % 16 == 0 && kStageBytes % 16 == 0, "bulk copies and descriptors need 16-byte offsets");
  static_assert(kSmem + 1024 <= 227 * 1024, "shared memory");
};

// One block's MMAs: four k32 steps from zero into part over the token tile's NT columns.
template <int NT>
__device__ __forceinline__ void fp8_expert_block_mma(float (&part)[NT / 2], const uint32_t (&f)[4][4], uint64_t b) {
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint64_t d = b + ((j * NT * 32) >> 4);
    if constexpr (NT == 128) {
      wgmma_m64n128k32_e4m3_rs(part, f[j], d, j > 0);
    } else {
      wgmma_m64n32k32_e4m3_rs(part, f[j], d, j > 0);
    }
  }
}

// A ring position: stage and the parity of its phase (use u: u % S and (u / S) & 1).
struct RingPos {
  int stage;
  uint32_t parity;
  template <int S>
  __device__ __forceinline__ RingPos next() const {
    return stage + 1 == S ? RingPos{0, parity ^ 1u} : RingPos{stage + 1, parity};
  }
};

// A thread's decoded block: the A fragments of its four k32 steps (rows g and g + 8) and the two
// rows' references for the block's K sub-range (fp4_fold_layout.h: the sub-range's scale 2^(ref - 133)).
struct Fp8ExpertFrags {
  uint32_t f[4][4];
  int ref[2];
};

// The scale 2^(ref - 133) of a row's folded sub-range (ref: its largest scale code).
// Branch-free (a branch and its reconvergence per row were ~5 of the decode's instructions):
// normal for ref >= 7; below, 2^(ref - 133) is the subnormal with bit ref + 16 set.
__device__ __forceinline__ float fp4_fold_scale(int ref) {
  return __int_as_float(ref >= 7 ? (ref - 6) << 23 : 1 << (ref + 16));
}

// A row's reference for the sub-range of blocks [i, i + n): its code words read from the weight's
// scale row (the producer's cp.async of block i's word, which the caller has waited for, brought
// their line to L1 or L2). Four loads in flight at a time.
__device__ __forceinline__ int fp4_fold_row_ref(const uint8_t* codes, int i, int n) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(codes) + i;
  uint32_t m = 0;
  for (int b = 0; b < n; b += 4) {
    uint32_t x[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) x[q] = b + q < n ? __ldg(w + b + q) : 0u;
#pragma unroll
    for (int q = 0; q < 4; ++q) m = fp4_fold_ref_add(m, x[q]);
  }
  return fp4_fold_ref(m);
}

// The split form's fold: rank `sub` of the cluster adds, for its share of the tile's n8 groups of
// tokens, the P CTAs' sub-range sums (their totals: thread slot `slot` of [R / 4][128]) in sub-range
// order — 0 + s0 + s1 + ..., the one-CTA kernel's chain — and stores them.
template <int R>
__device__ __forceinline__ void fp8_expert_split_fold(const PackedExpertArgs& p, const float4* slot, int sub, int64_t y,
                                                      int64_t nt, int n_local, int g, int c) {
  const int32_t begin = p.table[p.y_tiles + y], count = p.table[2 * p.y_tiles + y];
  const int J = min((count + 7) / 8, R / 4), P = p.split;  // live n8 groups (uniform in the CTA)
  for (int j = J * sub / P; j < J * (sub + 1) / P; ++j) {
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[k] = 0.0f;
      for (int q = 0; q < P; ++q)
        v[k] += cluster_load_f32(cluster_map(fp8_totals_at(slot, 4 * j + k), q));
    }
    expert_group_store(p, v, j, begin, count, nt, n_local, g, c);
  }
}

// kSplit: a cluster of p.split CTAs per output tile, one canonical K sub-range each (32-pair
// launches of fewer tiles than two per SM under DEEPINFER_GEMM_FP8_SPLIT=1: decode steps, where a
// CTA streams a tile's whole K; measured 38% slower at batch 1 — its clusters run in waves —
// docs/cuda.md "Session 49"); else persistent CTAs over the tiles, every K sub-range.
template <int NT, bool kSplit>
__global__ void __launch_bounds__(kSwapThreads, 1) fp8_expert_gemm_kernel(PackedExpertArgs p) {
  using Sh = Fp8ExpertShape<NT>;
  constexpr int S = Sh::kStages, R = Sh::R;
  // The split form's producers wait at the fold's cluster barriers too: 56 registers for them (as
  // fp8_gemm.cuh's split form, where 40 spilled), 224 for the consumers.
  constexpr int kProducerRegs = kSplit ? 56 : Sh::kProducerRegs;
  constexpr int kConsumerRegs = kSplit ? 224 : Sh::kConsumerRegs;
  static_assert(128 * kProducerRegs + kSwapConsumers * kConsumerRegs <= 65536, "register file");
  pdl_prologue();
  extern __shared__ __align__(1024) unsigned char smem[];  // [stage][codes block, raw runs, code words], totals
  __shared__ __align__(8) uint64_t full[S], empty[S];
  __shared__ uint2 tables[kFp4FoldTableRows];  // d = 0 .. -kFp4FoldMaxShift, then zeros
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
  const int64_t tiles = p.y_tiles * p.n_tiles;
  swap_init_ring(full, empty);  // (the code block's bulk copy is the stage's "activation block")
  fp4_fold_tables_to_shared(tables, tid);
  __syncthreads();

  if (warp >= kSwapConsumers / 32) {  // producer warpgroup: the swapped kernel's, with the code blocks
    warpgroup_regs_dec<kProducerRegs>();
    swap_produce<kSplit>(p, smem, Sh::kStageBytes, Sh::kCodesBytes, full, empty, [&](int64_t y) {
      const uint8_t* a = p.a + y * p.k_tiles * Sh::kCodesBytes;
      return [=](unsigned char* stage, int i, uint64_t* full_s) {
        mbar_arrive_expect_tx(full_s, Sh::kCodesBytes);
        bulk_copy_g2s(stage, a + static_cast<int64_t>(i) * Sh::kCodesBytes, Sh::kCodesBytes, full_s);
      };
    });
    // The split form's tile: when it holds pairs (every CTA of the cluster sees the same), the
    // fold's two cluster barriers take every thread.
    if (kSplit && p.table[swap_walk<kSplit>(p).t_first / p.n_tiles] >= 0) {
      __syncwarp();
      cluster_arrive();
      cluster_wait();
      cluster_arrive();
      cluster_wait();
    }
    return;
  }

  // Consumers: thread (warp, g, c) holds weight rows n_local = 16 warp + g and n_local + 8 of the
  // tile; accumulator 4 j + 2 h + e is row n_local + 8 h, token 8 j + 2 c + e.
  warpgroup_regs_inc<kConsumerRegs>();
  const int n_local = warp * 16 + g, wg = warp / 4;
  float4* totals = reinterpret_cast<float4*>(smem + S * Sh::kStageBytes) + wg * (R / 4) * 128 + (tid & 127);
  const uint64_t desc0 = wgmma_desc(smem, 128, 256);
  const int blocks_per_sub = static_cast<int>(gemm_subrange(p.K) / kGemmBK);
  const SwapWalk walk = swap_walk<kSplit>(p);
  float part[R];
#pragma unroll
  for (int e = 0; e < R; ++e) part[e] = 0.0f;  // (each block's first MMA overwrites them; the asm reads them)
  // Blocks taken so far, as stage u % S and phase parity (u / S) & 1, advanced one block at a time
  // (u % S and u / S for each use, S = 6 stages at NT = 128, were ~20 uniform-datapath
  // instructions per block in the ncu SASS).
  RingPos u{0, 0u};
  const uint32_t byte_sel = 0x4440u + static_cast<uint32_t>(c / 2);  // PRMT: code byte c / 2, zero-extended
  const uint8_t* codes[2];  // this thread's rows' scale rows in the tile's expert (set per tile)
  // Waits for use `use`'s stage (block i) and decodes this thread's rows of it into x; at the
  // first block of a K sub-range (fresh) it finds the rows' references for the sub-range first,
  // else x.ref holds them (the caller's copy of the previous block's).
  auto take = [&](RingPos use, int i, bool fresh, Fp8ExpertFrags& x) {
    const int s = use.stage;
    mbar_wait(&full[s], use.parity);
    if (fresh) {
      const int n = min(blocks_per_sub, static_cast<int>(p.k_tiles) - i);
#pragma unroll
      for (int h = 0; h < 2; ++h) x.ref[h] = fp4_fold_row_ref(codes[h], i, n);
    }
    const unsigned char* raw = smem + s * Sh::kStageBytes + Sh::kCodesBytes;
    uint4 run[2];
    uint32_t code[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      run[h] = *reinterpret_cast<const uint4*>(raw + (h * kSwapConsumers + tid) * 16);
      code[h] = *reinterpret_cast<const uint32_t*>(raw + kSwapRunBytes + (n_local + 8 * h) * 4);
    }
    fp8_expert_decode_block(run, code, x.ref, tables, byte_sel, x.f);
  };
  for (int64_t t = walk.t_first; t < tiles; t += walk.t_step) {
    const int64_t y = t / p.n_tiles, nt = t % p.n_tiles;
    const int32_t expert = p.table[y];
    if (expert < 0) break;
    {
      const WeightDesc& wd = p.experts[expert];
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows past N: row 0's (their codes are zero-filled, any reference does)
        const int64_t n = nt * kPackRows + n_local + 8 * h;
        codes[h] = wd.scale + (n < p.N ? n : 0) * wd.scale_cols;
      }
    }
    float sum[R];
#pragma unroll
    for (int e = 0; e < R; ++e) sum[e] = 0.0f;
    bool first_sub = true;
    int in_sub = 0;
    // Block i on fragments x; the next block's are decoded into nx while its MMAs run (the tensor
    // core then waits on the decode only at a tile's first block). A block's sums are promoted with
    // the activation's scales alone, the rows' at the sub-range's end (fp4_fold_layout.h).
    auto block = [&](int i, const Fp8ExpertFrags& x, Fp8ExpertFrags& nx) {
      const int s = u.stage;
      const unsigned char* stage = smem + s * Sh::kStageBytes;
      const uint64_t b = desc0 + ((s * Sh::kStageBytes) >> 4);
      wgmma_fence_operands(part);
      // One form per NT: with a second (m64n8 for tiles of at most 8 pairs) or third (m64n16)
      // ptxas serialised every wgmma of the kernel (C7511) — dearer than the idle MMA columns.
      fp8_expert_block_mma<NT>(part, x.f, b);
      wgmma_commit();
      const bool ends_sub = in_sub + 1 == blocks_per_sub;
      if (i + 1 < walk.i_end) {
        if (!ends_sub) nx.ref[0] = x.ref[0], nx.ref[1] = x.ref[1];
        take(u.next<S>(), i + 1, ends_sub, nx);
      }
      wgmma_wait<0>();
      wgmma_fence_operands(part);
      // This lane's pairs' scales (fp8_expert_scale_slot): pairs 8 j + 2 c + e, two j per float4.
      const float4* s_tok = reinterpret_cast<const float4*>(stage + NT * 128) + c * (fp8_expert_scale_stride(NT) / 4);
#pragma unroll
      for (int jp = 0; jp < NT / 16; ++jp) {
        const float4 st = s_tok[jp];
        const float sa[4] = {st.x, st.y, st.z, st.w};
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int jn = 2 * jp + q;
          sum[4 * jn] = fmaf(part[4 * jn], sa[2 * q], sum[4 * jn]);
          sum[4 * jn + 1] = fmaf(part[4 * jn + 1], sa[2 * q + 1], sum[4 * jn + 1]);
          sum[4 * jn + 2] = fmaf(part[4 * jn + 2], sa[2 * q], sum[4 * jn + 2]);
          sum[4 * jn + 3] = fmaf(part[4 * jn + 3], sa[2 * q + 1], sum[4 * jn + 3]);
        }
      }
      __syncwarp();  // the warp's reads of the stage are done before its lane 0 frees it
      if (lane == 0) mbar_arrive(&empty[s]);
      u = u.next<S>();
      if (i + 1 == walk.i_end || ends_sub) {
        const float f[2] = {fp4_fold_scale(x.ref[0]), fp4_fold_scale(x.ref[1])};
        if (i + 1 == walk.i_end) {  // the last sub-range ends: the totals into registers
          fp8_totals_finish<R, true>(totals, sum, first_sub, f);
        } else {  // a sub-range ends: into the total, in order
          in_sub = 0;
          fp8_totals_fold<R, true>(totals, sum, first_sub, f);
          first_sub = false;
        }
      } else {
        ++in_sub;
      }
    };
    Fp8ExpertFrags fa, fb;
    take(u, walk.i_begin, true, fa);
    for (int i = walk.i_begin; i < walk.i_end; i += 2) {
      block(i, fa, fb);
      if (i + 1 < walk.i_end) block(i + 1, fb, fa);
    }
    if constexpr (kSplit) {  // this sub-range's sum (one, scaled: first_sub stayed true) into the totals, then the fold
      fp8_totals_store(totals, sum);
      cluster_arrive();
      cluster_wait();  // every CTA's sums are in its totals
      fp8_expert_split_fold<R>(p, totals, static_cast<int>(blockIdx.x) % p.split, y, nt, n_local, g, c);
      cluster_arrive();
      cluster_wait();  // every rank has read them (they live until then)
      continue;
    }

    expert_tile_store(p, sum, y, nt, n_local, g, c);  // the swapped kernel's epilogue
  }
}

}  // namespace deepinfer::kernels
