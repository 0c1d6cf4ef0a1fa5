// Row-wise and elementwise kernels: embedding gather, stream broadcast, RMSNorm (optionally with its
// output FP8 fake-quantised), add/convert/fill, SwiGLU with clamp (optionally quantised), row gather, tail RoPE (interleaved pairs), FP8 block fake-quant and the
// Hadamard + FP4 fake-quant. Activation type T is float or bfloat16; math is F32.
#pragma once

#include "kernels/common/device_utils.cuh"
#include "kernels/gemm/act_quant.cuh"

namespace deepinfer::kernels {

// ---- embedding / broadcast / gather --------------------------------------------------------
// Row copies: block (row, chunk of kRowCopyChunk columns), 256 threads, every load of the chunk
// issued before any store (a plain loop serialises on possible aliasing: a decode step copies
// one 16K-wide row, and one block walking it took 13 us).
inline constexpr int kRowCopyThreads = 256, kRowCopyPer = 8;
inline constexpr int64_t kRowCopyChunk = kRowCopyThreads * kRowCopyPer;

template <typename Tin>
__device__ __forceinline__ void load_row_chunk(const Tin* src, int64_t n, float (&v)[kRowCopyPer]) {
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kRowCopyChunk + threadIdx.x;
#pragma unroll
  for (int i = 0; i < kRowCopyPer; ++i) {
    const int64_t c = c0 + i * kRowCopyThreads;
    v[i] = c < n ? to_f32(src[c]) : 0.0f;
  }
}
template <typename Tout>
__device__ __forceinline__ void store_row_chunk(Tout* dst, int64_t n, const float (&v)[kRowCopyPer]) {
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kRowCopyChunk + threadIdx.x;
#pragma unroll
  for (int i = 0; i < kRowCopyPer; ++i) {
    const int64_t c = c0 + i * kRowCopyThreads;
    if (c < n) dst[c] = from_f32<Tout>(v[i]);
  }
}

template <typename Tin, typename Tout>
__global__ void __launch_bounds__(kRowCopyThreads)
    embed_gather_kernel(const int32_t* ids, const Tin* table, Tout* out, int64_t D) {
  pdl_prologue();
  const int64_t t = blockIdx.x;
  float v[kRowCopyPer];
  load_row_chunk(table + static_cast<int64_t>(ids[t]) * D, D, v);
  store_row_chunk(out + t * D, D, v);
}

template <typename T>
__global__ void __launch_bounds__(kRowCopyThreads) broadcast_streams_kernel(const T* x, T* out, int64_t D, int hc) {
  pdl_prologue();
  const int64_t t = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kRowCopyChunk + threadIdx.x;
  T v[kRowCopyPer];
#pragma unroll
  for (int i = 0; i < kRowCopyPer; ++i) {
    const int64_t c = c0 + i * kRowCopyThreads;
    if (c < D) v[i] = x[t * D + c];
  }
  for (int s = 0; s < hc; ++s) {
#pragma unroll
    for (int i = 0; i < kRowCopyPer; ++i) {
      const int64_t c = c0 + i * kRowCopyThreads;
      if (c < D) out[(t * hc + s) * D + c] = v[i];
    }
  }
}

// Block i copies one row: gather out[i] = x[rows[i]], scatter out[rows[i]] = x[i].
template <bool kScatter, typename Tin, typename Tout>
__global__ void __launch_bounds__(kRowCopyThreads)
    indexed_rows_kernel(const Tin* x, const int32_t* rows, Tout* out, int64_t n) {
  pdl_prologue();
  const int64_t i = blockIdx.x, r = rows[i];
  float v[kRowCopyPer];
  load_row_chunk(x + (kScatter ? i : r) * n, n, v);
  store_row_chunk(out + (kScatter ? r : i) * n, n, v);
}

// ---- RMSNorm: one block per row ------------------------------------------------------------
template <typename Tin, typename Tout, typename Tw>
__global__ void rms_norm_kernel(const Tin* x, const Tw* weight, Tout* out, int64_t n, float eps) {
  pdl_prologue();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  float ss = 0.0f;
  // Unrolled so a thread's loads are in flight together (a decode step normalises one row per
  // block: a serial chain of loads was most of its time); the summation order is unchanged.
#pragma unroll 8
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const float v = to_f32(x[r * n + c]);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(n) + eps);
#pragma unroll 8
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const float w = weight == nullptr ? 1.0f : to_f32(weight[c]);
    out[r * n + c] = from_f32<Tout>(to_f32(x[r * n + c]) * inv * w);
  }
}

