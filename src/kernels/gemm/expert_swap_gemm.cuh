// The FP4 expert GEMM of large-M MoE launches (prefill) with its operands swapped: C^T = W A^T.
// The expert weights are wgmma's A operand, decoded by the consumer threads straight into their
// register fragments; the activations, packed per (expert, 128-row tile) as for the producer
// kernel (pack_a_kernel<F, true>, packed_expert_gemm.cuh), are its B operand from shared memory.
//
// Why: the producer kernel dequantises each K tile of weights into a BF16 block in shared memory
// that both consumer warpgroups then read — per 128 x 128 x 128 tile 32 KB written and 64 KB read
// besides the activations, near the shared-memory bandwidth, with producers and consumers waiting
// on each other through the stages (tuning record, sessions 13-14). Here no weight goes through
// shared memory as BF16: the canonical k permutation of FP4 (packed_plan.h) is the mma fragment
// layout, so lane (g, c) of a warp needs exactly run c (16 bytes, one K tile's 32 elements) of its
// rows g and g + 8: decode_quad(run, code, j) gives the fragment words of step j. Only the raw
// runs pass through shared memory: the producer warpgroup copies them (cp.async, one tile row per
// thread) into the stage beside the activation block, so the consumers' instruction stream is the
// decode and the MMAs (with the consumers issuing their own copies, ncu showed their address work
// and its register hazards among the top stalls, and the tensor pipe at ~42%).
//
// Same products in the same k16 steps, sub-ranges folded in the same order as every GEMM kernel
// (gemm_common.cuh); a step's sum does not depend on which operand is A, so the bits are those of
// the other kernels (GPU suite: MoeExpertsAreBitwiseBatchInvariant compares with the small-M
// kernels, and the MoE tests run again on the producer kernel).
//
// CTA: two consumer warpgroups (weight rows 64 wg .. 64 wg + 63 of a 128-row tile, warp w of the
// CTA rows 16 w ..) and a producer warpgroup filling a ring of stages: its first thread moves the
// activation block with a bulk copy, every thread four 16-byte runs and one code word of the K
// tile (swap_stage_rows). A K tile's eight wgmma.m64n128k16 (A from registers) are one commit
// group; the next K tile's fragments are decoded into the other register set while it runs (two
// groups of four per K tile measured 3% slower, four of two 7-10% slower: tuning record).
#pragma once

#include <type_traits>

#include "kernels/gemm/packed_expert_gemm.cuh"

