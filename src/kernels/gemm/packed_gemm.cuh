// The packed large-M GEMM (layout and plan: packed_plan.h). Three kernels per weight set:
//   * pack_a_kernel: BF16 activations -> 32 KB blocks [group][m tile][k tile] (experts: [tile of
//     the expert table][k tile], packed_expert_gemm.cuh) in the wgmma shared-memory layout and the
//     canonical k permutation of the weight format;
//   * pack_w_kernel: the weights dequantised to BF16 (decode_quad: the decoder every GEMM kernel
//     shares, so the same bits) -> blocks [group][n tile][k tile] in the same layout;
//   * packed_gemm_kernel: 128 x 128 output tiles; a producer warp moves the A and W blocks of each
//     K tile with two bulk copies into a ring of shared-memory stages (transaction barriers), two
//     consumer warpgroups (64 rows each) issue the tile's 8 wgmma.m64n128k16 from shared memory;
//     persistent CTAs walk the output tiles.
// Summation: the canonical order of gemm_common.cuh — the same k16 steps in the same order, each
// K sub-range accumulated from zero and folded in order — so the results are bitwise those of
// the dequantising kernels (a wgmma step with A from shared memory rounds like the mma.sync step:
// tools/device/probes/wgmma_probe.cu).
#pragma once

#include "kernels/common/bulk_copy.cuh"
#include "kernels/common/wgmma_utils.cuh"
#include "kernels/gemm/gemm_common.cuh"
#include "kernels/gemm/packed_plan.h"

