// FP8-operand large-M GEMM in the FP8 order of fp8_gemv.cuh (its header defines the order): dense
// FP8 weights (128 x 128 UE8M0 blocks) x activations FP8-quantised per 128 inputs, more rows than
// the decode kernel takes (16 by default) — so that a row's bits do not depend on how many rows
// share its launch.
//
// Three launches (plan: fp8_gemv_plan.h), the operands' blocks in the staging workspace:
//   * fp8_pack_codes_kernel: each (token, 128-input block) of A re-derived as E4M3 codes and a
//     scale exactly as fp8_gemv_kernel's staging does (fp8_block_codes), written as blocks
//     [token tile][block]: TM tokens x 128 codes in the order's k grouping and wgmma's core-matrix
//     image (fp8_order_layout.h: fp8_tile_offset), then the TM tokens' F32 scales;
//   * fp8_pack_weights_kernel: the weights' codes into blocks [column tile][block] of the same
//     image (the permutation no 16-byte copy can make: docs/cuda.md "Session 45");
//   * fp8_gemm_kernel<C, kSplit, TM>: persistent CTAs over (64 C)-column x TM-token output tiles
//     (TM = 128, or 32 / 64 for launches of fewer rows: fp8_gemm_token_tile). A producer
//     thread moves each block's weight and code blocks with two bulk copies into a ring of stages
//     (transaction barriers); C consumer warpgroups (64 columns each) issue four wgmma.m64nTMk32
//     from zero per block (both operands from shared memory: the probe found this form bitwise
//     the decode kernel's register-A m64n8k32 one; the tensor core's sum of an output does not
//     depend on N, which the suite's batch-invariance runs check for every TM), promote the block
//     as fmaf(part, sw * sa, sum) and add each K sub-range's sum in order into a total kept in
//     shared memory (registers hold the block's part and the sub-range's sum: TM of them); the
//     last sub-range's sum takes the total into registers for the epilogue (a K of one sub-range
//     never touches the totals).
// A warpgroup waits for its own block's MMAs before promoting them (ptxas serialises the wgmmas of
// a second accumulator set in flight: C7514), so the other warpgroups' MMAs are what keeps the
// tensor core busy meanwhile; the ring lets them drift apart.
// Split form (kSplit; launches of fewer tiles than SMs, such as 17-127-row decode steps, where
// one CTA per tile would leave most SMs idle): a cluster of P CTAs per tile, one K sub-range each
// (P = gemm_n_subranges(K)); each keeps its sub-range's sum in its totals, and after a cluster
// barrier rank q folds its share of the tile's outputs over the P CTAs' sums in sub-range order
// (0 + s0 + s1 + ...: the one-CTA kernel's chain, so the same bits).
#pragma once

#include <cuda_fp8.h>

#include "kernels/common/bulk_copy.cuh"
#include "kernels/common/wgmma_utils.cuh"
#include "kernels/gemm/fp8_gemv.cuh"
#include "kernels/gemm/fp8_gemv_plan.h"

