// Block-scaled GEMM C = A W^T for M > 32 rows on Hopper warpgroup MMA (wgmma): the throughput
// kernel of prefill and large decode batches. Same canonical summation order as every other
// GEMM kernel (gemm_common.cuh) — a wgmma k16 step rounds exactly like the mma.sync step it
// replaces (wgmma_utils.cuh) — so the backend stays bitwise batch invariant.
//
// CTA tile 128 x 128 x kGemmBK (= 128): two warpgroups, each 64 rows x 128 columns, one
// wgmma.m64n128k16 per canonical step (8 per K tile). Per K tile i:
//   * cp.async has brought A tile i (BF16, swizzled as in the pipelined kernel) and the raw
//     weight tile i (16-byte runs, any format) into buffer i & 1; tile i + 1 is in flight;
//   * each warp loads its A fragments of the tile's 8 steps into registers (one LDS.128 per two
//     steps: the canonical k permutation is a register-fragment layout, which wgmma accepts for
//     A), then issues the 8 wgmma on the dequantised B tile i, asynchronously;
//   * while the tensor cores run, all warps wait for tile i + 1, issue the copies of tile i + 2
//     into the buffers tile i freed, and dequantise weight tile i + 1 (the decoder every GEMM
//     kernel shares) into the other B buffer, already in the permuted canonical order: quad
//     (c, j) of a run gives the pair words of logical k 2c, 2c + 1 and 2c + 8, 2c + 9 of step j —
//     byte 4c of the two core matrices of that step (B is K-major, no swizzle: core matrix =
//     8 weight rows x 8 logical k, 128 contiguous bytes) — then a proxy fence (wgmma reads
//     shared memory through the async proxy) and the wait for the MMAs.
// Measured limits and the variants tried: bench/results/cuda_gemm_tuning_h200_2026-12-01.json.
// Sub-ranges of the canonical order end on K-tile boundaries: the fold (or the split-K partial
// store) happens between tiles, with the accumulators settled.
#pragma once

#include "kernels/common/wgmma_utils.cuh"
#include "kernels/gemm/dequant_gemm_pipelined.cuh"