namespace deepinfer::kernels {

inline constexpr int kSwapConsumers = 256;   // two warpgroups
// + a producer warpgroup: setmaxnreg moves registers per warpgroup (one CTA per SM: launched at 168
// each, the producers keep 40 and the consumers take 232: their two accumulator sets and two
// fragment sets fit without spills; at 288 threads ptxas capped them at 168 and spilled. Two CTAs:
// 80, 40 and 96, SwapTile::kConsumerRegs).
inline constexpr int kSwapThreads = kSwapConsumers + 128;
// A stage: the activation block (packed_plan.h: NT token rows x one K tile), then the K tile's
// raw weights: [row half h][consumer thread] 16-byte runs (consumer (warp w, lane g, c) reads run
// c of row 16 w + g + 8 h) and [tile row] the rows' UE8M0 code words (four codes: the K tile's
// four runs).
inline constexpr int kSwapRunBytes = 2 * kSwapConsumers * 16;
// The token tile: NT = 128 (prefill) or 32 (decode batches of ~10-30 rows per expert, where the
// launches are memory bound: more stages in flight instead of wider MMAs).
// CTAS: CTAs per SM. Two (NT = 32 only; default, DEEPINFER_GEMM_EXPERT_SWAP_CTAS) give each scheduler four
// consumer warps instead of two — the batch-512 launch is issue bound at two (ncu, session 22:
// 0.53 issued per scheduler cycle) — at half the registers each: one fragment set decoded in two
// halves (steps 0-3 while the previous tile's second half runs, 4-7 while this tile's first
// does) and half the stages per CTA.
template <int NT, int CTAS = 1>
struct SwapTile {
  static_assert(NT == 128 || NT == 32);
  static_assert(CTAS == 1 || (CTAS == 2 && NT == 32));
  static constexpr int kBlockBytes = NT * kGemmBK * 2;
  static constexpr int kStepBytes = NT * 32;  // one k16 step of the block
  static constexpr int kStageBytes = kBlockBytes + kSwapRunBytes + kPackRows * 4;
  static constexpr int kStages = NT == 128 ? 5 : (CTAS == 1 ? 10 : 6);
  static constexpr size_t kSmem = size_t{kStages} * kStageBytes;
  // setmaxnreg budgets: the launch's registers (a 64K file shared by CTAS CTAs of kSwapThreads, in
  // units of 8) less the producers' 40, over the consumers.
  static constexpr int kLaunchRegs = 65536 / (CTAS * kSwapThreads) / 8 * 8;
  static constexpr int kConsumerRegs = (kLaunchRegs * kSwapThreads - 40 * 128) / kSwapConsumers / 8 * 8;
  static_assert(kStageBytes % 128 == 0);
  static_assert(CTAS * (kSmem + 1024) <= 228 * 1024, "the swapped expert kernel's shared memory exceeds an H100/H200 SM's");
  static_assert(kSmem + 1024 <= 227 * 1024, "the swapped expert kernel's shared memory exceeds an H100/H200 block's");
};

// Producer thread r's part of a stage: the raw runs of tile rows 32 q + r / 4 (run r % 4), q = 0..3,
// and the scale code word of tile row r (n = first + row; rows past N copy zeros: code 0 and zero
// runs decode to +0, their outputs are not stored). Each quarter warp (8 lanes: one 16-byte copy
// each) thus copies two rows' 64 contiguous bytes — whole 32-byte sectors, and 128 contiguous
// bytes of the consumers' slots. (One row per thread put 8 rows of one run in a quarter: every
// sector requested twice, ncu session 22.) The copies complete on the stage's full barrier (one
// arrival per producer thread: cp.async's own arrive, or for an unaligned scale tensor a wait, a
// plain load and a releasing arrive).
struct SwapRows {
  const uint8_t* run[4];  // the runs' K-tile 0 address of rows 32 q + r / 4 (row 0's when past N)
  bool run_ok[4];
  const uint8_t* code;  // row r's code bytes of K tile 0
  bool code_ok;
};
__device__ __forceinline__ void swap_stage_rows(unsigned char* raw, int r, const SwapRows& rows, int i, bool aligned,
                                                uint64_t* full) {
  const int c = r & 3;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int row = 32 * q + (r >> 2);
    const int consumer = (row / 16) * 32 + (row % 8) * 4, h = (row % 16) / 8;
    cp_async16(raw + (h * kSwapConsumers + consumer + c) * 16, rows.run[q] + i * (kGemmBK / 2) + 16 * c,
               rows.run_ok[q]);
  }
  const uint8_t* code = rows.code + i * (kGemmBK / 32);
  uint32_t* dst = reinterpret_cast<uint32_t*>(raw + kSwapRunBytes + r * 4);
  if (aligned) {
    cp_async4_zfill(dst, code, rows.code_ok);
    cp_async_mbar_arrive_noinc(full);
  } else {
    cp_async_commit();  // (wait_group covers committed copies only)
    cp_async_wait<0>();
    *dst = rows.code_ok ? code[0] | (uint32_t{code[1]} << 8) | (uint32_t{code[2]} << 16) | (uint32_t{code[3]} << 24)
                        : 0;
    mbar_arrive(full);
  }
}

// Thread 0 initialises a ring's barriers: a stage is full after the activation block's bulk copy
// and each producer thread's rows (swap_stage_rows), empty after lane 0 of each consumer warp.
template <int S>
__device__ __forceinline__ void swap_init_ring(uint64_t (&full)[S], uint64_t (&empty)[S]) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1 + 128);
      mbar_init(&empty[s], kSwapConsumers / 32);
    }
    mbar_init_fence();
  }
}