namespace deepinfer::kernels {

inline constexpr int kPackThreads = 256;
inline constexpr int kPackedStages = 3;                          // 64 KB per stage
inline constexpr int kPackedThreads = 9 * 32;                    // 2 consumer warpgroups + producer warp
inline constexpr int kPackedGroupM = 8;                          // m tiles per raster group (L2 reuse)
inline constexpr size_t kPackedSmem = size_t{kPackedStages} * 2 * kPackBlockBytes;

struct PackedOperand {
  const void* src = nullptr;  // A: BF16 rows (lda elements apart); W: the weight
  int64_t rows = 0;           // M (A) or N (W) per group: rows past it pack as zeros
  int64_t tiles = 0;          // 128-row tiles per group
  int64_t k_tiles = 0;
  uint8_t* out = nullptr;     // [groups][tiles][k_tiles] blocks
};

// Expert mode of pack_a_kernel: tile y of the (expert, 128-row tile) table (packed_plan.h) holds
// pairs begin .. begin + rows - 1 of the routing's permutation, A row perm[pair] / a_div.
struct PackedRows {
  const int32_t* table = nullptr;  // int32 [3][y_tiles]: expert (-1: no tile), first pair, rows
  int64_t y_tiles = 0;
  const int32_t* perm = nullptr;
  int a_div = 1;
};

// One block per CTA: blockIdx.x = (group x tiles + tile) x k_tiles + k tile (experts: tile y x
// k_tiles + k tile). Each thread reads 16 coalesced bytes of a row (4 pairs of consecutive k,
// which stay together in the layout) and puts the pairs in their packed places (packed_offset)
// in a block staged in shared memory, which is then written out whole.
// ROWS: rows per block (128; 32 for the swapped expert kernel's small token tiles, experts only).
template <WeightFmt F, bool EXPERTS, int ROWS = kPackRows>
__global__ void __launch_bounds__(kPackThreads) pack_a_kernel(PackedOperand op, int64_t lda, int64_t K,
                                                                PackedRows rows) {
  static_assert(ROWS == kPackRows || (EXPERTS && ROWS == 32));
  constexpr int kBlockBytes = ROWS * kGemmBK * 2;
  pdl_prologue();
  __shared__ __align__(16) unsigned char block[kBlockBytes];
  __shared__ int32_t src_row[ROWS];  // A row of each tile row, -1: none (zeros)
  const int64_t blk = blockIdx.x, kt = blk % op.k_tiles, gt = blk / op.k_tiles;
  int64_t group = 0;
  if constexpr (EXPERTS) {
    if (rows.table[gt] < 0) return;  // past the routed tiles (uniform)
    const int32_t begin = rows.table[rows.y_tiles + gt], count = rows.table[2 * rows.y_tiles + gt];
    for (int r = threadIdx.x; r < ROWS; r += kPackThreads) src_row[r] = r < count ? rows.perm[begin + r] / rows.a_div : -1;
  } else {
    group = gt / op.tiles;
    const int64_t row0 = (gt % op.tiles) * kPackRows;
    for (int r = threadIdx.x; r < kPackRows; r += kPackThreads)
      src_row[r] = row0 + r < op.rows ? static_cast<int32_t>(row0 + r) : -1;
  }
  __syncthreads();
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(op.src) + group * K + kt * kGemmBK;
  // All of a thread's loads first, then its stores: one memory latency per block instead of one
  // per 16-byte chunk (the packing launches ran at ~40% of the copy bandwidth in an 8K prefill).
  constexpr int kChunks = ROWS * 16 / kPackThreads;  // 16-byte chunks per thread
  static_assert(kChunks * kPackThreads == ROWS * 16);
  uint4 v[kChunks];
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int i = threadIdx.x + j * kPackThreads, r = i / 16, ch = i % 16;
    v[j] = src_row[r] >= 0 ? *reinterpret_cast<const uint4*>(A + static_cast<int64_t>(src_row[r]) * lda + ch * 8)
                           : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int i = threadIdx.x + j * kPackThreads, r = i / 16, ch = i % 16;
    const uint32_t words[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
    for (int q = 0; q < 4; ++q)
      *reinterpret_cast<uint32_t*>(block + packed_offset(r, ch * 8 + 2 * q, run_elems(F), ROWS)) = words[q];
  }
  __syncthreads();
  uint4* out = reinterpret_cast<uint4*>(op.out + blk * kBlockBytes);
  for (int o = threadIdx.x; o < kBlockBytes / 16; o += kPackThreads) out[o] = reinterpret_cast<const uint4*>(block)[o];
}

// A 16-byte weight run (scale code `code`) decoded into a packed block: dst = packed_offset of its
// first element; its quads are a step apart, each quad's second pair 128 bytes on (packed_plan.h).
template <WeightFmt F>
__device__ __forceinline__ void store_packed_run(unsigned char* dst, const uint4& raw, uint8_t code) {
#pragma unroll
  for (int q = 0; q < run_elems(F) / 4; ++q) {
    uint32_t b0, b1;
    decode_quad<F>(raw, code, q, b0, b1);
    *reinterpret_cast<uint32_t*>(dst + q * kPackStepBytes) = b0;
    *reinterpret_cast<uint32_t*>(dst + q * kPackStepBytes + 128) = b1;
  }
}

// One block per CTA, as pack_a_kernel: weight rows group x N + tile x 128 .. of K tile kt. Each
// thread decodes whole 16-byte runs (every step of its window's pairs) into the block staged in
// shared memory, which is then copied out whole.
template <WeightFmt F>
__global__ void __launch_bounds__(kPackThreads) pack_w_kernel(PackedOperand op, WeightDesc w) {
  pdl_prologue();
  __shared__ __align__(16) unsigned char block[kPackBlockBytes];
  constexpr int L = run_elems(F), SPW = L / 4, RUNS = kGemmBK / L;  // runs per tile row
  const int64_t blk = blockIdx.x, kt = blk % op.k_tiles, gt = blk / op.k_tiles;
  const int64_t group = gt / op.tiles, row0 = (gt % op.tiles) * kPackRows;
  const int64_t k0 = kt * kGemmBK;
  for (int i = threadIdx.x; i < kPackRows * RUNS; i += kPackThreads) {
    const int r = i / RUNS, u = i % RUNS;  // run u covers tile-local k u L .. u L + L - 1
    // Elements 4q .. 4q + 3 of the run: pairs (4q, 4q + 1) and (4q + 2, 4q + 3), one step apart
    // in q (packed_offset: step stride kPackStepBytes, the second pair 128 bytes on).
    unsigned char* dst = block + packed_offset(r, u * L, L);
    if (row0 + r >= op.rows) {
#pragma unroll
      for (int q = 0; q < SPW; ++q) {
        *reinterpret_cast<uint32_t*>(dst + q * kPackStepBytes) = 0;
        *reinterpret_cast<uint32_t*>(dst + q * kPackStepBytes + 128) = 0;
      }
      continue;
    }
    const int64_t n = group * op.rows + row0 + r;
    const uint4 raw = *reinterpret_cast<const uint4*>(w.w + n * w.row_bytes + (k0 + u * L) * 16 / L);
    const uint8_t code = F == WeightFmt::kFp8Block   ? fp8_scale_code(w, n, k0 + u * L)
                         : F == WeightFmt::kFp4Block ? fp4_scale_code(w, n, k0 + u * L)
                                                     : 0;
    store_packed_run<F>(dst, raw, code);
  }
  __syncthreads();
  uint4* out = reinterpret_cast<uint4*>(op.out + blk * kPackBlockBytes);
  for (int o = threadIdx.x; o < kPackBlockBytes / 16; o += kPackThreads) out[o] = reinterpret_cast<const uint4*>(block)[o];
}

struct PackedGemmArgs {
  const uint8_t* a = nullptr;  // pack_a_kernel's blocks
  const uint8_t* w = nullptr;  // pack_w_kernel's blocks
  int64_t M = 0, N = 0, K = 0;
  int64_t m_tiles = 0, n_tiles = 0, k_tiles = 0;
  int groups = 1;
  void* C = nullptr;           // row m, group g, column n at m ldc + g N + n
  int64_t ldc = 0;
  bool c_bf16 = false;
  bool c_pairs = false;        // ldc and N even: two adjacent outputs in one store
};

// Output tile t of a launch (groups x m_tiles x n_tiles of them): m tiles rastered in groups of
// kPackedGroupM, so the CTAs working at one time share A and W blocks in L2.
struct PackedTile {
  int64_t group, mt, nt;
};
__device__ __forceinline__ PackedTile packed_tile(const PackedGemmArgs& p, int64_t t) {
  const int64_t per_weight = p.m_tiles * p.n_tiles, id = t % per_weight;
  const int64_t per_group = kPackedGroupM * p.n_tiles;
  const int64_t first_m = (id / per_group) * kPackedGroupM;
  const int64_t gm = min64(p.m_tiles - first_m, kPackedGroupM);
  return {t / per_weight, first_m + (id % per_group) % gm, (id % per_group) / gm};
}

// The canonical fold at the end of a K sub-range (gemm_common.cuh) for a wgmma accumulator: waits
// for the issued MMAs, adds the finished sub-range's sums into `total` and restarts `acc` at zero.
template <int R>
__device__ __forceinline__ void wgmma_fold_subrange(float (&acc)[R], float (&total)[R]) {
  wgmma_wait<0>();
  wgmma_fence_operands(acc);
#pragma unroll
  for (int e = 0; e < R; ++e) total[e] += acc[e], acc[e] = 0.0f;
}

// The consumers' part of one output tile (both packed kernels): its KT K tiles from stage use `it`
// on — wait for the stage, issue its 8 wgmma (A rows 64 wg .. 64 wg + 63, row groups 8 wg ..),
// release the previous stage once its MMAs are done — folding each canonical K sub-range into
// `total`. Returns with the MMAs settled and the tile's last stage released; the tile's sums are
// total + acc (that F32 add is the last fold).
__device__ __forceinline__ void packed_consume_tile(const unsigned char* smem, uint64_t* full, uint64_t* empty,
                                                    int KT, int tiles_per_sub, int wg, int lane, int& it,
                                                    float (&acc)[64], float (&total)[64]) {
#pragma unroll
  for (int e = 0; e < 64; ++e) acc[e] = 0.0f, total[e] = 0.0f;
  for (int i = 0, in_sub = 0; i < KT; ++i, ++it, ++in_sub) {
    const int s = it % kPackedStages;
    if (in_sub == tiles_per_sub) {  // a sub-range ends: fold it (canonical order; no division)
      in_sub = 0;
      wgmma_fold_subrange(acc, total);
    }
    mbar_wait(&full[s], (it / kPackedStages) & 1);
    const unsigned char* stage = smem + s * 2 * kPackBlockBytes;
    const uint64_t a_desc = wgmma_desc(stage + wg * 8 * 256, 128, 256);
    const uint64_t w_desc = wgmma_desc(stage + kPackBlockBytes, 128, 256);
    wgmma_fence_operands(acc);
    wgmma_fence();
#pragma unroll
    for (int step = 0; step < kGemmBK / 16; ++step) {
      const uint64_t off = (step * kPackStepBytes) >> 4;
      wgmma_m64n128k16_ss(acc, a_desc + off, w_desc + off);
    }
    wgmma_commit();
    wgmma_wait<1>();  // the previous K tile's MMAs are done: its stage may be refilled
    if (i > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % kPackedStages]);
  }
  wgmma_wait<0>();
  wgmma_fence_operands(acc);
  if (lane == 0) mbar_arrive(&empty[(it - 1) % kPackedStages]);  // the tile's last stage
}