namespace deepinfer::kernels {

inline constexpr int kFp8GemmGroupM = 8;  // token tiles per raster group (L2 reuse)

// The kernel's shape for C consumer warpgroups and TM-token tiles: C + 1 warpgroups (one thread of
// the last issues the copies), launched at 65536 / threads registers each, setmaxnreg moving the
// producers' to the consumers; the ring's stages and the totals share the 227 KB of shared memory
// (smaller tiles: smaller stages, so more of them, up to 8).
template <int C, int TM = kFp8GemmTile>
struct Fp8GemmShape {
  static_assert(TM == 32 || TM == 64 || TM == 128, "token tiles of 32, 64 or 128");
  static constexpr int kThreads = (C + 1) * 128;
  static constexpr int kProducerRegs = C == 2 ? 40 : 24;
  static constexpr int kConsumerRegs = C == 2 ? 232 : 160;  // (65536 - 128 producer) / (128 C), multiple of 8
  static constexpr int kWeightBytes = 64 * C * kFp8GemvBlock;  // one block, 64 C rows
  static constexpr int kCodesBytes = static_cast<int>(fp8_gemm_codes_block_bytes(TM));
  static constexpr int kStageBytes = kWeightBytes + kCodesBytes;
  static constexpr int kTotalsBytes = C * 64 * TM * 4;  // [warpgroup] fp8_totals_fold's slots
  static constexpr int kAcc = TM / 2;                   // a thread's accumulators of an m64nTM tile
  static constexpr int kFitStages = (227 * 1024 - kTotalsBytes) / kStageBytes;  // beside the totals
  static constexpr int kStages = TM == kFp8GemmTile ? (C == 2 ? 4 : 3) : (kFitStages < 8 ? kFitStages : 8);
  static constexpr int kSmem = kStages * kStageBytes + kTotalsBytes;
  static_assert(kStageBytes % 16 == 0, "bulk copies and descriptors need 16-byte stage offsets");
  static_assert(kSmem <= 227 * 1024, "shared memory");
  static_assert(128 * kProducerRegs + 128 * C * kConsumerRegs <= 65536, "register file");
};

// D[64 x TM] (+)= A[64 x 32] B[32 x TM], both E4M3 from shared memory (descriptors); d: the
// thread's TM / 2 accumulators (TM / 8 n8 tiles x 4).
template <int TM>
__device__ __forceinline__ void wgmma_m64ntk32_e4m3_ss(float (&d)[TM / 2], uint64_t a_desc, uint64_t b_desc,
                                                       bool accumulate) {
#ifdef DEEPINFER_NO_WGMMA
  __trap();
#else
  if constexpr (TM == 128) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " DI_WGMMA_D64_REGS ", %64, %65, p, 1, 1;\n}\n"
        : DI_WGMMA_D64_OPERANDS(d)
        : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
  } else if constexpr (TM == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " DI_WGMMA_D32_REGS ", %32, %33, p, 1, 1;\n}\n"
        : DI_WGMMA_D32_OPERANDS(d)
        : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
  } else {
    static_assert(TM == 32, "token tiles of 32, 64 or 128");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 " DI_WGMMA_D16_REGS ", %16, %17, p, 1, 1;\n}\n"
        : DI_WGMMA_D16_OPERANDS(d)
        : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
  }
#endif
}

// grid: (m_tiles x tm x kb / 8) CTAs of 128 threads; a half-warp per (token, block) as in the
// decode staging. A: BF16 rows FP8-quantised per 128 (a_fp8_block); tokens past M get zero codes
// and scales. out: [m tile][kb] blocks of fp8_gemm_codes_block_bytes(tm) (tm tokens per tile).
__global__ void __launch_bounds__(128) fp8_pack_codes_kernel(const __nv_bfloat16* A, int64_t lda, int64_t M,
                                                             int64_t kb_count, int tm, uint8_t* out) {
  pdl_prologue();  // A comes from the previous launch; the staging may still be read by the last GEMM
  const int64_t item = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 16;  // (token, block)
  const int64_t r = item / kb_count, b = item - r * kb_count;
  const int q = threadIdx.x & 15;
  uint32_t lo = 0, hi = 0;
  float s = 0.0f;
  if (r < M) {  // uniform in the half-warp, whose shuffles stay within it
    float v[8];
    bf16x8_to_f32(*reinterpret_cast<const uint4*>(A + r * lda + b * kFp8GemvBlock + 8 * q), v);
    s = fp8_block_codes(v, half_warp_amax(v, 0xffffu << (threadIdx.x & 16)), lo, hi);
  }
  uint8_t* blk = out + ((r / tm) * kb_count + b) * fp8_gemm_codes_block_bytes(tm);
  const int rl = static_cast<int>(r % tm), o = fp8_tile_offset(rl, 8 * q, tm);
  *reinterpret_cast<uint32_t*>(blk + o) = lo;        // inputs 8 q .. + 3: positions 4 c .. (h = 0)
  *reinterpret_cast<uint32_t*>(blk + o + 128) = hi;  // inputs 8 q + 4 .. + 7: h = 1, the step's other half
  if (q == 0) reinterpret_cast<float*>(blk + fp8_gemm_operand_bytes(tm))[rl] = s;
}