namespace deepinfer::kernels {

inline constexpr int kWgmmaWarps = 8;

// Raw weight bytes per tile row (every format goes through the raw buffer: BF16 is permuted too).
__host__ __device__ constexpr int wgmma_raw_row_bytes(WeightFmt f) {
  return f == WeightFmt::kBF16 ? 2 * kGemmBK : (f == WeightFmt::kFp8Block ? kGemmBK : kGemmBK / 2);
}
// Dynamic shared memory: A [2][BM][BK] BF16, B [2][BK / 16 steps][BN][16] BF16, raw [2][BN][raw row].
__host__ __device__ constexpr size_t wgmma_smem_bytes(WeightFmt f) {
  return static_cast<size_t>(2) * kPipeBM * kGemmBK * 2 + static_cast<size_t>(2) * kPipeBN * kGemmBK * 2 +
         static_cast<size_t>(2) * kPipeBN * wgmma_raw_row_bytes(f);
}

template <WeightFmt F>
__global__ void __launch_bounds__(kWgmmaWarps * 32, 1) dequant_gemm_wgmma_kernel(GemmParams p, int m_tiles, int spc) {
  pdl_prologue();
  constexpr int BM = kPipeBM, BN = kPipeBN, BK = kGemmBK, L = run_elems(F);
  constexpr int RAW = wgmma_raw_row_bytes(F), RUNS = RAW / 16;  // runs per raw row: 16, 8, 4
  constexpr int STEPS = BK / 16, SPW = L / 4;                  // k16 steps per tile / per window
  constexpr int STEP_BYTES = BN * 32, B_BYTES = STEPS * STEP_BYTES;
  extern __shared__ __align__(128) unsigned char wg_smem[];
  uint4* sA = reinterpret_cast<uint4*>(wg_smem);                     // [2][BM][16] chunks
  unsigned char* sB = wg_smem + 2 * BM * BK * 2;                     // [2][STEPS][BN / 8][2][8][16 B]
  const uint4* sR = reinterpret_cast<const uint4*>(sB + 2 * B_BYTES);  // [2][BN][RUNS]
  __shared__ int32_t a_row[BM], c_row[BM];
  __shared__ int32_t s_scale_row[BN];  // offset of each weight row's scale codes

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * BN;
  const TileRows tile = gemm_tile_rows<BM>(p, m_tiles, static_cast<int>(blockIdx.y), a_row, c_row);
  if (tile.m_count <= 0) return;
  const int64_t m_count = tile.m_count;
  const WeightDesc& w = tile.w;
  const bool experts = p.experts != nullptr;
  const int64_t a_col0 = experts ? 0 : static_cast<int64_t>(tile.group) * p.K;
  const int64_t w_row0 = experts ? 0 : static_cast<int64_t>(tile.group) * p.N;
  const int in_shift = F == WeightFmt::kFp4Block ? 5 : (F == WeightFmt::kFp8Block ? __ffs(w.block_in) - 1 : 0);
  for (int r = threadIdx.x; r < BN; r += blockDim.x) {
    const int64_t n = w_row0 + n0 + r;
    s_scale_row[r] = F == WeightFmt::kFp8Block   ? static_cast<int32_t>((n / w.block_out) * w.scale_cols)
                     : F == WeightFmt::kFp4Block ? static_cast<int32_t>(n * w.scale_cols)
                                                 : 0;
  }
  // (s_scale_row is first read after the prologue's barrier.)

  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
  const int64_t R = gemm_subrange(p.K);
  const KTiles kt = k_tiles_of(p, spc);
  const bool split = kt.split;
  const int k_begin = kt.begin, k_end = kt.end;
  const int tiles_per_sub = static_cast<int>(R / BK);  // R is a multiple of BK

  // Raw runs of a row: XOR-swizzled (rows >= 8 runs) so the quarter-warp reads of rows g, g + 1
  // hit distinct banks.
  auto raw_chunk = [](int r, int u) { return RUNS >= 8 ? u ^ ((r & 1) << 2) : u; };
  // Copy assignment, fixed for the whole K loop (the hot loop only adds the tile's k offset):
  // A: chunk tid % 16 of rows tid / 16 + 16 it; raw: run tid % RUNS of rows tid / RUNS + RSTEP it.
  // Row parity is the same for every it, so each thread's swizzled chunk is a constant.
  constexpr int THREADS = kWgmmaWarps * 32, A_ITS = BM * 16 / THREADS, RSTEP = THREADS / RUNS;
  constexpr int R_ITS = BN * RUNS / THREADS;
  const int a_ch = threadIdx.x & 15, a_r0 = threadIdx.x >> 4;
  const int a_dst = a_r0 * 16 + pipe_swizzle<F>(a_r0, a_ch);
  const int r_u = threadIdx.x % RUNS, r_r0 = threadIdx.x / RUNS;
  const int r_dst = r_r0 * RUNS + raw_chunk(r_r0, r_u);
  const int rows_valid = static_cast<int>(min64(BN, p.N - n0)), m_rows = static_cast<int>(m_count);
  const uint8_t* r_src = w.w + (w_row0 + n0 + r_r0) * w.row_bytes + r_u * 16;
  // A row sources, once per CTA (absent rows point at A itself and copy zeros).
  __shared__ const __nv_bfloat16* s_a_src[BM];
  for (int r = threadIdx.x; r < BM; r += blockDim.x)
    s_a_src[r] = A + (r < m_count ? static_cast<int64_t>(a_row[r]) * p.lda + a_col0 : 0);
  // (s_a_src is first read after the barrier below.)
  // Issues the copies of K tile i into buffers i & 1 (zeros past m_count and N).
  auto load_tile = [&](int i) {
    const int b = i & 1;
    const int64_t k0 = static_cast<int64_t>(i) * BK;
#pragma unroll
    for (int it = 0; it < A_ITS; ++it) {
      const bool ok = a_r0 + 16 * it < m_rows;
      cp_async16(sA + b * BM * 16 + a_dst + 256 * it, s_a_src[a_r0 + 16 * it] + (ok ? k0 + a_ch * 8 : 0), ok);
    }
    const uint8_t* src = r_src + k0 * RAW / BK;
#pragma unroll
    for (int it = 0; it < R_ITS; ++it) {
      const bool ok = r_r0 + RSTEP * it < rows_valid;
      cp_async16(const_cast<uint4*>(sR) + b * BN * RUNS + r_dst + RSTEP * RUNS * it,
                 ok ? src + static_cast<int64_t>(RSTEP * it) * w.row_bytes : w.w, ok);
    }
    cp_async_commit();
  };
  // Raw tile i (buffer i & 1) as BF16 into B buffer i & 1, in the canonical step order. A warp
  // takes (8 rows, one window) per task: lane (g, c) = row g, run c, so the 32 lanes' 4-byte
  // stores to a core-matrix pair cover 32 distinct banks. Rows past N hold zero runs (the copy
  // zero-fills them) and decode to zeros, so no lane branches; the scale codes are all fetched
  // first, then one warp vote picks the fast decoder (every code in range, always in
  // practice) or decode_quad's general path for the whole tile — same bits either way.
  constexpr int WIN = RUNS / 4, TASKS = (BN / 8) * WIN / kWgmmaWarps;
  auto dequant_tile = [&](int i) {
    const int b = i & 1;
    const int k0 = i * BK;
    uint4 raw[TASKS];
    uint8_t code[TASKS];
    bool exact = true;
#pragma unroll
    for (int ti = 0; ti < TASKS; ++ti) {
      const int t = warp + kWgmmaWarps * ti;
      const int r = (t / WIN) * 8 + g, u = (t % WIN) * 4 + c;
      raw[ti] = sR[(b * BN + r) * RUNS + raw_chunk(r, u)];
      code[ti] = F == WeightFmt::kBF16 ? 0
                                       : __ldg(w.scale + s_scale_row[min(r, rows_valid - 1)] + ((k0 + u * L) >> in_shift));
      exact = exact && quad_scale_exact<F>(code[ti]);
    }
    // Decodes task ti with `decode(ti, q, b0, b1)` and stores its pairs.
    auto decode_store = [&](int ti, auto&& decode) {
      const int t = warp + kWgmmaWarps * ti;
      const int nb = t / WIN, wi = t % WIN;
      unsigned char* dst = sB + b * B_BYTES + nb * 256 + g * 16 + c * 4 + wi * SPW * STEP_BYTES;
#pragma unroll
      for (int q = 0; q < SPW; ++q) {
        uint32_t b0, b1;
        decode(ti, q, b0, b1);
        *reinterpret_cast<uint32_t*>(dst + q * STEP_BYTES) = b0;
        *reinterpret_cast<uint32_t*>(dst + q * STEP_BYTES + 128) = b1;
      }
    };
    if (__all_sync(0xffffffffu, exact)) {  // one branch-free block for all tasks
#pragma unroll
      for (int ti = 0; ti < TASKS; ++ti)
        decode_store(ti, [&](int tj, int q, uint32_t& b0, uint32_t& b1) {
          decode_quad_scaled<F>(raw[tj], quad_scale<F>(code[tj]), q, b0, b1);
        });
    } else {
#pragma unroll
      for (int ti = 0; ti < TASKS; ++ti)
        decode_store(ti, [&](int tj, int q, uint32_t& b0, uint32_t& b1) {
          decode_quad<F>(raw[tj], code[tj], q, b0, b1);
        });
    }
  };
  // This warp's A fragments of tile i's 8 steps: rows 16 warp + g (+ 8); one 16-byte read gives
  // logical k 2c, 2c + 1 (+ 8, + 9) of two consecutive steps (as in the pipelined kernel).
  const int wm = warp * 16;
  auto load_a = [&](int i, uint32_t (&a)[STEPS][4]) {
    const uint4* At = sA + (i & 1) * BM * 16;
    const int r = wm + g;
#pragma unroll
    for (int kw = 0; kw < BK; kw += 4 * L) {
#pragma unroll
      for (int j = 0; j < SPW; j += 2) {
        const int ch = (kw + c * L + 4 * j) / 8, s = kw / (4 * L) * SPW + j;
        const uint4 lo = At[r * 16 + pipe_swizzle<F>(r, ch)];
        const uint4 hi = At[(r + 8) * 16 + pipe_swizzle<F>(r + 8, ch)];
        a[s][0] = lo.x, a[s][1] = hi.x, a[s][2] = lo.y, a[s][3] = hi.y;
        a[s + 1][0] = lo.z, a[s + 1][1] = hi.z, a[s + 1][2] = lo.w, a[s + 1][3] = hi.w;
      }
    }
  };

  float acc[64], total[64];
#pragma unroll
  for (int e = 0; e < 64; ++e) acc[e] = 0.0f, total[e] = 0.0f;
  const int64_t col_off = static_cast<int64_t>(experts ? 0 : tile.group) * p.N;
  // f(C row, C column, accumulator index) for each of this thread's outputs inside the matrix.
  auto for_each_output = [&](auto&& f) {
#pragma unroll
    for (int e = 0; e < 64; ++e) {
      const int r = wm + g + ((e & 2) ? 8 : 0);
      const int64_t n = n0 + (e >> 2) * 8 + 2 * c + (e & 1);
      if (r < m_count && n < p.N) f(static_cast<int64_t>(c_row[r]), col_off + n, e);
    }
  };
  auto store_partial = [&](int sub) {
    for_each_output([&](int64_t row, int64_t col, int e) {
      p.partial[(static_cast<int64_t>(sub) * p.M + row) * p.ldc + col] = acc[e];
    });
  };

  // B descriptors of the two buffers (step s adds s * STEP_BYTES to the 16-byte address field).
  const uint64_t desc0 = wgmma_desc(sB, 128, 256), desc1 = wgmma_desc(sB + B_BYTES, 128, 256);
  __syncthreads();  // s_a_src
  load_tile(k_begin);
  cp_async_wait<0>();
  __syncthreads();
  dequant_tile(k_begin);
  if (k_begin + 1 < k_end) load_tile(k_begin + 1);
  fence_proxy_async();  // the dequantised B tile is read by wgmma (async proxy)
  __syncthreads();      // B tile k_begin complete
  for (int i = k_begin; i < k_end; ++i) {
    if (i > k_begin && i % tiles_per_sub == 0) {  // a sub-range ends: fold it (canonical order)
      if (split) store_partial(i / tiles_per_sub - 1);
#pragma unroll
      for (int e = 0; e < 64; ++e) {
        if (!split) total[e] += acc[e];
        acc[e] = 0.0f;
      }
    }
    uint32_t a[STEPS][4];
    load_a(i, a);
    wgmma_fence_operands(acc);
    wgmma_fence();
    const uint64_t desc = (i & 1) ? desc1 : desc0;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) wgmma_m64n128k16_rs(acc, a[s], desc + ((s * STEP_BYTES) >> 4));
    wgmma_commit();
    if (i + 1 < k_end) {
      cp_async_wait<0>();
      __syncthreads();  // tile i + 1 landed for every thread; every warp holds its tile-i fragments
      if (i + 2 < k_end) load_tile(i + 2);  // into buffers i & 1 (A in registers, raw dequantised)
      dequant_tile(i + 1);                  // B buffer (i + 1) & 1: its MMAs finished last iteration
      fence_proxy_async();                  // the new B tile is read by wgmma (async proxy)
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    __syncthreads();  // B tile i + 1 complete; B tile i no longer read
  }

  if (split) {
    store_partial(static_cast<int>((static_cast<int64_t>(k_end) * BK - 1) / R));
    fold_split_tile<BN>(p, c_row, m_count, n0, col_off);
    return;
  }
  for_each_output([&](int64_t row, int64_t col, int e) {
    store_out(p.C, p.c_bf16, row * p.ldc + col, total[e] + acc[e]);
  });
}

}  // namespace deepinfer::kernels