// Producer thread r's rows of the output tile whose first weight row is n0 (SwapRows).
__device__ __forceinline__ SwapRows swap_rows(const WeightDesc& w, int64_t N, int64_t n0, int r) {
  SwapRows rows;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int64_t n = n0 + 32 * q + (r >> 2);
    rows.run_ok[q] = n < N;
    rows.run[q] = w.w + (rows.run_ok[q] ? n : 0) * w.row_bytes;
  }
  rows.code_ok = n0 + r < N;
  rows.code = w.scale + (rows.code_ok ? n0 + r : 0) * w.scale_cols;
  return rows;
}

// The output tiles a CTA walks (t_first, t_first + t_step, ... below y_tiles x n_tiles) and the
// K tiles [i_begin, i_end) of each: every K tile of tiles blockIdx.x, + gridDim.x, ... (persistent
// CTAs), or (kSplit: a K-split cluster's CTA, fp8_expert_gemm.cuh) one tile and one canonical K
// sub-range. A compile-time choice: the persistent kernels' producers have 40 registers, and a
// walk kept in registers made ptxas spill there.
struct SwapWalk {
  int64_t t_first, t_step;
  int i_begin, i_end;
};
template <bool kSplit>
__device__ __forceinline__ SwapWalk swap_walk(const PackedExpertArgs& p) {
  const int KT = static_cast<int>(p.k_tiles);
  if constexpr (kSplit) {
    const int per = static_cast<int>(gemm_subrange(p.K) / kGemmBK), sub = static_cast<int>(blockIdx.x) % p.split;
    return {blockIdx.x / p.split, p.y_tiles * p.n_tiles, sub * per, min(KT, (sub + 1) * per)};
  } else {
    return {blockIdx.x, gridDim.x, 0, KT};
  }
}

// The producer warpgroup of a swapped-operand expert kernel: over the CTA's output tiles (the
// valid ones are a prefix: the table ends in -1 entries) and their K tiles, stage u % S of the
// ring gets the activation side from thread 0 (tile_a(y) gives the tile's copy(stage, i, full))
// and, at raw_offset, each producer thread's rows of the weights (swap_rows, swap_stage_rows).
template <bool kSplit, int S, class TileA>
__device__ __forceinline__ void swap_produce(const PackedExpertArgs& p, unsigned char* smem, int stage_bytes,
                                             int raw_offset, uint64_t (&full)[S], uint64_t (&empty)[S], TileA tile_a) {
  const int r = static_cast<int>(threadIdx.x) - kSwapConsumers;  // this thread's tile row
  const int64_t tiles = p.y_tiles * p.n_tiles;
  const SwapWalk walk = swap_walk<kSplit>(p);
  int u = 0;
  for (int64_t t = walk.t_first; t < tiles; t += walk.t_step) {
    const int64_t y = t / p.n_tiles;
    const int32_t expert = p.table[y];
    if (expert < 0) break;
    const WeightDesc w = p.experts[expert];
    const SwapRows rows = swap_rows(w, p.N, (t % p.n_tiles) * kPackRows, r);
    const bool aligned = (reinterpret_cast<uintptr_t>(rows.code) & 3) == 0;  // (scale_cols % 4 == 0: K % 128 == 0)
    const auto copy_a = tile_a(y);
    for (int i = walk.i_begin; i < walk.i_end; ++i, ++u) {
      const int s = u % S;
      if (u >= S) mbar_wait_idle(&empty[s], ((u / S) - 1) & 1);
      unsigned char* stage = smem + s * stage_bytes;
      if (r == 0) copy_a(stage, i, &full[s]);
      swap_stage_rows(stage + raw_offset, r, rows, i, aligned, &full[s]);
    }
  }
  cp_async_commit();
  cp_async_wait<0>();  // no copy outlives the thread
}

// This thread's raw K tile: the runs of its two rows and their scale codes.
struct SwapRaw {
  uint4 run[2];
  uint8_t code[2];
  bool exact;  // both codes in the fast decoder's range (always, in practice)
};

