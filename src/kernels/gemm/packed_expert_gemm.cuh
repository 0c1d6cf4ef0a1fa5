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

// One block: the (expert, tile of `tile_rows` pairs) table of an expert launch, in expert order
// (as gemm_tile_rows enumerates them), -1 past the last tile. E <= 1024.
__global__ void __launch_bounds__(1024) expert_tile_table_kernel(const int32_t* offsets, int E, int64_t y_tiles,
                                                                 int tile_rows, int32_t* table) {
  pdl_prologue();
  __shared__ int32_t scan[1024];
  const int e = threadIdx.x;
  const int32_t rows = e < E ? offsets[e + 1] - offsets[e] : 0;
  const int32_t n = (rows + tile_rows - 1) / tile_rows;
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
    t_begin[first + j] = offsets[e] + j * tile_rows;
    t_rows[first + j] = min(tile_rows, rows - j * tile_rows);
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
  bool trim = true;      // swapped kernel: a token tile moves and multiplies only its tokens' rows
  int split = 1;         // FP8-order expert kernel's split form: CTAs (K sub-ranges) per tile, else 1
};

// The raw side of the producers: each producer warpgroup streams the FP4 runs and UE8M0 code
// words of its coming K tiles into a ring of kExpertRawSlots / PRODUCERS slots with cp.async, so
// the loads are in flight several K tiles ahead without holding registers (a register look-ahead
// of one tile left the producers waiting on global memory: tuning record, session 13). Producer
// thread i of a warpgroup owns row i of the 128-row tile: its K tile is 64 contiguous bytes (four
// 32-element runs) and one 4-byte code word. A slot: [run][thread] 16-byte runs, then [thread]
// the code words — each thread reads back only what it copied.
inline constexpr int kExpertRawRunBytes = 4 * 128 * 16;                        // 4 runs x 128 threads
inline constexpr int kExpertRawSlotBytes = kExpertRawRunBytes + kPackRows * 4;  // + 128 code words
inline constexpr int kExpertRawSlots = 4;
inline constexpr size_t kPackedExpertSmem = kPackedSmem + size_t{kExpertRawSlots} * kExpertRawSlotBytes;
// + 1 KB: the static barriers, padded to the dynamic array's 1024-byte alignment.
static_assert(kPackedExpertSmem + 1024 <= 227 * 1024, "the expert kernel's shared memory exceeds an H100/H200 block's");

// One producer warpgroup's walk over its stage uses: use u (0, 1, ... over the CTA's valid output
// tiles x K tiles, in the consumers' order) goes to warpgroup u % PRODUCERS. The valid tiles are a
// prefix of the CTA's tiles (the expert table ends in -1 entries).
struct ExpertUseCursor {
  int64_t t = 0;  // output tile
  int i = 0;      // K tile
  int u = 0;      // stage use
  __device__ void advance(int step, int KT) {
    u += step, i += step;
    while (i >= KT) i -= KT, t += gridDim.x;
  }
};

// Issues the cp.async copies of use `c` into `slot` for row `row` of the tile (this thread's) and
// commits them as one group — an empty group past the last use, so every thread's group count
// stays in step with its uses. Rows past N copy zeros (code word 0, runs 0: they decode to +0, as
// the direct decode of zero runs with any code).
__device__ __forceinline__ void expert_raw_issue(const PackedExpertArgs& p, const ExpertUseCursor& c, unsigned char* slot,
                                                 int row, int64_t& desc_t, WeightDesc& w) {
  const int64_t tiles = p.y_tiles * p.n_tiles;
  if (c.t < tiles) {
    if (c.t != desc_t) {  // a new output tile: its expert's weight (cached for the tile's K tiles)
      desc_t = c.t;
      const int32_t expert = p.table[c.t / p.n_tiles];
      w = expert >= 0 ? p.experts[expert] : WeightDesc{};
    }
    if (w.w != nullptr) {
      const int64_t n = (c.t % p.n_tiles) * kPackRows + row, k = static_cast<int64_t>(c.i) * kGemmBK;
      const bool ok = n < p.N;
      const uint8_t* src = w.w + (ok ? n : 0) * w.row_bytes + k / 2;
#pragma unroll
      for (int r = 0; r < 4; ++r) cp_async16(slot + (r * 128 + row) * 16, src + 16 * r, ok);
      const uint8_t* code = w.scale + (ok ? n : 0) * w.scale_cols + k / 32;
      uint32_t* dst = reinterpret_cast<uint32_t*>(slot + kExpertRawRunBytes + row * 4);
      if (!ok) {
        *dst = 0;
      } else if ((reinterpret_cast<uintptr_t>(code) & 3) == 0) {
        cp_async4(dst, code);
      } else {  // an unaligned scale tensor: a plain (waiting) load, same bytes
        *dst = code[0] | (uint32_t{code[1]} << 8) | (uint32_t{code[2]} << 16) | (uint32_t{code[3]} << 24);
      }
    }
  }
  cp_async_commit();
}