// Rows of kRmsWarpMaxN < n <= kRmsRowMaxN (the 4096-wide hidden norms): rms_norm_kernel's
// operations in its order (thread-strided squares, one block_sum, (x * inv) * w), with every load
// of the row and the weight issued at once and x kept in registers for the output — one round of
// memory latency instead of a serial chain and a second pass (decode normalises single rows).
inline constexpr int kRmsRowPer = 16;
inline constexpr int64_t kRmsRowMaxN = 256 * kRmsRowPer;
template <typename Tin, typename Tout, typename Tw>
__global__ void __launch_bounds__(256) rms_norm_row_kernel(const Tin* x, const Tw* weight, Tout* out, int64_t n,
                                                           float eps) {
  pdl_prologue();  // a GEMM that follows may start streaming its weights
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  float v[kRmsRowPer], w[kRmsRowPer];
#pragma unroll
  for (int j = 0; j < kRmsRowPer; ++j) {
    const int64_t c = threadIdx.x + 256 * j;
    v[j] = c < n ? to_f32(x[r * n + c]) : 0.0f;
    w[j] = c < n && weight != nullptr ? to_f32(weight[c]) : 1.0f;
  }
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kRmsRowPer; ++j)
    if (threadIdx.x + 256 * j < n) ss += v[j] * v[j];
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(n) + eps);
#pragma unroll
  for (int j = 0; j < kRmsRowPer; ++j) {
    const int64_t c = threadIdx.x + 256 * j;
    if (c < n) out[r * n + c] = from_f32<Tout>(v[j] * inv * w[j]);
  }
}