// Outputs v0, v1 of columns n, n + 1 of one row at C[idx] (both: n + 1 is inside the matrix), in
// one store when pairs are aligned (c_pairs).
__device__ __forceinline__ void packed_store_pair(void* C, bool c_bf16, bool c_pairs, int64_t idx, float v0, float v1,
                                                  bool both) {
  if (c_pairs && both) {
    if (c_bf16) {
      *reinterpret_cast<uint32_t*>(static_cast<__nv_bfloat16*>(C) + idx) = pack_bf16(v0, v1);
    } else {
      *reinterpret_cast<float2*>(static_cast<float*>(C) + idx) = make_float2(v0, v1);
    }
  } else {
    store_out(C, c_bf16, idx, v0);
    if (both) store_out(C, c_bf16, idx + 1, v1);
  }
}

// Persistent: each CTA walks output tiles t = blockIdx.x, + gridDim.x, ... The producer's ring of
// stages runs on across tiles, so the next tile's first blocks load while the consumers store the
// previous one (short-K launches are mostly prologue and epilogue otherwise).
__global__ void __launch_bounds__(kPackedThreads, 1) packed_gemm_kernel(PackedGemmArgs p) {
  pdl_prologue();
  extern __shared__ __align__(1024) unsigned char pk_smem[];  // [stage][A block, W block]
  __shared__ __align__(8) uint64_t full[kPackedStages], empty[kPackedStages];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t tiles = p.groups * p.m_tiles * p.n_tiles;
  const int KT = static_cast<int>(p.k_tiles);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kPackedStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 8);  // lane 0 of each consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warp == 8) {  // producer: one thread issues the bulk copies of every K tile
    if (lane == 0) {
      int it = 0;  // stage uses so far (stage it % kPackedStages, phase it / kPackedStages)
      for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        const PackedTile tile = packed_tile(p, t);
        const uint8_t* a = p.a + ((tile.group * p.m_tiles + tile.mt) * p.k_tiles) * kPackBlockBytes;
        const uint8_t* w = p.w + ((tile.group * p.n_tiles + tile.nt) * p.k_tiles) * kPackBlockBytes;
        for (int i = 0; i < KT; ++i, ++it) {
          const int s = it % kPackedStages;
          if (it >= kPackedStages) mbar_wait(&empty[s], ((it / kPackedStages) - 1) & 1);
          unsigned char* dst = pk_smem + s * 2 * kPackBlockBytes;
          mbar_arrive_expect_tx(&full[s], 2 * kPackBlockBytes);
          bulk_copy_g2s(dst, a + static_cast<int64_t>(i) * kPackBlockBytes, kPackBlockBytes, &full[s]);
          bulk_copy_g2s(dst + kPackBlockBytes, w + static_cast<int64_t>(i) * kPackBlockBytes, kPackBlockBytes,
                        &full[s]);
        }
      }
    }
    return;
  }

  // Consumers: warpgroup wg takes rows 64 wg .. 64 wg + 63 of the tile.
  const int wg = warp / 4, g = lane >> 2, c = lane & 3;
  const int tiles_per_sub = static_cast<int>(gemm_subrange(p.K) / kGemmBK);
  int it = 0;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const PackedTile tile = packed_tile(p, t);
    float acc[64], total[64];
    packed_consume_tile(pk_smem, full, empty, KT, tiles_per_sub, wg, lane, it, acc, total);
    const int wm = wg * 64 + (warp % 4) * 16;
#pragma unroll
    for (int e = 0; e < 64; e += 2) {  // (e, e + 1): columns n, n + 1 of one row
      const int64_t m = tile.mt * kPackRows + wm + g + ((e & 2) ? 8 : 0);
      const int64_t n = tile.nt * kPackRows + (e >> 2) * 8 + 2 * c;
      if (m >= p.M || n >= p.N) continue;
      packed_store_pair(p.C, p.c_bf16, p.c_pairs, m * p.ldc + tile.group * p.N + n, total[e] + acc[e],
                        total[e + 1] + acc[e + 1], n + 1 < p.N);
    }
  }
}

}  // namespace deepinfer::kernels
