// Pipelined block-scaled GEMM C = A W^T for M > 32 rows (prefill, large decode batches, MoE
// experts with many tokens): the throughput kernel of the tiled path. Same canonical summation
// order as dequant_gemv / dequant_gemm (gemm_common.cuh), so every kernel gives the same bits and
// the backend stays batch invariant; dequant_gemm remains the general fallback (K not a multiple
// of kGemmBK, unaligned rows, F32 scales).
//
// CTA tile 128 x 128 x kGemmBK (= 128), 16 warps as 4 (M) x 4 (N), warp tile 32 x 32 (2 m16 x 4 n8
// mma tiles; 16 warps hide the fragment-load latency better than 8 of 64 x 32, measured). Per K tile:
//   * cp.async brings the A tile and the raw weight tile (16-byte runs) for tile i + 1 while tile
//     i is computed (double buffered); BF16 weights go straight into the B buffers;
//   * FP8/FP4 runs are dequantised once per CTA into a BF16 tile (dequant_run: the decoder every
//     GEMM kernel shares), then both operands are read as 16-byte fragments: one LDS.128 per lane
//     gives two consecutive canonical mma steps of A rows g (or g + 8) or of W row g.
// Shared tiles are rows of 16 chunks of 16 bytes, XOR-swizzled per format so that the 8 lanes of
// a quarter-warp (rows g, g + 1 x runs c = 0..3) hit 8 distinct bank groups.
// MoE: blockIdx.y enumerates the (expert, 128-row tile) pairs that hold rows (gemm_tile_rows).
#pragma once

#include "kernels/gemm/gemm_tile_rows.cuh"

