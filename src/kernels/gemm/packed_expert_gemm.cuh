// The packed large-M GEMM for MoE expert launches (prefill): the activations are packed per
// (expert, 128-row tile) through the routing permutation (pack_a_kernel<F, true>, tile table from
// expert_tile_table_kernel), but the weights — all experts, too many to dequantise up front — are
// dequantised inside the GEMM: a producer warpgroup turns each K tile of an expert's raw FP4 / FP8
// rows into the packed BF16 block in shared memory (decode_quad, the decoder of every GEMM kernel:
// the same bits) while the two consumer warpgroups run the previous tiles' wgmma. Same canonical
// summation as every GEMM kernel (packed_gemm.cuh), so batch invariance holds.
#pragma once

#include "kernels/gemm/packed_gemm.cuh"

namespace deepinfer::kernels {

// Threads of the expert kernel: 2 consumer warpgroups and 1 or 2 producer warpgroups.
__host__ __device__ constexpr int packed_expert_threads(int producers) { return (2 + producers) * 128; }

// One block: the (expert, 128-row tile) table of an expert launch, in expert order (as
// gemm_tile_rows enumerates them), -1 past the last tile. E <= 1024.
__global__ void __launch_bounds__(1024) expert_tile_table_kernel(const int32_t* offsets, int E, int64_t y_tiles,
                                                                 int32_t* table) {
  pdl_prologue();
  __shared__ int32_t scan[1024];
  const int e = threadIdx.x;
  const int32_t rows = e < E ? offsets[e + 1] - offsets[e] : 0;
  const int32_t n = (rows + kPackRows - 1) / kPackRows;
  scan[e] = n;
  __syncthreads();
  for (int off = 1; off < 1024; off <<= 1) {  // inclusive scan of the tile counts
    const int32_t v = e >= off ? scan[e - off] : 0;
    __syncthreads();
    scan[e] += v;
    __syncthreads();
  }
  const int32_t first = scan[e] - n, total = scan[1023];
  int32_t* t_expert = table;
  int32_t* t_begin = table + y_tiles;
  int32_t* t_rows = table + 2 * y_tiles;
  for (int32_t j = 0; j < n; ++j) {
    t_expert[first + j] = e;
    t_begin[first + j] = offsets[e] + j * kPackRows;
    t_rows[first + j] = min(kPackRows, rows - j * kPackRows);
  }
  for (int64_t y = total + e; y < y_tiles; y += 1024) t_expert[y] = -1, t_begin[y] = 0, t_rows[y] = 0;
}

struct PackedExpertArgs {
  const uint8_t* a = nullptr;        // pack_a_kernel<F, true>'s blocks [y][k tile]
  const int32_t* table = nullptr;    // expert_tile_table_kernel's
  const WeightDesc* experts = nullptr;  // this set's E weights
  const int32_t* perm = nullptr;     // C row of pair i = perm[i]
  int64_t y_tiles = 0, n_tiles = 0, k_tiles = 0;
  int64_t N = 0, K = 0;
  void* C = nullptr;
  int64_t ldc = 0;
  bool c_bf16 = false;
  bool c_pairs = false;  // ldc and N even, C aligned: two adjacent outputs in one store
};

// Persistent CTAs over tiles t = (y, n tile), n tiles fastest (CTAs working at one time share A
// blocks, and an expert's m tiles are neighbours in y, so its weights are read about once).
// PRODUCERS = 2: two producer warpgroups fill alternate stage uses (twice the decode issue slots
// and loads in flight), with registers moved to the consumers (setmaxnreg: 512 threads launch at
// 128 each; producers keep 112, consumers take 144: ptxas fits both regions without spills).
template <WeightFmt F, int PRODUCERS>
__global__ void __launch_bounds__(packed_expert_threads(PRODUCERS), 1) packed_expert_gemm_kernel(PackedExpertArgs p) {
  static_assert(PRODUCERS == 1 || PRODUCERS == 2);
  pdl_prologue();
  extern __shared__ __align__(1024) unsigned char pe_smem[];  // [stage][A block, W block]
  __shared__ __align__(8) uint64_t full[kPackedStages], empty[kPackedStages];
  constexpr int L = run_elems(F), WIN = kGemmBK / (4 * L);  // windows per K tile
  constexpr int TASKS = 16 * WIN / 4;  // (8-row group, window) tasks per producer warp per K tile
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int64_t tiles = p.y_tiles * p.n_tiles;
  const int KT = static_cast<int>(p.k_tiles);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kPackedStages; ++s) {
      mbar_init(&full[s], 1 + 128);  // the A copy's arrival + every producer thread's W part
      mbar_init(&empty[s], 8);       // lane 0 of each consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warp >= 8) {  // producer warpgroup(s)
    if constexpr (PRODUCERS == 2) warpgroup_regs_dec<112>();
    const int pwg = (warp - 8) / 4, pw = (warp - 8) % 4;
    int it = 0;  // stage uses of all producers so far; this warpgroup fills those = pwg mod PRODUCERS
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int64_t y = t / p.n_tiles, nt = t % p.n_tiles;
      const int32_t expert = p.table[y];
      if (expert < 0) continue;
      const WeightDesc w = p.experts[expert];
      const uint8_t* a = p.a + y * p.k_tiles * kPackBlockBytes;
      // Task ti: rows 8 (pw + 4 (ti / WIN)) + g, run c of window ti % WIN (lane (g, c): the 32
      // lanes' stores of a step cover 32 distinct banks). Rows past N decode zero runs.
      auto load = [&](int i, uint4 (&raw)[TASKS], uint8_t (&code)[TASKS]) {
#pragma unroll
        for (int ti = 0; ti < TASKS; ++ti) {
          const int r = 8 * (pw + 4 * (ti / WIN)) + g, u = (ti % WIN) * 4 + c;
          const int64_t n = nt * kPackRows + r, k = static_cast<int64_t>(i) * kGemmBK + u * L;
          const bool ok = n < p.N;
          raw[ti] = ok ? *reinterpret_cast<const uint4*>(w.w + n * w.row_bytes + k * 16 / L) : make_uint4(0, 0, 0, 0);
          code[ti] = !ok ? 127 : F == WeightFmt::kFp8Block ? fp8_scale_code(w, n, k) : fp4_scale_code(w, n, k);
        }
      };
      // One register set for this K tile, one for the next (loaded while this one is decoded).
      // Measured on the H200: this form +2% at an 8K prefill against the dequantising kernel; a
      // two-tile ping-pong of the sets (no register moves) was 10% slower.
      uint4 raw[TASKS], next_raw[TASKS];
      uint8_t code[TASKS], next_code[TASKS];
      const int first = ((pwg - it) % PRODUCERS + PRODUCERS) % PRODUCERS;  // this warpgroup's first K tile
      const int it0 = it;
      it += KT;
      if (first < KT) load(first, raw, code);
      for (int i = first; i < KT; i += PRODUCERS) {
        if (i + PRODUCERS < KT) load(i + PRODUCERS, next_raw, next_code);
        const int use = it0 + i, s = use % kPackedStages;
        if (use >= kPackedStages) mbar_wait(&empty[s], ((use / kPackedStages) - 1) & 1);
        unsigned char* stage = pe_smem + s * 2 * kPackBlockBytes;
        if (pw == 0 && lane == 0) {
          mbar_arrive_expect_tx(&full[s], kPackBlockBytes);
          bulk_copy_g2s(stage, a + static_cast<int64_t>(i) * kPackBlockBytes, kPackBlockBytes, &full[s]);
        }
        unsigned char* wb = stage + kPackBlockBytes;
#pragma unroll
        for (int ti = 0; ti < TASKS; ++ti) {
          const int r = 8 * (pw + 4 * (ti / WIN)) + g, u = (ti % WIN) * 4 + c;
          store_packed_run<F>(wb + packed_offset(r, u * L, L), raw[ti], code[ti]);
        }
        fence_proxy_async();  // the W block is read by wgmma (async proxy)
        mbar_arrive(&full[s]);
#pragma unroll
        for (int ti = 0; ti < TASKS; ++ti) raw[ti] = next_raw[ti], code[ti] = next_code[ti];
      }
    }
    return;
  }

  // Consumers: as packed_gemm_kernel, the rows through the routing permutation.
  if constexpr (PRODUCERS == 2) warpgroup_regs_inc<144>();
  const int wg = warp / 4;
  const int tiles_per_sub = static_cast<int>(gemm_subrange(p.K) / kGemmBK);
  int it = 0;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t y = t / p.n_tiles, nt = t % p.n_tiles;
    if (p.table[y] < 0) continue;
    float acc[64], total[64];
    packed_consume_tile(pe_smem, full, empty, KT, tiles_per_sub, wg, lane, it, acc, total);
    const int32_t begin = p.table[p.y_tiles + y], count = p.table[2 * p.y_tiles + y];
    const int wm = wg * 64 + (warp % 4) * 16;
#pragma unroll
    for (int e = 0; e < 64; e += 2) {  // (e, e + 1): columns n, n + 1 of one row
      const int r = wm + g + ((e & 2) ? 8 : 0);
      const int64_t n = nt * kPackRows + (e >> 2) * 8 + 2 * c;
      if (r >= count || n >= p.N) continue;
      packed_store_pair(p.C, p.c_bf16, p.c_pairs, static_cast<int64_t>(p.perm[begin + r]) * p.ldc + n,
                        total[e] + acc[e], total[e + 1] + acc[e + 1], n + 1 < p.N);
    }
  }
}

}  // namespace deepinfer::kernels