// Rows of at most kRmsWarpMaxN (per-head q/kv norms, compressed rows): one warp per row, eight
// rows per block — a 256-thread block per 512-wide row spent its time in block scheduling and
// reductions (0.75 ms for 8K tokens x 64 heads). The order (lane-strided sums, one butterfly) is a
// function of n alone, so the choice between the two kernels never depends on the batch.
inline constexpr int64_t kRmsWarpMaxN = 1024;
// With QJ > 0 the rows are then FP8 fake-quantised per block of 32 QJ channels as written (the
// query latent, read only by GEMMs that would quantise it so): block b is j in [QJ b, QJ (b + 1))
// of every lane, each value rounded to Tout first, then fp8_fake_quant_kernel's arithmetic — the
// bits of rms_norm followed by fp8_fake_quant. Needs n % (32 QJ) == 0 (the launcher checks).
// SPREAD (decode-sized launches): a block per row instead of a warp, every warp computing the
// row's norm (the same loads and sums: the same bits) and quantising only its own blocks b =
// warp, warp + warps, .. — one warp doing all of a 1,024-wide row's quantisation was ~2.5 us longer
// than the plain norm at batch 1 (ncu).
template <typename Tin, typename Tout, typename Tw, int QJ = 0, bool SPREAD = false>
__global__ void rms_norm_warp_kernel(const Tin* x, const Tw* weight, Tout* out, int64_t rows, int64_t n, float eps) {
  constexpr int kPer = kRmsWarpMaxN / 32;
  static_assert(kPer % (QJ > 0 ? QJ : 1) == 0, "whole quantisation blocks per lane");
  const int lane = threadIdx.x & 31;
  // The weight's loads go out before the wait for the previous kernel (no kernel writes weights),
  // then every load of the row at once (a decode step's norms are single rows: one round of
  // memory latency), then the squares summed in j order.
  float v[kPer], w[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int64_t c = lane + 32 * j;
    w[j] = c < n && weight != nullptr ? to_f32(weight[c]) : 1.0f;
  }
  pdl_prologue();  // a GEMM that follows may start streaming its weights
  const int64_t r = SPREAD ? static_cast<int64_t>(blockIdx.x)
                           : static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int64_t c = lane + 32 * j;
    v[j] = c < n ? to_f32(x[r * n + c]) : 0.0f;
  }
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) ss += v[j] * v[j];
  const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(n) + eps);
  if constexpr (QJ == 0) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int64_t c = lane + 32 * j;
      if (c < n) out[r * n + c] = from_f32<Tout>(v[j] * inv * w[j]);
    }
  } else if constexpr (SPREAD) {
    const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
    for (int b = 0; b < kPer / QJ; ++b) {
      if (32 * QJ * b < n && b % warps == warp) {  // warp-uniform: this warp's whole blocks
        float o[QJ], amax = 0.0f;
#pragma unroll
        for (int i = 0; i < QJ; ++i) {
          o[i] = to_f32(from_f32<Tout>(v[QJ * b + i] * inv * w[QJ * b + i]));  // as rms_norm writes it
          amax = fmaxf(amax, fabsf(o[i]));
        }
        const float sc = act_quant_scale(warp_max(amax));
#pragma unroll
        for (int i = 0; i < QJ; ++i) out[r * n + lane + 32 * (QJ * b + i)] = from_f32<Tout>(act_quant_value(o[i], sc));
      }
    }
  } else {
    // Every block's amax first (8 independent butterflies the compiler can interleave), then the
    // stores: block by block (a butterfly, then its stores, then the next) the fused launch took
    // ~3 us longer than the plain norm (ncu, batch 8), one warp per row being pure latency.
    float s[kPer / QJ];
#pragma unroll
    for (int b = 0; b < kPer / QJ; ++b) {
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < QJ; ++i) {
        v[QJ * b + i] = to_f32(from_f32<Tout>(v[QJ * b + i] * inv * w[QJ * b + i]));  // as rms_norm writes it
        amax = fmaxf(amax, fabsf(v[QJ * b + i]));
      }
      s[b] = act_quant_scale(warp_max(amax));  // blocks past n: padding, never stored
    }
#pragma unroll
    for (int b = 0; b < kPer / QJ; ++b) {
      if (32 * QJ * b < n) {  // warp-uniform: whole blocks only
#pragma unroll
        for (int i = 0; i < QJ; ++i) out[r * n + lane + 32 * (QJ * b + i)] = from_f32<Tout>(act_quant_value(v[QJ * b + i], s[b]));
      }
    }
  }
}

// Query / KV row preparation in one launch, for the V4 head geometry (rows of N = 512, the last
// NR = 64 dims rotated; compile-time, so the unrolled loops hold only the rotated and quantised
// slots): RMSNorm of each row, RoPE of its tail, then with QJ > 0 FP8 fake-quant of dims
// [0, quant_dims) in blocks of 32 QJ. One warp per row (token = row / heads); lane-strided
// elements as rms_norm_warp_kernel, so a RoPE pair is lanes l, l ^ 1 of one j (both compute its
// angle) and a quantisation block is QJ consecutive j. Every step is its own kernel's arithmetic on
// the values that kernel would read (rounded to T in between), so the result is bitwise rms_norm +
// rope + fp8_fake_quant.
inline constexpr int kNormRopeWidth = 512, kNormRopeDims = 64;
template <typename T, typename Tw, int QJ>
__global__ void norm_rope_kernel(T* x, const Tw* weight, int64_t rows, int64_t heads, float eps,
                                 const int32_t* positions, const float* inv_freq, float sign, int64_t quant_dims) {
  constexpr int N = kNormRopeWidth, kPer = N / 32, kTail = (N - kNormRopeDims) / 32;
  static_assert(N <= kRmsWarpMaxN && (N - kNormRopeDims) % 32 == 0, "one warp per row, j-aligned tail");
  const int lane = threadIdx.x & 31;
  float v[kPer], w[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) w[j] = weight != nullptr ? to_f32(weight[lane + 32 * j]) : 1.0f;  // before the wait
  pdl_prologue();
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  T* row = x + r * N;
#pragma unroll
  for (int j = 0; j < kPer; ++j) v[j] = to_f32(row[lane + 32 * j]);
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) ss += v[j] * v[j];
  const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(N) + eps);
