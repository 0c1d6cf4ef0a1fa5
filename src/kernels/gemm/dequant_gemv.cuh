// Small-M dequantising GEMM (M <= 32 rows per weight: decode steps, MoE experts at small batch).
// Memory bound: every weight byte is read once, as 16-byte runs copied asynchronously
// (cp.async) into a per-warp ring of kGemvStages windows in shared memory — many loads in
// flight without holding them in registers — then dequantised in registers and fed to
// mma.m16n8k16 in the canonical order of gemm_common.cuh, so the result is bitwise the one
// dequant_gemm gives for the same rows, whatever M is.
//
// Requirements (launch_dequant_gemm falls back to the tiled kernel otherwise, same bits): K a
// multiple of kGemmBK, rows of whole 16-byte runs, FP8 with UE8M0 scales in power-of-two blocks.
// Work split: CTA = (4 NT 8 columns, spc consecutive K sub-ranges, one group or active expert), 4
// warps of NT 8 columns; NT and spc is chosen per launch for parallelism (spc = P: the CTA folds all of K
// in registers and writes C). The CTA stages its present rows' A span and its columns' scale
// codes in shared memory once. A lane only ever reads ring slots it filled itself, so
// cp.async.wait_group is the only synchronisation the stream needs. Sub-range sums go to F32
// partials [P][M][ldc]; the last CTA of a column tile to finish (GemmParams::tile_counters) — or
// gemv_reduce_kernel, without counters — folds them in sub-range order ((0 + s_0) + s_1) + ..., the
// canonical fold; with one sub-range the CTA writes C itself (as 0 + s_0).
#pragma once

#include "kernels/gemm/gemm_common.cuh"