// grid: (tiles x rows x kb x 8 / 256) CTAs of 256 threads; a thread per 16 stored bytes (8 per
// row's block: consecutive threads read a row's bytes in order). Rows past N pack as zeros.
// out: [column tile][kb] blocks of `rows` (the tile's columns) x 128 bytes.
__global__ void __launch_bounds__(256) fp8_pack_weights_kernel(WeightDesc w, int64_t N, int64_t kb_count, int rows,
                                                               uint8_t* out) {
  pdl_prologue();  // the staging may still be read by the previous GEMM
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  const int chunk = static_cast<int>(idx & 7);
  const int64_t rest = idx >> 3, b = rest % kb_count, n = rest / kb_count;
  uint4 v = make_uint4(0, 0, 0, 0);
  if (n < N) v = *reinterpret_cast<const uint4*>(w.w + n * w.row_bytes + b * kFp8GemvBlock + 16 * chunk);
  uint8_t* blk = out + ((n / rows) * kb_count + b) * rows * kFp8GemvBlock;
  const int rl = static_cast<int>(n % rows);
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j)  // inputs 16 chunk + 4 j .. + 3 stay adjacent in the image
    *reinterpret_cast<uint32_t*>(blk + fp8_tile_offset(rl, 16 * chunk + 4 * j, rows)) = words[j];
}

struct Fp8GemmArgs {
  const uint8_t* codes = nullptr;  // [m_tiles][kb] code blocks
  // [tiles of the set][kb] weight blocks of each set (packed per launch into the staging, or the
  // weight's prepared blocks: WeightDesc::fp8_blocks)
  const uint8_t* weights0 = nullptr;
  const uint8_t* weights1 = nullptr;
  int64_t tiles0 = 0, n_tiles = 0, m_tiles = 0, kb = 0;
  int out_shift = 0;
  int split = 1;  // CTAs per tile (the split form's cluster: one K sub-range each), else 1
};