// The fragments of steps first .. first + STEPS - 1 of a K tile: f[q] = {row g k 2c, row g + 8
// k 2c, row g k 2c + 8, row g + 8 k 2c + 8} pairs of step first + q (the mma.m16n8k16 A layout).
template <WeightFmt F, int STEPS>
__device__ __forceinline__ void swap_decode_steps(const SwapRaw& r, int first, uint32_t (&f)[STEPS][4]) {
  if (r.exact) {
    const uint32_t s0 = quad_scale<F>(r.code[0]), s1 = quad_scale<F>(r.code[1]);
#pragma unroll
    for (int q = 0; q < STEPS; ++q) {
      decode_quad_scaled<F>(r.run[0], s0, first + q, f[q][0], f[q][2]);
      decode_quad_scaled<F>(r.run[1], s1, first + q, f[q][1], f[q][3]);
    }
  } else {
#pragma unroll
    for (int q = 0; q < STEPS; ++q) {
      decode_quad<F>(r.run[0], r.code[0], first + q, f[q][0], f[q][2]);
      decode_quad<F>(r.run[1], r.code[1], first + q, f[q][1], f[q][3]);
    }
  }
}

// One commit group's wgmma: steps first .. first + Q - 1 of a K tile (fragments f, the stage's
// activation block at descriptor b). 32-pair tiles run only the tile's 8 * groups token columns
// (groups = ceil(tokens / 8): wgmma m64n8 .. m64n32; a tile of ~12 of 32 tokens, typical at batch
// 512, then takes half the tensor time); the columns left out hold no token and are not stored.
template <int NT, int STEP_BYTES, int Q>
__device__ __forceinline__ void swap_mma_group(float (&acc)[NT / 2], const uint32_t (&f)[Q][4], uint64_t b, int first,
                                               int groups) {
  auto run = [&](auto n) {
    wgmma_fence();  // (in each branch: a fence before the branch made ptxas inject its own in each)
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      const uint64_t d = b + (((first + q) * STEP_BYTES) >> 4);
      if constexpr (NT == 128) {
        wgmma_m64k16_rs(acc, f[q], d);
      } else {
        wgmma_m64nk16_rs_narrow<decltype(n)::value>(acc, f[q], d);
      }
    }
  };
  if constexpr (NT == 128) {
    run(std::integral_constant<int, 128>{});
  } else if (groups == 1) {
    run(std::integral_constant<int, 8>{});
  } else if (groups == 2) {
    run(std::integral_constant<int, 16>{});
  } else if (groups == 3) {
    run(std::integral_constant<int, 24>{});
  } else {
    run(std::integral_constant<int, 32>{});
  }
}

// The outputs of output tile (token tile y, column tile nt) of an expert launch: v[4 j + 2 h + e]
// is weight row n_local + 8 h, token 8 j + 2 c + e of the tile, stored at its pair's row of C (the
// routing's permutation). With pairs, lanes g and g ^ 1 (rows n, n + 1) swap one value so that
// each stores two adjacent columns of one token: even g token 8 j + 2 c, odd g token 8 j + 2 c + 1.
// (The FP8-order expert kernel's epilogue too: fp8_expert_gemm.cuh.) expert_group_store: n8 group
// j of them, v[2 h + e] (the tile's count tokens from pair `begin` of the routing's order; every
// lane of a warp with the same j).
__device__ __forceinline__ void expert_group_store(const PackedExpertArgs& p, const float (&v)[4], int j,
                                                   int32_t begin, int32_t count, int64_t nt, int n_local, int g,
                                                   int c) {
  const bool even = (g & 1) == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float v0 = v[2 * h], v1 = v[2 * h + 1];
    const int64_t n = nt * kPackRows + n_local + 8 * h;
    const int tok0 = 8 * j + 2 * c;
    if (p.c_pairs) {
      const float recv = __shfl_xor_sync(0xffffffffu, even ? v1 : v0, 4);
      const int tok = tok0 + (even ? 0 : 1);
      const int64_t n_even = n & ~int64_t{1};
      if (tok < count && n_even < p.N)
        packed_store_pair(p.C, p.c_bf16, true, static_cast<int64_t>(p.perm[begin + tok]) * p.ldc + n_even,
                          even ? v0 : recv, even ? recv : v1, true);
    } else if (n < p.N) {
      if (tok0 < count) store_out(p.C, p.c_bf16, static_cast<int64_t>(p.perm[begin + tok0]) * p.ldc + n, v0);
      if (tok0 + 1 < count) store_out(p.C, p.c_bf16, static_cast<int64_t>(p.perm[begin + tok0 + 1]) * p.ldc + n, v1);
    }
  }
}

