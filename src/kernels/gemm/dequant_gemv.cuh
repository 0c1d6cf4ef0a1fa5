// Small-M dequantising GEMM (M <= 32 rows per weight: decode steps, MoE experts at small batch).
// Memory bound: every weight byte is read once, as 16-byte runs copied asynchronously
// (cp.async) into a per-warp ring of kGemvStages windows in shared memory — many loads in
// flight without holding them in registers — then dequantised in registers and fed to
// mma.m16n8k16 in the canonical order of gemm_common.cuh, so the result is bitwise the one
// dequant_gemm gives for the same rows, whatever M is.
//
// Requirements (launch_dequant_gemm falls back to the tiled kernel otherwise, same bits): K a
// multiple of kGemmBK, rows of whole 16-byte runs, FP8 with UE8M0 scales in power-of-two blocks.
// Work split: CTA = (128 columns, one K sub-range, one group or active expert), 4 warps of 32
// columns. The CTA stages its rows' A slice [rows][R] and its columns' scale codes in shared
// memory once. A lane only ever reads ring slots it filled itself, so cp.async.wait_group is
// the only synchronisation the stream needs. Sub-range sums go to F32 partials [P][M][ldc]; the
// last CTA of a column tile to finish (GemmParams::tile_counters) — or gemv_reduce_kernel,
// without counters — folds them in sub-range order ((0 + s_0) + s_1) + ..., the canonical fold;
// with one sub-range the CTA writes C itself (as 0 + s_0).
#pragma once

#include "kernels/gemm/gemm_common.cuh"