#pragma unroll
  for (int j = 0; j < kPer; ++j) v[j] = to_f32(from_f32<T>(v[j] * inv * w[j]));  // as rms_norm stores it
  const float pos = static_cast<float>(positions[r / heads]);
  const bool odd = (lane & 1) != 0;
#pragma unroll
  for (int j = kTail; j < kPer; ++j) {
    const float other = __shfl_xor_sync(0xffffffffu, v[j], 1);
    float s, c;
    rope_sincos(pos, inv_freq[(32 * (j - kTail) + lane) >> 1], sign, s, c);
    v[j] = to_f32(from_f32<T>(rope_pair(odd ? other : v[j], odd ? v[j] : other, s, c, odd)));
  }
  if constexpr (QJ > 0) {
#pragma unroll
    for (int j0 = 0; j0 < kPer; j0 += QJ) {
      if (32 * j0 < quant_dims) {  // warp-uniform; quant_dims is a multiple of 32 QJ
        float amax = 0.0f;
#pragma unroll
        for (int j = j0; j < j0 + QJ; ++j) amax = fmaxf(amax, fabsf(v[j]));
        const float s = act_quant_scale(warp_max(amax));  // fp8_fake_quant_kernel's quantiser
#pragma unroll
        for (int j = j0; j < j0 + QJ; ++j) v[j] = act_quant_value(v[j], s);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) row[lane + 32 * j] = from_f32<T>(v[j]);
}

// ---- elementwise ---------------------------------------------------------------------------
template <typename Ta, typename Tb, typename Tout>
__global__ void add_kernel(const Ta* a, const Tb* b, Tout* out, int64_t n) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = from_f32<Tout>(to_f32(a[i]) + to_f32(b[i]));
}

template <typename Tin, typename Tout>
__global__ void convert_kernel(const Tin* x, Tout* out, int64_t n) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = from_f32<Tout>(to_f32(x[i]));
}

template <typename T>
__global__ void fill_kernel(T* out, T value, int64_t n) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

__device__ __forceinline__ float swiglu_value(float gi, float ui, float limit) {
  if (limit > 0.0f) {
    gi = fminf(gi, limit);
    ui = fminf(fmaxf(ui, -limit), limit);
  }
  return gi / (1.0f + expf(-gi)) * ui;
}
template <typename Tg, typename Tu, typename Tout>
__global__ void swiglu_kernel(const Tg* g, const Tu* u, Tout* out, int64_t n, float limit) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = from_f32<Tout>(swiglu_value(to_f32(g[i]), to_f32(u[i]), limit));
}
// SwiGLU with its BF16 output FP8 fake-quantised per 128 channels (the shared expert's hidden, read
// only by its down projection): swiglu_kernel's value rounded to BF16, then the vectorised
// act_quant kernel's step — one warp per 128-channel block, 4 consecutive channels per lane; 8
// warps per CTA over the flat [rows][blocks] array (rows are whole blocks: the launcher checks the
// width, and 4-element alignment).
template <typename Tg, typename Tu>
__global__ void __launch_bounds__(256)
    swiglu_quant_kernel(const Tg* g, const Tu* u, __nv_bfloat16* out, int64_t blocks, float limit) {
  pdl_prologue();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (b >= blocks) return;
  const int64_t off = b * 128 + (threadIdx.x & 31) * 4;
  const ActVec<Tg, 4> gv = *reinterpret_cast<const ActVec<Tg, 4>*>(g + off);
  const ActVec<Tu, 4> uv = *reinterpret_cast<const ActVec<Tu, 4>*>(u + off);
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = to_f32(__float2bfloat16_rn(swiglu_value(to_f32(gv.v[i]), to_f32(uv.v[i]), limit)));
  act_quant_lane_store<4>(v, out + off);
}