template <int R>
__device__ __forceinline__ void expert_tile_store(const PackedExpertArgs& p, const float (&v)[R], int64_t y, int64_t nt,
                                                  int n_local, int g, int c) {
  const int32_t begin = p.table[p.y_tiles + y], count = p.table[2 * p.y_tiles + y];
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const float vj[4] = {v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]};
    expert_group_store(p, vj, j, begin, count, nt, n_local, g, c);
  }
}

template <WeightFmt F, int NT, int CTAS = 1>
__global__ void __launch_bounds__(kSwapThreads, CTAS) expert_swap_gemm_kernel(PackedExpertArgs p) {
  static_assert(F == WeightFmt::kFp4Block, "a K tile of a row is one 16-byte run per lane only for FP4");
  static_assert(kGemmBK == 4 * run_elems(F) && kPackRows == 128);
  using T = SwapTile<NT, CTAS>;
  constexpr int kStages = T::kStages, R = NT / 2;  // R: accumulators per thread
  pdl_prologue();
  extern __shared__ __align__(1024) unsigned char sw_smem[];  // [stage][A block, raw runs, codes]
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
  const int64_t tiles = p.y_tiles * p.n_tiles;
  const int KT = static_cast<int>(p.k_tiles);
  swap_init_ring(full, empty);
  __syncthreads();

  if (warp >= kSwapConsumers / 32) {  // producer warpgroup
    warpgroup_regs_dec<40>();
    swap_produce<false>(p, sw_smem, T::kStageBytes, T::kBlockBytes, full, empty, [&](int64_t y) {
      const uint8_t* a = p.a + y * p.k_tiles * T::kBlockBytes;
      // Only the tile's token rows of the activation block move: a step's rows 0 .. 8 G - 1 are
      // its first 256 G bytes (packed_offset). The rows past them keep an older tile's values;
      // each output column depends on its own token row only, and those columns are not stored.
      const int groups = p.trim ? (p.table[2 * p.y_tiles + y] + 7) / 8 : NT / 8;
      const uint32_t step_bytes = 256u * static_cast<uint32_t>(groups);
      return [=](unsigned char* stage, int i, uint64_t* full_s) {
        const uint8_t* src = a + static_cast<int64_t>(i) * T::kBlockBytes;
        if (groups == NT / 8) {
          mbar_arrive_expect_tx(full_s, T::kBlockBytes);
          bulk_copy_g2s(stage, src, T::kBlockBytes, full_s);
        } else {
          mbar_arrive_expect_tx(full_s, 8 * step_bytes);
#pragma unroll
          for (int j = 0; j < 8; ++j)
            bulk_copy_g2s(stage + j * T::kStepBytes, src + j * T::kStepBytes, step_bytes, full_s);
        }
      };
    });
    return;
  }

  // Consumers. This thread's rows of an output tile: n_local = 16 warp + g and + 8.
  warpgroup_regs_inc<T::kConsumerRegs>();
  const int n_local = warp * 16 + g;
  const uint64_t desc0 = wgmma_desc(sw_smem, 128, 256);
  const int tiles_per_sub = static_cast<int>(gemm_subrange(p.K) / kGemmBK);
  int u = 0;  // K-tile uses so far: stage u % kStages
  // Waits for use `use`'s stage and takes this thread's raw K tile into registers.
  auto take_raw = [&](SwapRaw& r, int use) {
    const int s = use % kStages;
    mbar_wait(&full[s], (use / kStages) & 1);
    const unsigned char* raw = sw_smem + s * T::kStageBytes + T::kBlockBytes;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      r.run[h] = *reinterpret_cast<const uint4*>(raw + (h * kSwapConsumers + tid) * 16);
      r.code[h] = static_cast<uint8_t>(*reinterpret_cast<const uint32_t*>(raw + kSwapRunBytes + (n_local + 8 * h) * 4) >>
                                       (8 * c));
    }
    r.exact = quad_scale_exact<F>(r.code[0]) && quad_scale_exact<F>(r.code[1]);
  };

  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t y = t / p.n_tiles, nt = t % p.n_tiles;
    if (p.table[y] < 0) break;
    const int groups = p.trim ? (p.table[2 * p.y_tiles + y] + 7) / 8 : NT / 8;  // token columns in use / 8
    float acc[R], total[R];