namespace deepinfer::kernels {

inline constexpr int kPipeBM = 128, kPipeBN = 128, kPipeWarps = 16;

// Bytes of the raw (stored) weight tile rows: one K tile of each format.
__host__ __device__ constexpr int pipe_raw_row_bytes(WeightFmt f) {
  return f == WeightFmt::kBF16 ? 0 : (f == WeightFmt::kFp8Block ? kGemmBK : kGemmBK / 2);
}
// Dynamic shared memory: A [2][BM][BK], B [BF16: 2, else 1][BN][BK] (BF16), raw [2][BN][raw row].
__host__ __device__ constexpr size_t pipe_smem_bytes(WeightFmt f) {
  return static_cast<size_t>(2) * kPipeBM * kGemmBK * 2 +
         static_cast<size_t>(f == WeightFmt::kBF16 ? 2 : 1) * kPipeBN * kGemmBK * 2 +
         static_cast<size_t>(2) * kPipeBN * pipe_raw_row_bytes(f);
}

// Physical 16-byte chunk of logical chunk ch (0..15) in tile row r. A quarter-warp reads rows of
// both parities at chunks base + c * (Lf / 8) + x, c = 0..3: BF16 runs are adjacent chunks (row
// parity moves them by 4), FP8 runs every other chunk (parity by 1), FP4 runs every fourth
// (chunk bit 3 moves by 2, parity by 1).
template <WeightFmt F>
__device__ __forceinline__ int pipe_swizzle(int r, int ch) {
  if constexpr (F == WeightFmt::kBF16) return ch ^ ((r & 1) << 2);
  if constexpr (F == WeightFmt::kFp8Block) return ch ^ (r & 1);
  return ch ^ ((ch >> 3) << 1) ^ (r & 1);
}

template <WeightFmt F>
__global__ void __launch_bounds__(kPipeWarps * 32, 1) dequant_gemm_pipelined_kernel(GemmParams p, int m_tiles,
                                                                                      int spc) {
  pdl_prologue();
  constexpr int BM = kPipeBM, BN = kPipeBN, BK = kGemmBK, L = run_elems(F);
  constexpr int RAW = pipe_raw_row_bytes(F);
  constexpr int MT = 2, NT = 4;  // warp tile 32 x 32
  extern __shared__ __align__(16) unsigned char pipe_smem[];
  uint4* sA = reinterpret_cast<uint4*>(pipe_smem);           // [2][BM][16] chunks
  uint4* sB = sA + 2 * BM * 16;                                // [1 or 2][BN][16]
  uint8_t* sR = reinterpret_cast<uint8_t*>(sB + (F == WeightFmt::kBF16 ? 2 : 1) * BN * 16);  // [2][BN][RAW]
  __shared__ int32_t a_row[BM], c_row[BM];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * BN;

  // Rows of this tile: plain, grouped, or an expert's permuted (token, slot) pairs.
  const TileRows tile = gemm_tile_rows<BM>(p, m_tiles, static_cast<int>(blockIdx.y), a_row, c_row);
  if (tile.m_count <= 0) return;
  const int64_t m_count = tile.m_count;
  const int group = tile.group;
  const WeightDesc& w = tile.w;
  const bool experts = p.experts != nullptr;
  const int64_t a_col0 = experts ? 0 : static_cast<int64_t>(group) * p.K;
  const int64_t w_row0 = experts ? 0 : static_cast<int64_t>(group) * p.N;

  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
  const int64_t R = gemm_subrange(p.K);
  const KTiles kt = k_tiles_of(p, spc);
  const bool split = kt.split;
  const int k_begin = kt.begin, k_end = kt.end;
  // Issues the copies of K tile i into buffer i & 1: A rows (zero past m_count), weight rows
  // (zero past N) — raw runs, or BF16 straight into the B buffer.
  auto load_tile = [&](int i) {
    const int b = i & 1;
    const int64_t k0 = static_cast<int64_t>(i) * BK;
    for (int idx = threadIdx.x; idx < BM * 16; idx += blockDim.x) {
      const int r = idx >> 4, ch = idx & 15;
      const int32_t ar = a_row[r];
      const __nv_bfloat16* src = ar >= 0 ? A + ar * p.lda + a_col0 + k0 + ch * 8 : A;
      cp_async16(sA + (b * BM + r) * 16 + pipe_swizzle<F>(r, ch), src, ar >= 0);
    }
    if constexpr (F == WeightFmt::kBF16) {
      for (int idx = threadIdx.x; idx < BN * 16; idx += blockDim.x) {
        const int r = idx >> 4, ch = idx & 15;
        const bool ok = n0 + r < p.N;
        const uint8_t* src = ok ? w.w + (w_row0 + n0 + r) * w.row_bytes + k0 * 2 + ch * 16 : w.w;
        cp_async16(sB + (b * BN + r) * 16 + pipe_swizzle<F>(r, ch), src, ok);
      }
    } else {
      constexpr int RUNS = RAW > 0 ? RAW / 16 : 1;  // (BF16 has no raw tile)
      for (int idx = threadIdx.x; idx < BN * RUNS; idx += blockDim.x) {
        const int r = idx / RUNS, u = idx % RUNS;
        const bool ok = n0 + r < p.N;
        const uint8_t* src = ok ? w.w + (w_row0 + n0 + r) * w.row_bytes + k0 * RAW / BK + u * 16 : w.w;
        cp_async16(sR + (b * BN + r) * RAW + u * 16, src, ok);
      }
    }
    cp_async_commit();
  };
  // FP8/FP4: the raw runs of buffer i & 1 as BF16 into the B tile (zeros past N).
  auto dequant_tile = [&](int i) {
    constexpr int RUNS = RAW > 0 ? RAW / 16 : 1;  // (BF16 has no raw tile)
    const int64_t k0 = static_cast<int64_t>(i) * BK;
    for (int idx = threadIdx.x; idx < BN * RUNS; idx += blockDim.x) {
      const int r = idx / RUNS, u = idx % RUNS;
      uint32_t out[L / 2] = {};
      if (n0 + r < p.N) {
        const uint4 raw = *reinterpret_cast<const uint4*>(sR + ((i & 1) * BN + r) * RAW + u * 16);
        dequant_run<F>(w, w_row0 + n0 + r, k0 + u * L, raw, out);
      }
#pragma unroll
      for (int q = 0; q < L / 8; ++q)
        sB[r * 16 + pipe_swizzle<F>(r, u * (L / 8) + q)] = make_uint4(out[4 * q], out[4 * q + 1], out[4 * q + 2], out[4 * q + 3]);
    }
  };

  const int wm = (warp >> 2) * 32, wn = (warp & 3) * 32;
  float acc[MT][NT][4] = {}, total[MT][NT][4] = {};
  const int64_t col_off = static_cast<int64_t>(experts ? 0 : group) * p.N;
  // f(C row, C column, mt, nt, e) for each of this lane's outputs inside the matrix.
  auto for_each_output = [&](auto&& f) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = wm + mt * 16 + g + (e >= 2 ? 8 : 0);
          const int64_t n = n0 + wn + nt * 8 + 2 * c + (e & 1);
          if (r < m_count && n < p.N) f(static_cast<int64_t>(c_row[r]), col_off + n, mt, nt, e);
        }
  };
  // Split launches: sub-range sum `sub` of this lane's outputs to the partials [P][M][ldc].
  auto store_partial = [&](int sub) {
    for_each_output([&](int64_t row, int64_t col, int mt, int nt, int e) {
      p.partial[(static_cast<int64_t>(sub) * p.M + row) * p.ldc + col] = acc[mt][nt][e];
    });
  };

  load_tile(k_begin);
  for (int i = k_begin; i < k_end; ++i) {
    cp_async_wait<0>();
    __syncthreads();  // tile i landed for every thread; every warp is done with tile i - 1
    if (i + 1 < k_end) load_tile(i + 1);
    const uint4* B = sB;
    if constexpr (F == WeightFmt::kBF16) {
      B = sB + (i & 1) * BN * 16;
    } else {
      // Measured: interleaving this with the previous tile's mma (double-buffered B, scale codes
      // fetched ahead) changed nothing on the H200 — the mma loop, not the dequantisation, bounds
      // the kernel — so the simpler sequential form stays.
      dequant_tile(i);
      __syncthreads();  // the BF16 weight tile is complete
    }
    if (i > k_begin && static_cast<int64_t>(i) * BK % R == 0) {  // a sub-range ends: fold it (canonical order)
      if (split) {
        store_partial(static_cast<int>(static_cast<int64_t>(i) * BK / R) - 1);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
      } else {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) total[mt][nt][e] += acc[mt][nt][e], acc[mt][nt][e] = 0.0f;
      }
    }
    const uint4* At = sA + (i & 1) * BM * 16;
    // Windows of 4L elements; a pair of mma steps (j, j + 1) per 16-byte fragment read: BK / 32
    // pairs per tile whatever the format.