// Persistent CTAs over tiles t = (y, n tile), n tiles fastest (CTAs working at one time share A
// blocks, and an expert's m tiles are neighbours in y, so its weights are read about once).
// PRODUCERS = 2: two producer warpgroups fill alternate stage uses (twice the decode issue slots),
// with registers moved to the consumers (setmaxnreg: 512 threads launch at 128 each; producers
// keep 112, consumers take 144: ptxas fits both regions without spills).
template <WeightFmt F, int PRODUCERS>
__global__ void __launch_bounds__(packed_expert_threads(PRODUCERS), 1) packed_expert_gemm_kernel(PackedExpertArgs p) {
  static_assert(PRODUCERS == 1 || PRODUCERS == 2);
  static_assert(F == WeightFmt::kFp4Block, "the raw ring's slots hold FP4 K tiles (4 runs per thread)");
  static_assert(kGemmBK == 4 * run_elems(F) && kPackRows == 128);
  pdl_prologue();
  extern __shared__ __align__(1024) unsigned char pe_smem[];  // [stage][A block, W block], raw slots
  __shared__ __align__(8) uint64_t full[kPackedStages], empty[kPackedStages];
  constexpr int L = run_elems(F);
  constexpr int SLOTS = kExpertRawSlots / PRODUCERS;  // raw slots per producer warpgroup
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
    const int pwg = (warp - 8) / 4, row = threadIdx.x - 256 - 128 * pwg;  // this thread's tile row
    unsigned char* ring = pe_smem + kPackedSmem + pwg * SLOTS * kExpertRawSlotBytes;
    ExpertUseCursor use{blockIdx.x, 0, 0}, load{blockIdx.x, 0, 0};
    use.advance(pwg, KT), load.advance(pwg, KT);
    int64_t desc_t = -1, use_t = -1;
    WeightDesc w{};
    bool use_valid = false;
    for (int j = 0; j < SLOTS; ++j, load.advance(PRODUCERS, KT))
      expert_raw_issue(p, load, ring + j * kExpertRawSlotBytes, row, desc_t, w);
    const uint8_t* a = nullptr;
    for (int j = 0;; ++j, use.advance(PRODUCERS, KT)) {
      if (use.t != use_t) {  // a new output tile: stop past the CTA's last valid one
        use_t = use.t;
        const int64_t y = use.t / p.n_tiles;
        use_valid = use.t < tiles && p.table[y] >= 0;
        if (use_valid) a = p.a + y * p.k_tiles * kPackBlockBytes;
      }
      if (!use_valid) break;
      // This use's runs and codes: its group is the oldest of the SLOTS in flight.
      unsigned char* slot = ring + (j % SLOTS) * kExpertRawSlotBytes;
      cp_async_wait<SLOTS - 1>();
      uint4 raw[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) raw[r] = *reinterpret_cast<const uint4*>(slot + (r * 128 + row) * 16);
      const uint32_t codes = *reinterpret_cast<const uint32_t*>(slot + kExpertRawRunBytes + row * 4);
      __syncwarp();  // the slot is read (registers) before its refill is issued
      expert_raw_issue(p, load, slot, row, desc_t, w);
      load.advance(PRODUCERS, KT);

      const int s = use.u % kPackedStages;
      if (use.u >= kPackedStages) mbar_wait(&empty[s], ((use.u / kPackedStages) - 1) & 1);
      unsigned char* stage = pe_smem + s * 2 * kPackBlockBytes;
      if (row == 0) {
        mbar_arrive_expect_tx(&full[s], kPackBlockBytes);
        bulk_copy_g2s(stage, a + static_cast<int64_t>(use.i) * kPackBlockBytes, kPackBlockBytes, &full[s]);
      }
      // Elements 4q .. 4q + 3 of the four runs (k = 32 r + 4q + e) go to step q of the block
      // (packed_offset): the pairs e = 0, 1 of runs 0-3 are one 16-byte core-matrix row, the
      // pairs e = 2, 3 the row 128 bytes on — two 16-byte stores per step (rows of a quarter warp
      // fill one 128-byte core matrix: no bank conflicts).
      unsigned char* wrow = stage + kPackBlockBytes + (row / 8) * 256 + (row % 8) * 16;
#pragma unroll
      for (int q = 0; q < L / 4; ++q) {
        uint32_t b0[4], b1[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) decode_quad<F>(raw[r], static_cast<uint8_t>(codes >> (8 * r)), q, b0[r], b1[r]);
        *reinterpret_cast<uint4*>(wrow + q * kPackStepBytes) = make_uint4(b0[0], b0[1], b0[2], b0[3]);
        *reinterpret_cast<uint4*>(wrow + q * kPackStepBytes + 128) = make_uint4(b1[0], b1[1], b1[2], b1[3]);
      }
      fence_proxy_async();  // the W block is read by wgmma (async proxy)
      mbar_arrive(&full[s]);
    }
    cp_async_wait<0>();  // no copy outlives the CTA
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