// Named barrier `id` over the 128 threads of one warpgroup (id 0 is __syncthreads').
__device__ __forceinline__ void warpgroup_bar_sync(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

// Output tile t: token tiles rastered in groups of kFp8GemmGroupM, so the CTAs working at one time
// share weight and code blocks in L2.
struct Fp8GemmTile {
  int64_t nt, mt;
};
__device__ __forceinline__ Fp8GemmTile fp8_gemm_tile(const Fp8GemmArgs& a, int64_t t) {
  const int64_t per_group = kFp8GemmGroupM * a.n_tiles, first_m = (t / per_group) * kFp8GemmGroupM;
  const int64_t gm = min64(a.m_tiles - first_m, kFp8GemmGroupM), id = t % per_group;
  return {id / gm, first_m + id % gm};
}

// The split form's fold: rank `sub` of the cluster adds, for its share of the live accumulators
// of thread slot (wg, tid), the P CTAs' sub-range sums (their totals) in sub-range order and stores
// the outputs. Accumulator e is column n (+ 8 for e % 4 >= 2) and token m0 + 8 (e / 4) + 2 c + e % 2.
template <int TM>
__device__ __forceinline__ void fp8_gemm_split_fold(const GemmParams& p, const float4* totals, int P, int sub,
                                                    int64_t nw, int64_t N, int64_t m0, int c, void* Cout,
                                                    int64_t ldc) {
  const int64_t rows = min64(p.M - m0, TM);
  const int live = 4 * static_cast<int>((rows + 7) / 8);  // accumulators holding tokens < M
  for (int e = live * sub / P; e < live * (sub + 1) / P; ++e) {
    const int64_t n = nw + ((e & 3) >= 2 ? 8 : 0), m = m0 + 8 * (e >> 2) + 2 * c + (e & 1);
    float total = 0.0f;
    for (int q = 0; q < P; ++q)
      total += cluster_load_f32(cluster_map(fp8_totals_at(totals, e), q));
    if (n < N && m < p.M) store_out(Cout, p.c_bf16, m * ldc + n, total);
  }
}

template <int C, bool kSplit, int TM = kFp8GemmTile>
__global__ void __launch_bounds__(Fp8GemmShape<C, TM>::kThreads, 1) fp8_gemm_kernel(GemmParams p, Fp8GemmArgs a) {
  using Sh = Fp8GemmShape<C, TM>;
  constexpr int kAcc = Sh::kAcc;
  constexpr int S = Sh::kStages;
  // The split form's producers wait at the fold's cluster barriers too, and at 24 / 40 registers
  // ptxas spilled there (92 / 40 bytes); 56 leave the consumers 152 / 200, which do not spill.
  constexpr int kProducerRegs = kSplit ? 56 : Sh::kProducerRegs;
  constexpr int kConsumerRegs = kSplit ? (C == 2 ? 200 : 152) : Sh::kConsumerRegs;
  static_assert(128 * kProducerRegs + 128 * C * kConsumerRegs <= 65536, "register file");
  pdl_prologue();  // the blocks come from the pre-passes
  extern __shared__ __align__(1024) uint8_t smem[];  // [stage][weight block, code block + scales], totals
  __shared__ __align__(8) uint64_t full[S], empty[S];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t tiles = a.n_tiles * a.m_tiles;
  const int KT = static_cast<int>(a.kb);
  const int blocks_per_sub = static_cast<int>(gemm_subrange(p.K) / kFp8GemvBlock);
  // The tiles this CTA walks and the blocks of each: persistent over every block, or (split) one
  // tile per cluster (grid = tiles x split) and the rank's sub-range.
  const int sub = kSplit ? static_cast<int>(blockIdx.x) % a.split : 0;
  const int64_t t_first = kSplit ? blockIdx.x / a.split : blockIdx.x, t_step = kSplit ? tiles : gridDim.x;
  const int i_begin = sub * blocks_per_sub, i_end = kSplit ? min(KT, i_begin + blocks_per_sub) : KT;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 4 * C);  // lane 0 of each consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warp >= 4 * C) {  // producer warpgroup: one thread issues both bulk copies of every block
    warpgroup_regs_dec<kProducerRegs>();
    if (warp == 4 * C && lane == 0) {
      int s = 0;
      uint32_t phase = 0;  // of stage s's current use; the first S uses need no empty stage
      bool wrapped = false;
      for (int64_t t = t_first; t < tiles; t += t_step) {
        const Fp8GemmTile tile = fp8_gemm_tile(a, t);
        const uint8_t* wb = tile.nt < a.tiles0 ? a.weights0 + tile.nt * a.kb * Sh::kWeightBytes
                                               : a.weights1 + (tile.nt - a.tiles0) * a.kb * Sh::kWeightBytes;
        const uint8_t* cb = a.codes + tile.mt * a.kb * Sh::kCodesBytes;
        for (int i = i_begin; i < i_end; ++i) {
          if (wrapped) mbar_wait(&empty[s], phase ^ 1);
          uint8_t* dst = smem + s * Sh::kStageBytes;
          mbar_arrive_expect_tx(&full[s], Sh::kStageBytes);
          bulk_copy_g2s(dst, wb + i * Sh::kWeightBytes, Sh::kWeightBytes, &full[s]);
          bulk_copy_g2s(dst + Sh::kWeightBytes, cb + i * Sh::kCodesBytes, Sh::kCodesBytes, &full[s]);
          if (++s == S) s = 0, phase ^= 1, wrapped = true;
        }
      }
    }
    if constexpr (kSplit) {  // the fold's two cluster barriers take every thread
      __syncwarp();
      cluster_arrive();
      cluster_wait();
      cluster_arrive();
      cluster_wait();
    }
    return;
  }

  warpgroup_regs_inc<kConsumerRegs>();
  // Consumers: warpgroup wg takes columns 64 wg .. 64 wg + 63 of the tile. Accumulator e of the
  // m64nTM layout: column 16 (warp % 4) + g (+ 8 for e % 4 >= 2), token 8 (e / 4) + 2 c + e % 2.
  const int wg = warp / 4, g = lane >> 2, c = lane & 3, tid = threadIdx.x & 127;
  float4* totals = reinterpret_cast<float4*>(smem + S * Sh::kStageBytes) + wg * (kAcc / 4) * 128 + tid;
  // Stage 0's descriptors (stage s adds s x kStageBytes / 16: the start address field's units);
  // a k32 step is 64 C x 32 weight bytes and TM x 32 code bytes further.
  const uint64_t a_desc0 = wgmma_desc(smem + wg * 2048, 128, 256);
  const uint64_t b_desc0 = wgmma_desc(smem + Sh::kWeightBytes, 128, 256);
  int s = 0;
  uint32_t phase = 0;
  for (int64_t t = t_first; t < tiles; t += t_step) {
    const Fp8GemmTile tile = fp8_gemm_tile(a, t);
    const int set = tile.nt >= a.tiles0 ? 1 : 0;
    const WeightDesc& w = set == 0 ? p.w : p.w1;
    const int64_t N = set == 0 ? p.N : p.N1, ldc = set == 0 ? p.ldc : p.ldc1;
    const int64_t n0 = (tile.nt - set * a.tiles0) * (64 * C) + 64 * wg, m0 = tile.mt * TM;
    // This warpgroup's weight scales (one per block: block_out >= 64); a warpgroup wholly past N
    // computes zeros and stores nothing.
    const uint8_t* wscale = w.scale + (min64(n0, N - 1) >> a.out_shift) * w.scale_cols;
    float part[kAcc], sum[kAcc];
#pragma unroll
    for (int e = 0; e < kAcc; ++e) sum[e] = 0.0f;
    bool first_sub = true;
    for (int i = i_begin, in_sub = 0; i < i_end; ++i) {
      const float sw = e8m0_to_f32(wscale[i]);
      mbar_wait(&full[s], phase);
      const uint64_t so = static_cast<uint64_t>(s * Sh::kStageBytes) >> 4;
      wgmma_fence_operands(part);
      wgmma_fence();
#pragma unroll
      for (int step = 0; step < 4; ++step)
        wgmma_m64ntk32_e4m3_ss<TM>(part, a_desc0 + so + ((step * 64 * C * 32) >> 4),
                                   b_desc0 + so + ((step * TM * 32) >> 4), step > 0);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(part);
      const float* s_tok =
          reinterpret_cast<const float*>(smem + s * Sh::kStageBytes + Sh::kWeightBytes + fp8_gemm_operand_bytes(TM));
#pragma unroll
      for (int j = 0; j < kAcc / 4; ++j) {
        const float2 st = *reinterpret_cast<const float2*>(s_tok + 8 * j + 2 * c);
        const float s0 = sw * st.x, s1 = sw * st.y;
        sum[4 * j] = fmaf(part[4 * j], s0, sum[4 * j]);
        sum[4 * j + 1] = fmaf(part[4 * j + 1], s1, sum[4 * j + 1]);
        sum[4 * j + 2] = fmaf(part[4 * j + 2], s0, sum[4 * j + 2]);
        sum[4 * j + 3] = fmaf(part[4 * j + 3], s1, sum[4 * j + 3]);
      }
      __syncwarp();  // the warp's scale reads are done before its lane 0 frees the stage
      if (lane == 0) mbar_arrive(&empty[s]);
      if (++s == S) s = 0, phase ^= 1;
      if (i + 1 == i_end) {  // the last sub-range ends: the tile's totals stay in registers (sum)
        // (0 + sum is sum bitwise: sum starts at +0 and round-to-nearest never makes -0 of it.)
        fp8_totals_finish(totals, sum, first_sub);
      } else if (++in_sub == blocks_per_sub) {  // a sub-range ends: into the total, in order
        in_sub = 0;
        fp8_totals_fold(totals, sum, first_sub);
        first_sub = false;
      }
    }
    void* const Cout = set == 0 ? p.C : p.C1;
    const int64_t nw = n0 + 16 * (warp & 3) + g;
    if constexpr (kSplit) {  // this sub-range's sum (one: first_sub stayed true) into the totals, then the fold
      fp8_totals_store(totals, sum);
      cluster_arrive();
      cluster_wait();  // every CTA's sums are in its totals
      fp8_gemm_split_fold<TM>(p, totals, a.split, sub, nw, N, m0, c, Cout, ldc);
      cluster_arrive();
      cluster_wait();  // every rank has read them (they live until then)
      continue;
    }
    if (!p.c_bf16 || ldc % 8 != 0 || reinterpret_cast<uintptr_t>(Cout) % 16 != 0) {  // element stores
#pragma unroll
      for (int e = 0; e < kAcc; ++e) {
        const int64_t n = nw + ((e & 3) >= 2 ? 8 : 0), m = m0 + 8 * (e >> 2) + 2 * c + (e & 1);
        if (n < N && m < p.M) store_out(Cout, p.c_bf16, m * ldc + n, sum[e]);
      }
      continue;
    }
    // BF16 rows through shared memory: the warpgroup's 64 columns x TM tokens as [token][64 + 8
    // pad] BF16 (144-byte rows: a store's four token rows fall on different banks) over its totals
    // (TM x 256 bytes each), then each token's 128 bytes as 16-byte stores (TM / 16 per thread
    // instead of TM / 2 2-byte ones).
    warpgroup_bar_sync(1 + wg);  // every thread has read its totals before the region is reused
    __nv_bfloat16* tile_out = reinterpret_cast<__nv_bfloat16*>(smem + S * Sh::kStageBytes) + wg * TM * 128;
    const int col = 16 * (warp & 3) + g;
#pragma unroll
    for (int e = 0; e < kAcc; ++e)
      tile_out[(8 * (e >> 2) + 2 * c + (e & 1)) * 72 + col + ((e & 3) >= 2 ? 8 : 0)] = __float2bfloat16_rn(sum[e]);
    warpgroup_bar_sync(1 + wg);
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(Cout);
#pragma unroll
    for (int q = 0; q < TM / 16; ++q) {  // chunk (token, 8 columns): consecutive threads along a token's row
      const int idx = tid + 128 * q, tok = idx >> 3, cc = (idx & 7) * 8;
      const int64_t m = m0 + tok, n = n0 + cc;
      if (m >= p.M || n >= N) continue;
      const uint4 v = *reinterpret_cast<const uint4*>(tile_out + tok * 72 + cc);
      if (n + 8 <= N) {
        *reinterpret_cast<uint4*>(out + m * ldc + n) = v;
      } else {
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 8; ++j)  // the columns before N of a chunk N cuts
          if (n + j < N) reinterpret_cast<uint16_t*>(out)[m * ldc + n + j] = static_cast<uint16_t>(words[j / 2] >> (16 * (j % 2)));
      }
    }
    warpgroup_bar_sync(1 + wg);  // the region holds the next tile's totals
  }
}

}  // namespace deepinfer::kernels