// ---- RoPE on the last n_rope dims of each head ---------------------------------------------
// grid: (rows, head groups of kRopeHeadsPerBlock); block threads stride over heads x pairs.
inline constexpr int kRopeHeadsPerBlock = 8;
template <typename T>
__global__ void rope_kernel(T* x, const int32_t* positions, const float* inv_freq, int64_t heads, int64_t width,
                            int n_rope, float sign) {
  pdl_prologue();
  const int64_t n = blockIdx.x;
  const int half = n_rope / 2;
  const float pos = static_cast<float>(positions[n]);
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * kRopeHeadsPerBlock;
  const int64_t nh = min64(kRopeHeadsPerBlock, heads - h0);
  for (int64_t k = threadIdx.x; k < nh * half; k += blockDim.x) {
    const int64_t h = h0 + k / half;
    const int i = static_cast<int>(k % half);
    float s, c;
    rope_sincos(pos, inv_freq[i], sign, s, c);
    T* p = x + (n * heads + h) * width + (width - n_rope) + 2 * i;
    const float x0 = to_f32(p[0]), x1 = to_f32(p[1]);
    p[0] = from_f32<T>(rope_pair(x0, x1, s, c, false));
    p[1] = from_f32<T>(rope_pair(x0, x1, s, c, true));
  }
}

// ---- FP8 fake-quant of dims [0, n_dims) of each row, blocks of `block` -----------------------
// grid: (rows, n_blocks); one warp per block of the row.
template <typename T>
__global__ void fp8_fake_quant_kernel(T* x, int64_t width, int64_t n_dims, int block) {
  pdl_prologue();
  const int64_t r = blockIdx.x;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * block;
  const int lane = threadIdx.x;
  float amax = 0.0f;
  for (int64_t c = b0 + lane; c < min64(b0 + block, n_dims); c += 32) amax = fmaxf(amax, fabsf(to_f32(x[r * width + c])));
  const float s = act_quant_scale(warp_max(amax));
  for (int64_t c = b0 + lane; c < min64(b0 + block, n_dims); c += 32) {
    T* p = x + r * width + c;
    *p = from_f32<T>(act_quant_value(to_f32(*p), s));
  }
}

// ---- normalised Walsh-Hadamard + FP4 fake-quant (blocks of 32), one block per row ------------
template <typename T>
__global__ void hadamard_fp4_kernel(T* x, int n) {
  pdl_prologue();
  extern __shared__ float sh[];
  const int64_t r = blockIdx.x;
  for (int c = threadIdx.x; c < n; c += blockDim.x) sh[c] = to_f32(x[r * n + c]);
  __syncthreads();
  for (int len = 1; len < n; len <<= 1) {
    for (int k = threadIdx.x; k < n / 2; k += blockDim.x) {
      const int i = (k / len) * (len << 1) + (k % len);
      const float a = sh[i], b = sh[i + len];
      sh[i] = a + b;
      sh[i + len] = a - b;
    }
    __syncthreads();
  }
  const float norm = rsqrtf(static_cast<float>(n));
  for (int c = threadIdx.x; c < n; c += blockDim.x) sh[c] *= norm;
  __syncthreads();
  // One warp per 32-block.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int b = warp; b < n / 32; b += n_warps) {
    const float v = sh[b * 32 + lane];
    const float amax = warp_max(fmaxf(fabsf(v), 6.0f * 1.1754943508222875e-38f));
    const float s = pow2_scale(amax, 6.0f);
    x[r * n + b * 32 + lane] = from_f32<T>(round_e2m1(v / s) * s);
  }
}