namespace deepinfer::kernels {

inline constexpr int kGemvWarps = 4;
inline constexpr int kGemvWarpCols = 32;  // 4 n8 tiles per warp
inline constexpr int kGemvCtaCols = kGemvWarps * kGemvWarpCols;
inline constexpr int kGemvMaxRows = 32;   // MT <= 2 m16 tiles
inline constexpr int kGemvPad = 8;        // BF16 elements of row padding in the A slice
inline constexpr int kGemvMaxCodes = 64;  // scale codes per column and sub-range

// Scale codes per column in a sub-range: R / block_in (FP4: R / 32; BF16: none).
__host__ __device__ inline int gemv_codes(WeightFmt f, int block_in, int64_t K) {
  if (f == WeightFmt::kBF16) return 0;
  return static_cast<int>(gemm_subrange(K) / (f == WeightFmt::kFp4Block ? 32 : block_in));
}

// Shared memory of one CTA: A slice [MT * 16][R + pad] BF16, weight rings [warps][stages][4][32]
// x 16 bytes, scale codes [warps][32][codes].
__host__ __device__ inline size_t gemv_smem_bytes(int mt, int64_t K, int codes, int stages) {
  return static_cast<size_t>(mt) * 16 * (gemm_subrange(K) + kGemvPad) * 2 +
         static_cast<size_t>(kGemvWarps) * stages * 4 * 32 * 16 + static_cast<size_t>(kGemvWarps) * 32 * codes;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// S: ring windows per warp (S - 1 in flight).
template <WeightFmt F, int MT, int S>
__global__ void __launch_bounds__(kGemvWarps * 32) dequant_gemv_kernel(GemmParams p, float* partial, int n_codes) {
  constexpr int NT = kGemvWarpCols / 8, L = run_elems(F), W = 4 * L;
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int32_t a_row[MT * 16], c_row[MT * 16];

  const int64_t R = gemm_subrange(p.K), LDA = R + kGemvPad;
  __nv_bfloat16* sA = reinterpret_cast<__nv_bfloat16*>(smem);                          // [MT*16][LDA]
  uint4* ring = reinterpret_cast<uint4*>(smem + static_cast<size_t>(MT) * 16 * LDA * 2);  // [warp][S][NT][32]
  uint8_t* codes = reinterpret_cast<uint8_t*>(ring + kGemvWarps * S * NT * 32);           // [warp][32][n_codes]
  const int sub = blockIdx.y;
  const int64_t k_sub = sub * R, k_len = min64(p.K, k_sub + R) - k_sub;
  int64_t rows_begin = 0, m_count = 0;
  int group = blockIdx.z;
  WeightDesc w = p.w;
  if (p.experts != nullptr) {
    if (static_cast<int>(blockIdx.z) >= p.active[p.n_experts]) return;  // fewer active experts
    group = p.active[blockIdx.z];
    w = p.experts[group];
    rows_begin = p.offsets[group];
    m_count = p.offsets[group + 1] - rows_begin;
  } else {
    m_count = p.M;
  }

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t n_base = static_cast<int64_t>(blockIdx.x) * kGemvCtaCols + warp * kGemvWarpCols;
  const int64_t w_row0 = p.experts ? 0 : static_cast<int64_t>(group) * p.N;
  const int n_windows = static_cast<int>(k_len / W);  // K % kGemmBK == 0 (launch_gemv checks)
  const int in_shift = F == WeightFmt::kFp4Block ? 5 : (F == WeightFmt::kFp8Block ? __ffs(w.block_in) - 1 : 0);

  // The lane's weight row per n8 tile (null past N); window wi's run is at byte offset
  // run_byte(wi) of it.
  const uint8_t* wrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int64_t n = n_base + nt * 8 + g;
    wrow[nt] = n < p.N ? w.w + (w_row0 + n) * w.row_bytes : nullptr;
  }
  const int k_lane = static_cast<int>(k_sub) + c * L;
  auto run_byte = [&](int wi) {
    const int k = k_lane + wi * W;
    return F == WeightFmt::kBF16 ? 2 * k : (F == WeightFmt::kFp8Block ? k : k / 2);
  };
  uint4* my_ring = ring + warp * S * NT * 32;
  auto issue = [&](int wi) {  // one commit group per window, empty past the end
    if (wi < n_windows) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const bool valid = wrow[nt] != nullptr;
        cp_async16(&my_ring[((wi % S) * NT + nt) * 32 + lane], valid ? wrow[nt] + run_byte(wi) : w.w, valid);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int d = 0; d < S - 1; ++d) issue(d);  // in flight while A and the scales are staged

  for (int i = threadIdx.x; i < MT * 16; i += blockDim.x) {
    int32_t ar = -1, cr = -1;
    if (i < m_count) {
      cr = p.experts ? p.perm[rows_begin + i] : i;
      ar = p.experts ? cr / p.a_div : i;
    }
    a_row[i] = ar;
    c_row[i] = cr;
  }
  // Scale codes of the warp's 32 columns over the sub-range (lane = column).
  uint8_t* my_codes = codes + warp * 32 * n_codes;
  if (F != WeightFmt::kBF16) {
    const int64_t n = n_base + lane;
    if (n < p.N) {
      const uint8_t* srow = F == WeightFmt::kFp8Block ? w.scale + ((w_row0 + n) / w.block_out) * w.scale_cols
                                                      : w.scale + (w_row0 + n) * w.scale_cols;
      for (int i = 0; i < n_codes; ++i) my_codes[lane * n_codes + i] = srow[(k_sub >> in_shift) + i];
    }
  }
  __syncthreads();  // a_row

  // Stage the A slice: columns [k_sub, k_sub + R) of every present row, zero elsewhere.
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
  const int64_t a_col0 = (p.experts ? 0 : static_cast<int64_t>(group) * p.K) + k_sub;
  const bool a_vec = (p.lda % 8 == 0) && (a_col0 % 8 == 0) && (reinterpret_cast<uintptr_t>(A) % 16 == 0);
  for (int64_t i = threadIdx.x; i < MT * 16 * (R / 8); i += blockDim.x) {
    const int r = static_cast<int>(i / (R / 8));
    const int64_t kk = (i % (R / 8)) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (a_row[r] >= 0 && kk < k_len) {
      const __nv_bfloat16* src = A + static_cast<int64_t>(a_row[r]) * p.lda + a_col0 + kk;
      if (a_vec) {
        v = *reinterpret_cast<const uint4*>(src);
      } else {
        uint16_t e[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) e[q] = __bfloat16_as_ushort(src[q]);
        v = make_uint4(e[0] | (uint32_t{e[1]} << 16), e[2] | (uint32_t{e[3]} << 16), e[4] | (uint32_t{e[5]} << 16),
                       e[6] | (uint32_t{e[7]} << 16));
      }
    }
    *reinterpret_cast<uint4*>(&sA[r * LDA + kk]) = v;
  }
  __syncthreads();

  float acc[MT][NT][4] = {};
  for (int wi = 0; wi < n_windows; ++wi) {
    cp_async_wait<S - 2>();  // this lane's copies of window wi have landed
    uint4 cur[NT];
    uint32_t s2[NT];  // BF16x2 scale: FP4 2^(e-127); FP8 2^(e-127) x 2^120 (fp8_quad)
    uint8_t code[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      cur[nt] = my_ring[((wi % S) * NT + nt) * 32 + lane];
      const int k_rel = c * L + wi * W;
      code[nt] = F == WeightFmt::kBF16 ? 127 : my_codes[(nt * 8 + g) * n_codes + (k_rel >> in_shift)];
      s2[nt] = F == WeightFmt::kFp4Block ? e8m0_bf16x2(code[nt]) : e8m0_times_2p120_bf16x2(code[nt]);
    }
    issue(wi + S - 1);  // refills the slot consumed last iteration
#pragma unroll
    for (int j = 0; j < L / 4; ++j) {
      const int kk = wi * W + c * L + 4 * j;  // within the slice
      uint32_t bf[NT][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint32_t words[4] = {cur[nt].x, cur[nt].y, cur[nt].z, cur[nt].w};
        if constexpr (F == WeightFmt::kBF16) {
          bf[nt][0] = words[(2 * j) % 4];
          bf[nt][1] = words[(2 * j + 1) % 4];
        } else if constexpr (F == WeightFmt::kFp4Block) {
          fp4_quad((words[j / 2] >> (16 * (j % 2))) & 0xffffu, s2[nt], bf[nt][0], bf[nt][1]);
        } else if (code[nt] <= 134) {
          fp8_quad(words[j], s2[nt], bf[nt][0], bf[nt][1]);
        } else {  // scale beyond fp8_quad's range: the F32 path, as dequant_gemm (never in practice)
          const float sc = e8m0_to_f32(code[nt]);
          const uint32_t v = words[j];
          bf[nt][0] = pack_bf16(e4m3_to_f32(v & 0xff) * sc, e4m3_to_f32((v >> 8) & 0xff) * sc);
          bf[nt][1] = pack_bf16(e4m3_to_f32((v >> 16) & 0xff) * sc, e4m3_to_f32(v >> 24) * sc);
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const uint2 lo = *reinterpret_cast<const uint2*>(&sA[(mt * 16 + g) * LDA + kk]);
        const uint2 hi = *reinterpret_cast<const uint2*>(&sA[(mt * 16 + g + 8) * LDA + kk]);
        const uint32_t af[4] = {lo.x, hi.x, lo.y, hi.y};  // a0..a3: logical k 2c.., rows g / g + 8
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(acc[mt][nt], af, bf[nt]);
      }
    }
  }
  cp_async_wait<0>();

  const int P = gridDim.y;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = mt * 16 + g + (e >= 2 ? 8 : 0);
        const int64_t n = n_base + nt * 8 + 2 * c + (e & 1);
        if (r >= m_count || n >= p.N) continue;
        const int64_t row = c_row[r];
        const int64_t col = static_cast<int64_t>(p.experts ? 0 : group) * p.N + n;
        if (P > 1) {
          partial[(static_cast<int64_t>(sub) * p.M + row) * p.ldc + col] = acc[mt][nt][e];
        } else if (p.c_bf16) {
          reinterpret_cast<__nv_bfloat16*>(p.C)[row * p.ldc + col] = __float2bfloat16_rn(0.0f + acc[mt][nt][e]);
        } else {
          reinterpret_cast<float*>(p.C)[row * p.ldc + col] = 0.0f + acc[mt][nt][e];
        }
      }
  if (P == 1 || p.tile_counters == nullptr) return;  // else gemv_reduce_kernel folds the partials
  // The last of the tile's P CTAs to finish folds the partials in sub-range order (arrival order
  // decides only who folds, never the order), then re-arms the counter for the next launch.
  __shared__ bool s_last;
  __threadfence();
  __syncthreads();
  int32_t* counter = p.tile_counters + static_cast<int64_t>(blockIdx.z) * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) s_last = atomicAdd(counter, 1) == P - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  const int64_t col0 = static_cast<int64_t>(p.experts ? 0 : group) * p.N + static_cast<int64_t>(blockIdx.x) * kGemvCtaCols;
  const int64_t n_cols = min64(kGemvCtaCols, p.N - static_cast<int64_t>(blockIdx.x) * kGemvCtaCols);
  for (int64_t i = threadIdx.x; i < m_count * n_cols; i += blockDim.x) {
    const int64_t row = c_row[i / n_cols], col = col0 + i % n_cols;
    float v = 0.0f;  // ((0 + s_0) + s_1) + ...: the canonical sub-range order
    for (int sidx = 0; sidx < P; ++sidx) v += __ldcg(&partial[(static_cast<int64_t>(sidx) * p.M + row) * p.ldc + col]);
    if (p.c_bf16) reinterpret_cast<__nv_bfloat16*>(p.C)[row * p.ldc + col] = __float2bfloat16_rn(v);
    else reinterpret_cast<float*>(p.C)[row * p.ldc + col] = v;
  }
  if (threadIdx.x == 0) *counter = 0;
}

// C = ((0 + partial[0]) + partial[1]) + ... over the P sub-ranges, for the rows the partials
// cover: all M rows (dense) or the expert pairs (expert mode: every pair row is written once).
__global__ void gemv_reduce_kernel(const float* partial, int P, int64_t M, int64_t ldc, int64_t n_cols, int64_t col0,
                                   void* C, bool c_bf16) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * n_cols) return;
  const int64_t idx = (i / n_cols) * ldc + col0 + i % n_cols;
  float v = 0.0f;
  for (int s = 0; s < P; ++s) v += partial[s * M * ldc + idx];
  if (c_bf16) reinterpret_cast<__nv_bfloat16*>(C)[idx] = __float2bfloat16_rn(v);
  else reinterpret_cast<float*>(C)[idx] = v;
}

}  // namespace deepinfer::kernels