namespace deepinfer::kernels {

inline constexpr int kGemvWarps = 4;
// Columns per warp: NT n8 tiles (template parameter, 1, 2 or 4), chosen per launch. Wide warps
// share each A fragment among 4 tiles; narrow ones give a small weight 4x the warps, which
// matters because a warp's sub-range is a serial chain of decode + mma (batch-1 projections of a
// few MB ran at 0.1-0.5 TB/s with 32-column warps: one warp per scheduler, latency bound).
inline constexpr int kGemvMaxNt = 4;
inline constexpr int kGemvMinCtaCols = kGemvWarps * 8;  // NT = 1
__host__ __device__ constexpr int gemv_cta_cols(int nt) { return kGemvWarps * 8 * nt; }
inline constexpr int kGemvMaxRows = 32;  // MT <= 2 m16 tiles
inline constexpr int kGemvPad = 8;       // BF16 elements of row padding in the A slice

// Geometry of one launch (host-chosen, numerically neutral): sub-ranges per CTA and the A rows
// worth staging (rows beyond hold no data: M, or the batch size for experts).
struct GemvShape {
  int64_t R = 0;    // gemm_subrange(K) and
  int P = 0;        // gemm_n_subranges(K), computed once on the host (64-bit divisions)
  int spc = 1;      // K sub-ranges per CTA (spc == P: the CTA folds all of K itself)
  int a_rows = 16;  // staged A rows (<= MT * 16)
  int n_codes = 0;  // scale codes per column over spc sub-ranges
  // Consecutive column tiles per CTA (one K span and group, so A is staged once for all of them
  // and the weight ring runs on from one tile into the next); 1 = a tile per CTA.
  int tpc = 1;
};

// Scale codes per column over `spc` sub-ranges: spc R / block_in (FP4: / 32; BF16: none).
__host__ __device__ inline int gemv_codes(WeightFmt f, int block_in, int64_t K, int spc) {
  if (f == WeightFmt::kBF16) return 0;
  return static_cast<int>(spc * gemm_subrange(K) / (f == WeightFmt::kFp4Block ? 32 : block_in));
}

// Shared memory of one CTA: A span [a_rows][spc R + pad] BF16, weight rings [warps][S][NT][32]
// x 16 bytes (ring_windows = S NT of them per warp), scale codes [warps][tpc][32][codes].
__host__ __device__ inline size_t gemv_smem_bytes(const GemvShape& sh, int64_t K, int ring_windows) {
  return static_cast<size_t>(sh.a_rows) * (sh.spc * gemm_subrange(K) + kGemvPad) * 2 +
         static_cast<size_t>(kGemvWarps) * ring_windows * 32 * 16 +
         static_cast<size_t>(kGemvWarps) * sh.tpc * 32 * sh.n_codes;
}
// CTAs along x of a launch: per weight set, its column tiles in groups of tpc.
__host__ __device__ inline int64_t gemv_x_ctas(int64_t N, int cta_cols, int tpc) {
  return ((N + cta_cols - 1) / cta_cols + tpc - 1) / tpc;
}

// Resident CTAs per SM the register budget is set for: 4 with one m16 tile (<= 128 registers, no
// spills), 6 for 8-column warps (~70-80 registers: small weights need the warps), 3 with two m16
// tiles (more would spill the second tile's accumulators).
template <int MT, int NT>
inline constexpr int kGemvCtasPerSm = MT >= -1 && MT <= 1 ? (NT == 1 ? 6 : 4) : 3;

// Eight consecutive activations of row `row` from column `col` as F32 (A is F32 when p.a_f32,
// else BF16); `vec`: 16-byte aligned rows and column.
__device__ __forceinline__ void load_act8(const GemmParams& p, int64_t row, int64_t col, bool vec, float (&v)[8]) {
  auto load = [&](const auto* src) {
    if (vec) {
      load8_f32(src, v);
    } else {
#pragma unroll
      for (int q = 0; q < 8; ++q) v[q] = to_f32(src[q]);
    }
  };
  const int64_t off = row * p.lda + col;
  if (p.a_f32) {
    load(static_cast<const float*>(p.A) + off);
  } else {
    load(static_cast<const __nv_bfloat16*>(p.A) + off);
  }
}

// The A span staged with the activation quantisation folded in (GemmParams::a_quant_block):
// thread i of a pass takes 8-column chunk i of the span (row-major over the `present` staged rows
// that hold data — the chunk's first rows), so a block of a_quant_block columns is a group of
// consecutive, aligned lanes that share their |x| maximum by shuffles, then each lane stores its 8
// quantised values: act_quant_bf16's bits (act_quant_scale / act_quant_value). Each thread loads 4
// chunks before it quantises any (the loads are the latency). Rows present .. a_rows - 1 are
// zeroed without loads or arithmetic: every CTA of the launch repeats this staging for its
// columns, so the launcher folds the quantisation only for a few rows (gemm_fuses_act_quant).
// kUnroll: chunks loaded per thread before any is quantised (registers the caller can spare).
template <int kUnroll = 4>
__device__ __forceinline__ void stage_quantised_a(const GemmParams& p, const int32_t* a_row, int64_t a_col0, bool vec,
                                                  int a_rows, int present, int chunks, __nv_bfloat16* sA,
                                                  int64_t LDA) {
  const int group = p.a_quant_block / 8;  // lanes per block: a power of two <= 32 (the launcher checks)
  const int total = present * chunks, lane = threadIdx.x & 31, stride = blockDim.x;
  // Warp-uniform bounds (the shuffles need every lane); blocks never straddle the end, since
  // chunks is a multiple of the group.
  for (int base = threadIdx.x - lane; base < total; base += kUnroll * stride) {
    float v[kUnroll][8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * stride + lane, r = present == 1 ? 0 : i / chunks;  // one row: no division
#pragma unroll
      for (int q = 0; q < 8; ++q) v[u][q] = 0.0f;
      if (i < total) load_act8(p, a_row[r], a_col0 + static_cast<int64_t>(i - r * chunks) * 8, vec, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * stride >= total) break;  // warp-uniform
      float amax = 0.0f;
#pragma unroll
      for (int q = 0; q < 8; ++q) amax = fmaxf(amax, fabsf(v[u][q]));
      for (int o = 1; o < group; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      const float s = act_quant_scale(amax);
      const int i = base + u * stride + lane, r = present == 1 ? 0 : i / chunks;
      if (i >= total) continue;
      uint32_t packed[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) packed[q] = pack_bf16(act_quant_value(v[u][2 * q], s), act_quant_value(v[u][2 * q + 1], s));
      *reinterpret_cast<uint4*>(&sA[r * LDA + static_cast<int64_t>(i - r * chunks) * 8]) =
          make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
  }
  for (int i = total + threadIdx.x; i < a_rows * chunks; i += stride) {
    const int r = i / chunks;
    *reinterpret_cast<uint4*>(&sA[r * LDA + static_cast<int64_t>(i - r * chunks) * 8]) = make_uint4(0, 0, 0, 0);
  }
}

// The A span staged as given (BF16 rows): `chunks` 8-column chunks of each of the first a_rows
// rows from column a_col0, absent rows (a_row < 0) zeroed; asynchronous (cp.async, to be committed
// and waited for by the caller) when `vec` (16-byte aligned rows and column).
__device__ __forceinline__ void stage_plain_a(const GemmParams& p, const int32_t* a_row, int64_t a_col0, bool vec,
                                              int a_rows, int chunks, __nv_bfloat16* sA, int64_t LDA) {
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
  for (int i = threadIdx.x; i < a_rows * chunks; i += blockDim.x) {
    const int r = a_rows == 1 ? 0 : i / chunks;  // one row (batch 1): no division
    const int64_t kk = static_cast<int64_t>(i - r * chunks) * 8;
    if (vec) {  // asynchronous, zero-filled for absent rows
      const bool present = a_row[r] >= 0;
      cp_async16(&sA[r * LDA + kk], present ? A + static_cast<int64_t>(a_row[r]) * p.lda + a_col0 + kk : A, present);
      continue;
    }
    uint4 v = make_uint4(0, 0, 0, 0);
    if (a_row[r] >= 0) {
      const __nv_bfloat16* src = A + static_cast<int64_t>(a_row[r]) * p.lda + a_col0 + kk;
      uint16_t e[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) e[q] = __bfloat16_as_ushort(src[q]);
      v = make_uint4(e[0] | (uint32_t{e[1]} << 16), e[2] | (uint32_t{e[3]} << 16), e[4] | (uint32_t{e[5]} << 16),
                     e[6] | (uint32_t{e[7]} << 16));
    }
    *reinterpret_cast<uint4*>(&sA[r * LDA + kk]) = v;
  }
}

// MT > 0: m16 row tiles (activations as the mma's A operand, weights as B). MT < 0: transposed
// tiles for -MT n8 row tiles (8, 16 or 32 rows) — weights as A (two n8 column tiles per m16
// tile), activations as B (n8 = 8 rows), so no mma lane carries absent rows, an activation
// fragment is two registers of one shared-memory read, and each decoded weight fragment feeds
// every row tile (a warp issues half the mma of the untransposed tiles at 8 rows). Each output
// element is the same 16-product sums in the same order either way (the suite checks the bits
// against the tiled kernels). NT: n8 tiles per warp (even when MT < 0); S: ring windows per warp
// (S - 1 in flight). MULTI: the CTA takes GemvShape::tpc consecutive column tiles (else one; a
// separate instantiation so that the one-tile kernels keep their registers).
template <WeightFmt F, int MT, int NT, int S, bool MULTI = false>
__global__ void __launch_bounds__(kGemvWarps * 32, kGemvCtasPerSm<MT, NT>)
    dequant_gemv_kernel(GemmParams p, float* partial, GemvShape sh) {
  constexpr int L = run_elems(F), W = 4 * L, kCtaCols = gemv_cta_cols(NT);
  constexpr bool kTr = MT < 0;
  constexpr int TT = kTr ? -MT : 1;  // n8 row tiles of the transposed form
  static_assert(!kTr || NT % 2 == 0, "transposed tiles pair the n8 tiles");
  constexpr int kChunk = kTr ? 8 * TT : MT * 16;       // rows per chunk
  constexpr int kTiles = kTr ? NT / 2 * TT : MT * NT;  // accumulator tiles of a warp
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int32_t a_row[kChunk], c_row[kChunk];

  const int64_t R = sh.R;
  const int P = sh.P;
  const int sub0 = blockIdx.y * sh.spc, nsub = min(sh.spc, P - sub0);
  const int64_t k_begin = sub0 * R, k_span = min64(p.K, (sub0 + nsub) * R) - k_begin;
  const int64_t LDA = sh.spc * R + kGemvPad;
  __nv_bfloat16* sA = reinterpret_cast<__nv_bfloat16*>(smem);  // [a_rows][LDA]
  uint4* ring = reinterpret_cast<uint4*>(smem + static_cast<size_t>(sh.a_rows) * LDA *
                                                    2);  // [warp][S][NT][32]
  uint8_t* codes =
      reinterpret_cast<uint8_t*>(ring + kGemvWarps * S * NT * 32);  // [warp][tpc][32][n_codes]
  int64_t rows_begin = 0, m_count = 0;
  int group = blockIdx.z;
  WeightDesc w = p.w;
  // Weight set (GemmParams::n_sets: set 0's CTAs first) and the CTA's column tiles bx0 ..
  // bx0 + n_tiles - 1 within it; N and ldc are the set's.
  const int tpc = MULTI ? sh.tpc : 1;
  const int x_ctas0 = static_cast<int>(gemv_x_ctas(p.N, kCtaCols, tpc));
  const int set = p.n_sets > 1 && static_cast<int>(blockIdx.x) >= x_ctas0 ? 1 : 0;
  const int64_t N = set == 0 ? p.N : p.N1, ldc = set == 0 ? p.ldc : p.ldc1;
  const int x_tiles = static_cast<int>((N + kCtaCols - 1) / kCtaCols);
  const int bx0 = (static_cast<int>(blockIdx.x) - set * x_ctas0) * tpc;
  const int n_tiles = MULTI ? min(tpc, x_tiles - bx0) : 1;
  // This CTA's tile i in the launch's tile numbering (set 0's tiles, then set 1's): its counter.
  const int tile0 = (set == 0 ? 0 : static_cast<int>((p.N + kCtaCols - 1) / kCtaCols)) + bx0;
  void* const C = set == 0 ? p.C : p.C1;
  if (set != 0 && p.experts == nullptr) w = p.w1;
  if (partial != nullptr) partial += set * static_cast<int64_t>(sh.P) * p.M * p.ldc;  // after set 0's
  // Programmatic dependent launch: a following GEMV may start once every CTA is here. Dense
  // launches stream their first weight windows and scale codes (data no kernel writes) before
  // waiting for the previous kernel; expert launches wait first (the routing picks the weights).
  griddep_launch_dependents();
  if (p.experts != nullptr) {
    griddep_wait();
    if (static_cast<int>(blockIdx.z) >= p.active[p.n_experts]) return;  // fewer active experts
    group = p.active[blockIdx.z];
    w = p.experts[set * p.n_experts + group];
    rows_begin = p.offsets[group];
    m_count = p.offsets[group + 1] - rows_begin;
  } else {
    m_count = p.M;
  }

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c = lane & 3;
  // The warp's first column in tile i of the CTA.
  auto n_base_of = [&](int i) { return static_cast<int64_t>(bx0 + i) * kCtaCols + warp * NT * 8; };
  const int64_t w_row0 = p.experts ? 0 : static_cast<int64_t>(group) * p.N;
  const int n_windows = static_cast<int>(k_span / W);  // K % kGemmBK == 0 (launch_gemv checks)
  const int win_per_sub = static_cast<int>(R / W);
  const int in_shift =
      F == WeightFmt::kFp4Block ? 5 : (F == WeightFmt::kFp8Block ? __ffs(w.block_in) - 1 : 0);

  // The lane's weight row per n8 tile in the tile being issued (null past N); window w_in's run is
  // at byte offset run_byte(w_in) of it.
  const uint8_t* wrow[NT];
  auto set_wrow = [&](int i) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int64_t n = n_base_of(i) + nt * 8 + g;
      wrow[nt] = n < N ? w.w + (w_row0 + n) * w.row_bytes : nullptr;
    }
  };
  const int k_lane = static_cast<int>(k_begin) + c * L;
  auto run_byte = [&](int wi) {
    const int k = k_lane + wi * W;
    return F == WeightFmt::kBF16 ? 2 * k : (F == WeightFmt::kFp8Block ? k : k / 2);
  };
  uint4* my_ring = ring + warp * S * NT * 32;
  // The windows stream in order, tile after tile: the next to issue is window is_w of tile
  // is_tile. It goes to the ring slot the caller passes (kept as a rolling index in the loop: a
  // modulo per window was a visible share of the loop's instructions).
  int is_tile = 0, is_w = 0;
  auto restart_issue = [&] {
    is_tile = 0, is_w = 0;
    set_wrow(0);
  };
  auto issue = [&](int slot) {  // one commit group per window, empty past the end
    if (is_tile < n_tiles) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const bool valid = wrow[nt] != nullptr;
        // With the L2 prefetch hint: a window takes 64 of a row's bytes, so the L2 fetching the
        // whole 128-byte line makes the next window's copies L2 hits (batch 1 +10% on the H200;
        // 256-byte lines gained less).
        cp_async16_l2_128(&my_ring[(slot * NT + nt) * 32 + lane], valid ? wrow[nt] + run_byte(is_w) : w.w, valid);
      }
      if (++is_w == n_windows) {
        is_w = 0;
        if (++is_tile < n_tiles) set_wrow(is_tile);
      }
    }
    cp_async_commit();
  };
  // The first chunk's leading windows go out before anything else is loaded: they are in flight
  // while the scale codes and A are staged.
  restart_issue();