// ---- the same transform, one warp per row (rows of n = 32 E, E <= 8: the indexer's 128) -------
// Lane l holds elements l E .. l E + E - 1. Level `len` pairs (j, j + len) as hadamard_fp4_kernel
// does: inside the lane while len < E, else with lane l ^ (len / E) through a shuffle — the lower
// lane keeps a + b, the upper a - b, the same two operations on the same operands — so every value
// is the block kernel's bit for bit; then the same normalisation and, per 32-block (32 / E lanes),
// the same maximum (exact in any order), scale and rounding. No shared memory and no barrier:
// the block kernel (128 threads per 128-wide row, 9 barriers) took ~0.47 ms per launch in an 8K
// prefill (524,288 rows of the CSA layer's index queries).
inline constexpr int kHadamardWarpRows = 8;  // rows (one warp each) per block
inline constexpr int kHadamardWarpMaxE = 8;  // n <= 256

// E consecutive elements of a row at p (E sizeof(T) bytes, aligned to that or 16 bytes).
template <int E, typename T>
__device__ __forceinline__ void load_row_part(const T* p, float (&v)[E]) {
  if constexpr (E == 8) {
    load8_f32(p, v);
  } else if constexpr (sizeof(T) == 2 && E % 2 == 0) {
    uint32_t w[E / 2];
    if constexpr (E == 4) {
      const uint2 q = *reinterpret_cast<const uint2*>(p);
      w[0] = q.x, w[1] = q.y;
    } else {
      w[0] = *reinterpret_cast<const uint32_t*>(p);
    }
#pragma unroll
    for (int i = 0; i < E / 2; ++i) v[2 * i] = __uint_as_float(w[i] << 16), v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) v[i] = to_f32(p[i]);
  }
}

// The E values to p as T (rounded to nearest, as from_f32), in one vector store where 2-byte.
template <int E, typename T>
__device__ __forceinline__ void store_row_part(T* p, const float (&v)[E]) {
  if constexpr (sizeof(T) == 2 && E % 2 == 0) {
    uint32_t w[E / 2];
#pragma unroll
    for (int i = 0; i < E / 2; ++i) {
      const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
      w[i] = *reinterpret_cast<const uint32_t*>(&b);
    }
    if constexpr (E == 8) {
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    } else if constexpr (E == 4) {
      *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
    } else {
      *reinterpret_cast<uint32_t*>(p) = w[0];
    }
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) p[i] = from_f32<T>(v[i]);
  }
}

template <typename T, int E>
__global__ void __launch_bounds__(32 * kHadamardWarpRows) hadamard_fp4_warp_kernel(T* x, int64_t rows) {
  static_assert(E >= 1 && E <= kHadamardWarpMaxE && (E & (E - 1)) == 0, "32 E elements per row");
  pdl_prologue();
  constexpr int n = 32 * E, G = 32 / E;  // row width; lanes per 32-block
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kHadamardWarpRows + (threadIdx.x >> 5);
  if (r >= rows) return;  // warp-uniform
  T* p = x + r * n + lane * E;
  float v[E];  // elements lane E + i
  load_row_part<E>(p, v);
#pragma unroll
  for (int len = 1; len < n; len <<= 1) {
    if (len < E) {
#pragma unroll
      for (int i = 0; i < E; ++i) {
        if ((i & len) != 0) continue;
        const float a = v[i], b = v[i + len];
        v[i] = a + b;
        v[i + len] = a - b;
      }
    } else {
      const int m = len / E;
      const bool upper = (lane & m) != 0;  // holds b (element j + len); the partner holds a
#pragma unroll
      for (int i = 0; i < E; ++i) {
        const float o = __shfl_xor_sync(0xffffffffu, v[i], m);
        v[i] = upper ? o - v[i] : v[i] + o;
      }
    }
  }
  const float norm = rsqrtf(static_cast<float>(n));
  float amax = 6.0f * 1.1754943508222875e-38f;
#pragma unroll
  for (int i = 0; i < E; ++i) {
    v[i] *= norm;
    amax = fmaxf(amax, fabsf(v[i]));
  }
#pragma unroll
  for (int o = 1; o < G; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float s = pow2_scale(amax, 6.0f);
#pragma unroll
  for (int i = 0; i < E; ++i) v[i] = round_e2m1(v[i] / s) * s;
  store_row_part<E>(p, v);
}

}  // namespace deepinfer::kernels