#pragma unroll
    for (int e = 0; e < R; ++e) acc[e] = 0.0f, total[e] = 0.0f;
    SwapRaw raw;
    if constexpr (CTAS == 2) {
      // Two commit groups per K tile on halves lo (steps 0-3) and hi (4-7) of one fragment set: a
      // half is decoded while the other half's group runs (wgmma_wait<1> before rewriting it).
      uint32_t lo[4][4], hi[4][4];
      take_raw(raw, u);
      swap_decode_steps<F, 4>(raw, 0, lo);
      for (int i = 0, in_sub = 0; i < KT; ++i, ++u, ++in_sub) {
        if (in_sub == tiles_per_sub) {  // a sub-range ends: fold it (canonical order)
          in_sub = 0;
          wgmma_fold_subrange(acc, total);
        }
        const uint64_t b = desc0 + (((u % kStages) * T::kStageBytes) >> 4);
        wgmma_fence_operands(acc);
        swap_mma_group<NT, T::kStepBytes>(acc, lo, b, 0, groups);
        wgmma_commit();
        wgmma_wait<1>();  // the previous tile's hi group is done: its stage may be refilled, hi rewritten
        if (i > 0 && lane == 0) mbar_arrive(&empty[(u - 1) % kStages]);
        swap_decode_steps<F, 4>(raw, 4, hi);
        swap_mma_group<NT, T::kStepBytes>(acc, hi, b, 4, groups);
        wgmma_commit();
        wgmma_wait<1>();  // this tile's lo group is done: lo may be rewritten
        if (i + 1 < KT) {
          take_raw(raw, u + 1);
          swap_decode_steps<F, 4>(raw, 0, lo);
        }
      }
    } else {
      // A K tile is one commit group of eight wgmma on fragments x; the next tile's fragments are
      // decoded into y while they run (y's previous MMAs, two tiles back, are done: wgmma_wait<1>).
      uint32_t fa[8][4], fb[8][4];
      auto decode_tile = [&](uint32_t (&f)[8][4]) { swap_decode_steps<F, 8>(raw, 0, f); };
      int in_sub = 0;
      auto k_tile = [&](int i, uint32_t (&x)[8][4], uint32_t (&y)[8][4]) {
        const int s = u % kStages;
        if (in_sub == tiles_per_sub) {  // a sub-range ends: fold it (canonical order; no division)
          in_sub = 0;
          wgmma_fold_subrange(acc, total);
        }
        const uint64_t b = desc0 + ((s * T::kStageBytes) >> 4);
        wgmma_fence_operands(acc);
        swap_mma_group<NT, T::kStepBytes>(acc, x, b, 0, groups);
        wgmma_commit();
        wgmma_wait<1>();  // the previous K tile is done: its stage may be refilled, y rewritten
        if (i > 0 && lane == 0) mbar_arrive(&empty[(u - 1) % kStages]);
        if (i + 1 < KT) {
          take_raw(raw, u + 1);
          decode_tile(y);
        }
        ++u, ++in_sub;
      };
      take_raw(raw, u);
      decode_tile(fa);
      for (int i = 0; i < KT; i += 2) {
        k_tile(i, fa, fb);
        if (i + 1 < KT) k_tile(i + 1, fb, fa);
      }
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    if (lane == 0) mbar_arrive(&empty[(u - 1) % kStages]);  // the tile's last stage

    // Outputs: total + acc (the last sub-range folded in, as wgmma_fold_subrange does).
#pragma unroll
    for (int e = 0; e < R; ++e) total[e] = total[e] + acc[e];
    expert_tile_store(p, total, y, nt, n_local, g, c);
  }
}

}  // namespace deepinfer::kernels