#pragma unroll
  for (int d = 0; d < S - 1; ++d) issue(d);
  // Scale codes of the warp's columns (lane = column) in each of the CTA's tiles over the span, once
  // for all row chunks.
  const int n_codes = sh.n_codes;
  uint8_t* my_codes = codes + warp * tpc * 32 * n_codes;
  for (int i = 0; i < n_tiles && F != WeightFmt::kBF16; ++i) {
    const int64_t n = n_base_of(i) + lane;
    if (lane < NT * 8 && n < N) {
      const uint8_t* srow = F == WeightFmt::kFp8Block
                                ? w.scale + ((w_row0 + n) / w.block_out) * w.scale_cols
                                : w.scale + (w_row0 + n) * w.scale_cols;
      // A column's codes over the span are contiguous: copied asynchronously with the widest
      // aligned copies (they land with the first chunk's A span, in the same commit group).
      const int n_valid = static_cast<int>(k_span >> in_shift);
      const uint8_t* src = srow + (k_begin >> in_shift);
      uint8_t* dst = my_codes + (i * 32 + lane) * n_codes;
      const uintptr_t align =
          reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | n_valid;
      if (align % 16 == 0) {
        for (int i = 0; i < n_valid; i += 16) cp_async16(dst + i, src + i, true);
      } else if (align % 4 == 0) {
        for (int i = 0; i < n_valid; i += 4) cp_async4(dst + i, src + i);
      } else {
        for (int i = 0; i < n_valid; ++i) dst[i] = src[i];
      }
    }
  }

  // Output element e of accumulator tile i of this lane: row in the chunk and column (n_base: the
  // warp's first column in the CTA tile). (Transposed: tile i = column pair i / TT, row tile i % TT.)
  auto out_row = [&](int i, int e) {
    return kTr ? (i % TT) * 8 + 2 * c + (e & 1) : (i / NT) * 16 + g + (e >= 2 ? 8 : 0);
  };
  auto out_col = [&](int64_t n_base, int i, int e) -> int64_t {
    return kTr ? n_base + (2 * (i / TT) + (e >= 2 ? 1 : 0)) * 8 + g : n_base + (i % NT) * 8 + 2 * c + (e & 1);
  };
  auto store_c = [&](int64_t row, int64_t col, float v) { store_out(C, p.c_bf16, row * ldc + col, v); };
  const int64_t col_off = static_cast<int64_t>(p.experts ? 0 : group) * p.N;

  griddep_wait();  // A, the row maps, partials and counters come from / are shared with earlier kernels
  // Rows in chunks of kChunk (an expert can hold more rows than one chunk at larger batch: the
  // weights are streamed again per chunk, mostly from L2).
  for (int64_t m0 = 0; m0 < m_count; m0 += kChunk) {
    const int64_t chunk_rows = min64(kChunk, m_count - m0);
    if (m0 > 0) {
      __syncthreads();  // the previous chunk is done with a_row / c_row / sA
      restart_issue();
#pragma unroll
      for (int d = 0; d < S - 1; ++d) issue(d);  // in flight while A is staged
    }
    for (int i = threadIdx.x; i < kChunk; i += blockDim.x) {
      int32_t ar = -1, cr = -1;
      if (i < chunk_rows) {
        cr = p.experts ? p.perm[rows_begin + m0 + i] : static_cast<int32_t>(m0 + i);
        ar = p.experts ? cr / p.a_div : cr;
      }
      a_row[i] = ar;
      c_row[i] = cr;
    }
    __syncthreads();  // a_row / c_row

    // Stage the A span: columns [k_begin, k_begin + k_span) of the first a_rows rows (zero where
    // a row is absent); rows >= a_rows are never present and read as zero below.
    const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
    const int64_t a_col0 = (p.experts ? 0 : static_cast<int64_t>(group) * p.K) + k_begin;
    const bool a_vec =
        (p.lda % 8 == 0) && (a_col0 % 8 == 0) && (reinterpret_cast<uintptr_t>(A) % 16 == 0);
    const int chunks = static_cast<int>(k_span / 8);  // 32-bit: spc R / 8 is small
    if (p.a_quant_block > 0) {
      // Rows 0 .. chunk_rows - 1 of the chunk are the present ones.
      const int present = static_cast<int>(min64(chunk_rows, sh.a_rows));
      stage_quantised_a(p, a_row, a_col0, a_vec, sh.a_rows, present, chunks, sA, LDA);
    } else {
      stage_plain_a(p, a_row, a_col0, a_vec, sh.a_rows, chunks, sA, LDA);
    }
    // The scale codes (first chunk) and the A span arrive in one group, after the leading weight
    // windows issued before them: one memory latency for all three.
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float acc[kTiles][4] = {}, total[kTiles][4] = {};
    constexpr int kMt = kTr ? TT : MT;
    bool lo_row[kMt], hi_row[kMt];  // staged rows g / g + 8 of each m16 tile (kTr: row 8 tt + g)
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      lo_row[mt] = (kTr ? mt * 8 : mt * 16) + g < sh.a_rows;
      hi_row[mt] = !kTr && mt * 16 + g + 8 < sh.a_rows;
    }
    // Ring slot of window wi (wi % S), the CTA tile and window within it (wt, w_in) and the
    // windows left in its sub-range, kept as counters.
    int slot = 0, sub_left = win_per_sub, sub = sub0, wt = 0, w_in = 0;
    int64_t n_base = n_base_of(0);
    const uint8_t* tile_codes = my_codes;
    for (int wi = 0; wi < n_tiles * n_windows; ++wi) {
      cp_async_wait<S - 2>();  // this lane's copies of window wi have landed
      uint4 cur[NT];
      uint8_t code[NT];  // UE8M0 scale code of each tile's run (unused for BF16)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        cur[nt] = my_ring[(slot * NT + nt) * 32 + lane];
        const int k_rel = c * L + w_in * W;
        code[nt] = F == WeightFmt::kBF16 ? 0 : tile_codes[(nt * 8 + g) * n_codes + (k_rel >> in_shift)];
      }
      issue(slot == 0 ? S - 1 : slot - 1);  // window wi + S - 1 refills the slot consumed last iteration
      slot = slot + 1 == S ? 0 : slot + 1;
      // The window's mma steps, with weights decoded by `decode(nt, j, b0, b1)`. One 16-byte A
      // read per row serves two steps (logical k 2c, 2c+1 and 2c+8, 2c+9 of steps j and j + 1 are
      // the 8 consecutive elements at kk).
      auto window = [&](auto decode) {
        if constexpr (kTr) {
#pragma unroll
          for (int j = 0; j < L / 4; j += 2) {
            const int kk = w_in * W + c * L + 4 * j;  // within the span
            uint4 x[TT];                              // rows 8 tt + g, elements kk .. kk + 7
#pragma unroll
            for (int tt = 0; tt < TT; ++tt) {
              x[tt] = make_uint4(0, 0, 0, 0);
              if (lo_row[tt]) x[tt] = *reinterpret_cast<const uint4*>(&sA[(tt * 8 + g) * LDA + kk]);
            }
#pragma unroll
            for (int jj = 0; jj < 2; ++jj) {
#pragma unroll
              for (int i = 0; i < NT / 2; ++i) {
                uint32_t w0[2], w1[2];  // columns g of n8 tiles 2i and 2i + 1
                decode(2 * i, j + jj, w0[0], w0[1]);
                decode(2 * i + 1, j + jj, w1[0], w1[1]);
                const uint32_t af[4] = {w0[0], w1[0], w0[1], w1[1]};
#pragma unroll
                for (int tt = 0; tt < TT; ++tt) {
                  // b0, b1: logical k 2c, 2c+1 and 2c+8, 2c+9 of the row (as a0 / a2 above).
                  const uint32_t bx[2] = {jj ? x[tt].z : x[tt].x, jj ? x[tt].w : x[tt].y};
                  mma_bf16_16816(acc[i * TT + tt], af, bx);
                }
              }
            }
          }
        } else {
#pragma unroll
          for (int j = 0; j < L / 4; j += 2) {
            const int kk = w_in * W + c * L + 4 * j;  // within the span
            uint4 lo[MT], hi[MT];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              lo[mt] = hi[mt] = make_uint4(0, 0, 0, 0);
              if (lo_row[mt]) lo[mt] = *reinterpret_cast<const uint4*>(&sA[(mt * 16 + g) * LDA + kk]);
              if (hi_row[mt]) hi[mt] = *reinterpret_cast<const uint4*>(&sA[(mt * 16 + g + 8) * LDA + kk]);
            }
#pragma unroll
            for (int jj = 0; jj < 2; ++jj) {
              uint32_t bf[NT][2];
#pragma unroll
              for (int nt = 0; nt < NT; ++nt) decode(nt, j + jj, bf[nt][0], bf[nt][1]);
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) {
                // a0..a3: logical k 2c, 2c+1 of rows g, g + 8, then 2c+8, 2c+9 of both.
                const uint32_t af[4] = {jj ? lo[mt].z : lo[mt].x, jj ? hi[mt].z : hi[mt].x,
                                        jj ? lo[mt].w : lo[mt].y, jj ? hi[mt].w : hi[mt].y};
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(acc[mt * NT + nt], af, bf[nt]);
              }
            }
          }
        }
      };
      // Scales once per run (not per quad), and one warp-wide branch per window for the FP8 codes
      // the fast decoder does not cover (rare); both paths give decode_quad's bits.
      uint32_t scale[NT];
      bool exact = true;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        scale[nt] = quad_scale<F>(code[nt]);
        exact = exact && quad_scale_exact<F>(code[nt]);
      }
      // Warp-uniform: the lanes of an mma.sync must run the same instruction.
      if (__all_sync(0xffffffffu, exact)) {
        window([&](int nt, int j, uint32_t& b0, uint32_t& b1) { decode_quad_scaled<F>(cur[nt], scale[nt], j, b0, b1); });
      } else {
        window([&](int nt, int j, uint32_t& b0, uint32_t& b1) { decode_quad<F>(cur[nt], code[nt], j, b0, b1); });
      }
      // End of a sub-range: fold it (whole K here) or hand it to the partials.
      const bool tile_end = w_in + 1 == n_windows;
      if (--sub_left == 0 || tile_end) {
#pragma unroll
        for (int i = 0; i < kTiles; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (nsub == P) {
              total[i][e] += acc[i][e];  // ((0 + s_0) + s_1) + ...: the canonical fold
            } else {
              const int r = out_row(i, e);
              const int64_t n = out_col(n_base, i, e);
              if (r < chunk_rows && n < N)
                partial[(static_cast<int64_t>(sub) * p.M + c_row[r]) * ldc + col_off + n] = acc[i][e];
            }
            acc[i][e] = 0.0f;
          }
        sub_left = win_per_sub;
        ++sub;
      }
      // End of a CTA tile: its outputs (all of K here), then the next tile from its first sub-range.
      if (tile_end) {
        if (nsub == P) {
#pragma unroll
          for (int i = 0; i < kTiles; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int r = out_row(i, e);
              const int64_t n = out_col(n_base, i, e);
              if (r < chunk_rows && n < N) store_c(c_row[r], col_off + n, total[i][e]);
              total[i][e] = 0.0f;
            }
        }
        w_in = 0;
        ++wt;
        n_base = n_base_of(wt);
        tile_codes += 32 * n_codes;
        sub = sub0;
      } else {
        ++w_in;
      }
    }
    cp_async_wait<0>();
  }  // row chunks
  cp_async_wait<0>();  // no copy outlives the CTA (none pending unless there were no rows)
  if (nsub == P) return;
  if (p.tile_counters == nullptr) return;  // gemv_reduce_kernel folds the partials
  // For each of its tiles, the last of the tile's CTAs to finish folds the partials in sub-range
  // order, then re-arms the counter for the next launch.
  const int64_t tiles_total = (p.N + kCtaCols - 1) / kCtaCols + (p.n_sets > 1 ? (p.N1 + kCtaCols - 1) / kCtaCols : 0);
  for (int t = 0; t < n_tiles; ++t) {
    int32_t* counter = p.tile_counters + static_cast<int64_t>(blockIdx.z) * tiles_total + tile0 + t;
    if (!last_to_arrive(counter, static_cast<int>(gridDim.y))) continue;
    const int64_t bx = bx0 + t;
    const int64_t col0 = col_off + bx * kCtaCols;
    const int64_t n_cols = min64(kCtaCols, N - bx * kCtaCols);
    // Output i of the tile: row (through the expert's permutation) i / n_cols, column col0 + i % n_cols.
    auto at = [&](int64_t i) {
      const int64_t row = p.experts ? p.perm[rows_begin + i / n_cols] : i / n_cols;
      return row * ldc + col0 + i % n_cols;
    };
    fold_in_order(partial, p.M * ldc, P, m_count * n_cols, at,  // the canonical fold
                  [&](int64_t off, float v) { store_out(C, p.c_bf16, off, v); });
    if (threadIdx.x == 0) *counter = 0;
  }
}

// C = ((0 + partial[0]) + partial[1]) + ... over the P sub-ranges, for the rows the partials
// cover — all M rows (dense) or the expert pairs (expert mode: every pair row is written once) —
// and their first `cols` columns (N, or the groups' N each; columns cols .. ldc - 1 of C are not
// this launch's). A thread per output, its P loads in flight together.
__global__ void gemv_reduce_kernel(const float* partial, int P, int64_t M, int64_t cols, int64_t ldc, void* C,
                                   bool c_bf16) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * cols) return;
  const int64_t row = i / cols, off = row * ldc + (i - row * cols);
  store_out(C, c_bf16, off, sum_in_order(partial + off, M * ldc, P));
}

}  // namespace deepinfer::kernels