#pragma unroll
    for (int kw = 0; kw < BK; kw += 4 * L) {
#pragma unroll
      for (int j = 0; j < L / 4; j += 2) {
        const int ch = (kw + c * L + 4 * j) / 8;
        uint4 bq[NT];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int r = wn + nt * 8 + g;
          bq[nt] = B[r * 16 + pipe_swizzle<F>(r, ch)];
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const int r = wm + mt * 16 + g;
          const uint4 lo = At[r * 16 + pipe_swizzle<F>(r, ch)];
          const uint4 hi = At[(r + 8) * 16 + pipe_swizzle<F>(r + 8, ch)];
          const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint32_t b0[2] = {bq[nt].x, bq[nt].y};
            mma_bf16_16816(acc[mt][nt], a0, b0);
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint32_t b1[2] = {bq[nt].z, bq[nt].w};
            mma_bf16_16816(acc[mt][nt], a1, b1);
          }
        }
      }
    }
  }

  if (split) {
    store_partial(static_cast<int>((static_cast<int64_t>(k_end) * BK - 1) / R));
    fold_split_tile<BN>(p, c_row, m_count, n0, col_off);
    return;
  }
  // Epilogue: (total + current sub-range) to C rows c_row, columns of this group.
  for_each_output([&](int64_t row, int64_t col, int mt, int nt, int e) {
    store_out(p.C, p.c_bf16, row * p.ldc + col, total[mt][nt][e] + acc[mt][nt][e]);
  });
}

}  // namespace deepinfer::kernels
