// Manifold-constrained hyper-connection kernels (model_v4_flash.md §4.2, §4.10).
// hc_mix_partial: split-K partial products of the flattened streams with the mixing matrix plus
// partial sums of squares; grid (T, n_split), each block owns one K chunk, partials are reduced by
// hc_pre_finalize / hc_head_finalize in split order (fixed, so results are batch invariant).
// hc_pre_finalize: one block per token — mix logits, pre/post, Sinkhorn comb (warp 0; at decode
// sizes a second block per token), and the collapsed input u = sum_i pre_i X_i (the other warps). hc_post: out[t,k] = post_k o + sum_j comb[j,k] X_j.
#pragma once

#include <type_traits>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/mma_utils.cuh"
#include "kernels/norm/elementwise.cuh"

namespace deepinfer::kernels {

// Per (token, split): thread i accumulates its k = k0 + i + 256 j in j order, the 32 lanes of a
// warp are summed by warp_sum's butterfly, the 8 warp sums in warp order — the canonical order,
// a function of K only. A block computes CG of the N mix columns (a column's partial is the same
// chain of FMAs whichever block runs it; block z = 0 also the sum of squares): N / CG times the
// blocks for decode-sized T, where 16 splits alone leave the GPU idle behind one memory latency
// per k step, and CG = N for prefill (each x element loaded once). Two k steps' loads are issued
// before their FMAs (which still run in k order). The lane sums run from shared memory, one
// thread per (warp, column) adding its 32 values with the butterfly's pairing (v_i + v_{i+o} for
// o = 16 .. 1: lane 0's result, which every lane holds) — a fifth of the instructions of 5 shuffle
// rounds per column per warp. TPB > 1 (prefill; launch_hc_mix_n picks it): a block takes TPB
// consecutive tokens, each mixing-matrix value loaded once for all of them (one-token blocks
// re-read a 96 KB slice of it from L2 per (token, split)); every token's FMA chain and reduction
// are the one-token block's, so the bits do not change.
inline constexpr int kHcMixThreads = 256, kHcMixWarps = kHcMixThreads / 32;

// One warp's 32 thread partials of one column (v32: 16-byte aligned, in lane order) summed with
// warp_sum's butterfly pairing — v_i + v_{i+o} for o = 16, 8, 4, 2, 1, lane 0's result — from
// shared memory, every index a constant. Both mixing kernels reduce through it.
__device__ __forceinline__ float hc_warp_partial_sum(const float* v32) {
  float v[32];
#pragma unroll
  for (int i = 0; i < 32; i += 4) {
    const float4 q = *reinterpret_cast<const float4*>(v32 + i);
    v[i] = q.x, v[i + 1] = q.y, v[i + 2] = q.z, v[i + 3] = q.w;
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] += v[i + 16];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] += v[i + 8];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] += v[i + 4];
#pragma unroll
  for (int i = 0; i < 2; ++i) v[i] += v[i + 2];
  v[0] += v[1];
  return v[0];
}

// One element of hc_post's output, post_k o + sum_j comb[j][k] X_j: the product, then the FMAs in
// j order, each rounding explicit, so every kernel that computes it (hc_post, its vector form and
// the mixing pass that folds it in) gets the same bits.
__device__ __forceinline__ float hc_post_value(float pk, float o, const float* cj, const float* xj, int hc) {
  float acc = __fmul_rn(pk, o);
  for (int j = 0; j < hc; ++j) acc = __fmaf_rn(cj[j], xj[j], acc);
  return acc;
}

// hc_post folded into the next mixing pass (hc_mix_partial_kernel with POST): the pass computes the
// new streams out = hc_post(o, x, post, comb) element by element where it would load them, mixes
// those values (as rounded to the stream dtype) and the blocks of column group 0 store them.
template <typename T, typename To>
struct HcPostFold {
  const To* o;         // [T, D] the sublayer output
  const T* x;          // [T, hc, D] the streams before the sublayer
  const float* post;   // [T, hc]
  const float* comb;   // [T, hc, hc]
  T* out;              // [T, hc, D] the new streams (the mixing pass's input)
  int64_t D;
};

template <typename T, int N, int CG, int TPB = 1, typename To = T, bool POST = false>
__global__ void __launch_bounds__(kHcMixThreads)
    hc_mix_partial_kernel(const T* x, const float* fn, float* partial, int64_t K, int64_t chunk, int64_t n_tokens,
                          HcPostFold<T, To> fold) {
  pdl_prologue();
  constexpr int C = CG + 1;  // this block's columns + the sum of squares (local column CG)
  __shared__ __align__(16) float lanes[C][kHcMixThreads + 4];  // the block's thread partials
  __shared__ float warp_sums[C][kHcMixWarps];
  const int tid = threadIdx.x;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * TPB;
  const int n_here = static_cast<int>(min64(TPB, n_tokens - t0));  // tokens of this block
  const int split = blockIdx.y, n_split = gridDim.y;
  const int c0 = CG == N ? 0 : blockIdx.z * CG;  // first mix column of the block
  const bool squares = CG == N || blockIdx.z == 0;
  const int64_t k0 = split * chunk, k1 = min64(K, k0 + chunk);
  const T* xt = x + t0 * K;
  const float* fc = fn + c0 * K;
  float acc[TPB][C];
#pragma unroll
  for (int tt = 0; tt < TPB; ++tt)
#pragma unroll
    for (int m = 0; m < C; ++m) acc[tt][m] = 0.0f;
  auto step = [&](float (&a)[C], float v, const float (&f)[CG]) {
    a[CG] += v * v;
#pragma unroll
    for (int m = 0; m < CG; ++m) a[m] += v * f[m];
  };
  auto load = [&](int64_t k, float (&f)[CG]) {
#pragma unroll
    for (int m = 0; m < CG; ++m) f[m] = c0 + m < N ? fc[m * K + k] : 0.0f;
  };
  // Token tt's x at k (0 past the block's tokens: their sums are never stored). With POST, x is
  // hc_post's output computed here (stream k / D, column k % D), stored by column group 0.
  auto xv = [&](int tt, int64_t k) -> float {
    if (tt >= n_here) return 0.0f;
    if constexpr (POST) {
      constexpr int HC = N == 24 ? 4 : (N == 15 ? 3 : (N == 8 ? 2 : 1));  // N = (2 + hc) hc
      static_assert((2 + HC) * HC == N, "POST folds hc_post into the hc_pre mix only");
      const int64_t t = t0 + tt;
      const int i = static_cast<int>(static_cast<uint32_t>(k) / static_cast<uint32_t>(fold.D));
      const int64_t c = k - i * fold.D;
      float cj[HC], xj[HC];
#pragma unroll
      for (int j = 0; j < HC; ++j) {
        cj[j] = fold.comb[(t * HC + j) * HC + i];
        xj[j] = to_f32(fold.x[(t * HC + j) * fold.D + c]);
      }
      const T v = from_f32<T>(hc_post_value(fold.post[t * HC + i], to_f32(fold.o[t * fold.D + c]), cj, xj, HC));
      if (blockIdx.z == 0) fold.out[t * K + k] = v;
      return to_f32(v);
    } else {
      return to_f32(xt[tt * K + k]);
    }
  };
  int64_t k = k0 + tid;
  for (; k + kHcMixThreads < k1; k += 2 * kHcMixThreads) {
    float f0[CG], f1[CG], v0[TPB], v1[TPB];
    load(k, f0);
    load(k + kHcMixThreads, f1);
#pragma unroll
    for (int tt = 0; tt < TPB; ++tt) v0[tt] = xv(tt, k), v1[tt] = xv(tt, k + kHcMixThreads);
#pragma unroll
    for (int tt = 0; tt < TPB; ++tt) {
      step(acc[tt], v0[tt], f0);
      step(acc[tt], v1[tt], f1);
    }
  }
  if (k < k1) {
    float f0[CG];
    load(k, f0);
#pragma unroll
    for (int tt = 0; tt < TPB; ++tt) step(acc[tt], xv(tt, k), f0);
  }
  // Each token's reduction in turn through the same shared arrays (the final sums read
  // warp_sums before the next token's first barrier, which precedes its warp_sums writes).
#pragma unroll
  for (int tt = 0; tt < TPB; ++tt) {
    if (tt >= n_here) break;  // block-uniform
#pragma unroll
    for (int m = 0; m < C; ++m) lanes[m][tid] = acc[tt][m];
    __syncthreads();
    for (int j = tid; j < C * kHcMixWarps; j += kHcMixThreads) {
      const int m = j % C, w = j / C;
      warp_sums[m][w] = hc_warp_partial_sum(&lanes[m][32 * w]);
    }
    __syncthreads();
    const bool mine = tid < CG ? c0 + tid < N : (tid == CG && squares);
    if (mine) {
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kHcMixWarps; ++w) s += warp_sums[tid][w];
      partial[((t0 + tt) * n_split + split) * (N + 1) + (tid < CG ? c0 + tid : N)] = s;
    }
  }
}

struct HcPreParams {
  int64_t D = 0;
  int hc = 0;
  int n_split = 0;
  int sinkhorn_iters = 20;
  float hc_eps = 1e-6f, norm_eps = 1e-6f;
  const float* base = nullptr;   // [n_mix]
  const float* scale = nullptr;  // [3]
  // u = RMSNorm(u) folded in (HcParamsDev::fold_norm): weight (F32 or BF16, null = 1) and epsilon.
  bool fold_norm = false;
  const void* norm = nullptr;
  bool norm_bf16 = false;
  float rms_eps = 0.0f;
  // With the fold: u's quantised copy [T, D] (HcParamsDev::uq; FP8 fake-quant per 128 channels),
  // null = none.
  __nv_bfloat16* uq = nullptr;
  // hc_pre_finalize: grid (T, 2), the token's Sinkhorn (post, comb) in block y = 1 beside its
  // collapse and norm (u) in block y = 0, instead of in warp 0 of the one block.
  bool sinkhorn_cta = false;
};

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

// hc_pre_finalize: per token, the mix columns mu (lane m sums column m of the split partials in
// split order), pre and post, and the Sinkhorn-projected comb; then u = sum_i pre_i X_i.
// Every warp computes mu and pre itself (identical arithmetic), so warps 1.. start on u at once
// while warp 0 runs Sinkhorn with lane j * hc + k holding comb[j][k]: row / column sums gather
// their hc values by shuffles and add them in index order — the reference's operations in the
// reference's order, without one thread's serial chain of 20 x 2 x hc^2 divisions.
struct HcMix {
  float col;  // lane m: mu[m] (m < n_mix) or the sum of squares (m == n_mix)
  float rho;
};
template <int HC>
__device__ inline HcMix hc_mix_columns(const float* partial, const HcPreParams& p, int64_t t) {
  constexpr int hc = HC, n_mix = (2 + hc) * hc;
  static_assert(n_mix + 1 <= 32, "one lane per mix column");
  const int lane = threadIdx.x & 31;
  float col = 0.0f;
  if (lane <= n_mix) col = sum_in_order(partial + t * p.n_split * (n_mix + 1) + lane, n_mix + 1, p.n_split);
  const float ss = __shfl_sync(0xffffffffu, col, n_mix);
  return {col, rsqrtf(ss / static_cast<float>(hc * p.D) + p.norm_eps)};
}

// pre_i = sigmoid(scale_0 rho mu_i + base_i) + eps for every stream, in every lane (lane i < hc
// computes stream i's, then the shuffles broadcast them): the collapse weights of u = sum_i pre_i X_i.
template <int HC>
__device__ __forceinline__ void hc_pre_weights(const HcMix& m, const HcPreParams& p, float (&pre)[HC]) {
  const int lane = threadIdx.x & 31;
  const float mu_pre = __shfl_sync(0xffffffffu, m.col, lane < HC ? lane : 0);
  const float mine = sigmoidf_(p.scale[0] * m.rho * mu_pre + p.base[lane < HC ? lane : 0]) + p.hc_eps;
#pragma unroll
  for (int i = 0; i < HC; ++i) pre[i] = __shfl_sync(0xffffffffu, mine, i);
}

template <int HC>
__device__ inline void hc_sinkhorn_warp(const HcMix& m, const HcPreParams& p, float* post_out, float* comb_out) {
  constexpr int hc = HC;
  const int lane = threadIdx.x & 31;
  const float mu_post = __shfl_sync(0xffffffffu, m.col, lane < hc ? hc + lane : 0);
  if (lane < hc) post_out[lane] = 2.0f * sigmoidf_(p.scale[1] * m.rho * mu_post + p.base[hc + lane]);
  const int l = lane < hc * hc ? lane : 0, j = l / hc, k = l % hc;
  const float mu_comb = __shfl_sync(0xffffffffu, m.col, 2 * hc + l);
  float v = p.scale[2] * m.rho * mu_comb + p.base[2 * hc + l];
  auto row_vals = [&](float x, float* r) {
#pragma unroll
    for (int i = 0; i < hc; ++i) r[i] = __shfl_sync(0xffffffffu, x, j * hc + i);
  };
  auto col_vals = [&](float x, float* c) {
#pragma unroll
    for (int i = 0; i < hc; ++i) c[i] = __shfl_sync(0xffffffffu, x, i * hc + k);
  };
  float r[hc];
  row_vals(v, r);
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < hc; ++i) mx = fmaxf(mx, r[i]);
  v = expf(v - mx);
  row_vals(v, r);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < hc; ++i) sum += r[i];
  v = v / sum + p.hc_eps;
  auto normalise_cols = [&] {
    float c[hc];
    col_vals(v, c);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < hc; ++i) s += c[i];
    v /= (s + p.hc_eps);
  };
  normalise_cols();
  for (int it = 0; it < p.sinkhorn_iters - 1; ++it) {
    row_vals(v, r);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < hc; ++i) s += r[i];
    v /= (s + p.hc_eps);
    normalise_cols();
  }
  if (lane < hc * hc) comb_out[lane] = v;
}

// The collapsed row u of the token, staged in shared memory when the norm is folded (one array
// per block: every call returns the same one).
__device__ __forceinline__ float* hc_u_stage() {
  __shared__ float s_u[kRmsRowMaxN];
  return s_u;
}

// The first kHcNormPre norm weights a thread of the folded norm applies (columns tid + k blockDim),
// loaded before the kernel waits for its predecessor (weights: no kernel writes them), so the
// norm's tail does not wait on a memory latency.
inline constexpr int kHcNormPre = 4;
struct HcNormWeights {
  float w[kHcNormPre];
};
__device__ __forceinline__ float hc_norm_weight(const HcPreParams& p, int64_t c) {
  if (p.norm == nullptr) return 1.0f;
  return p.norm_bf16 ? to_f32(static_cast<const __nv_bfloat16*>(p.norm)[c]) : static_cast<const float*>(p.norm)[c];
}
__device__ __forceinline__ HcNormWeights hc_norm_preload(const HcPreParams& p) {
  HcNormWeights nw;
#pragma unroll
  for (int k = 0; k < kHcNormPre; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    nw.w[k] = p.fold_norm && c < p.D ? hc_norm_weight(p, c) : 1.0f;
  }
  return nw;
}

// The folded RMS norm of one token's u row (D <= kRmsRowMaxN; the block has >= 256 threads) from
// its staged values (u as rounded to Tu): rms_norm_row_kernel's arithmetic exactly — thread i < 256
// sums the squares of columns i + 256 j in j order, block_sum (threads >= 256 add exact zeros, so
// their warps change nothing), then v * inv * w per element — so the fold gives the bits of hc_pre
// followed by rms_norm. Every thread writes columns tid + k blockDim: the first kHcNormPre with the
// preloaded weights, any further ones with their weight loads issued four at a time ahead of the
// stores (they could alias, so the compiler would not hoist them). With qrow, the row's quantised
// copy too: warp w takes 128-channel blocks w, w + warps, .., each lane 4 consecutive channels,
// their values as just written (the same products from the stage, rounded to Tu) quantised by the
// vectorised act_quant kernel's step — the bits of the separate copy and fp8_fake_quant.
// The folded norm's 1 / rms of a staged row su[0, D): thread i < 256 sums the squares of columns
// i + 256 j in j order, then block_sum (threads >= 256 add exact zeros, so a block of more warps
// changes nothing) — rms_norm_row_kernel's order. Shared by the one-CTA finalize and the cluster
// one (hc_cluster.cuh), so the two cannot drift apart.
__device__ __forceinline__ float hc_norm_inv(const float* su, const HcPreParams& p, float* scratch) {
  const int i = threadIdx.x;
  float ss = 0.0f;
  if (i < 256) {
#pragma unroll
    for (int j = 0; j < kRmsRowPer; ++j) {
      const int64_t c = i + 256 * j;
      if (c < p.D) ss += su[c] * su[c];
    }
  }
  return rsqrtf(block_sum(ss, scratch) / static_cast<float>(p.D) + p.rms_eps);
}
// 128-channel block b of the normalised row quantised into qrow by one warp (lane: 4 consecutive
// channels): the values as the norm writes them (rounded to Tu), then the vectorised act_quant
// kernel's step.
template <typename Tu>
__device__ __forceinline__ void hc_quant_block(const float* su, float inv, const HcPreParams& p, int64_t b,
                                               __nv_bfloat16* qrow) {
  const int64_t c = b * 128 + (threadIdx.x & 31) * 4;
  float v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = to_f32(from_f32<Tu>(su[c + k] * inv * hc_norm_weight(p, c + k)));
  act_quant_lane_store<4>(v, qrow + c);
}

template <typename Tu>
__device__ inline void hc_fold_norm(Tu* row, const HcPreParams& p, const HcNormWeights& nw, __nv_bfloat16* qrow) {
  __shared__ float scratch[32];
  const float* su = hc_u_stage();
  __syncthreads();  // the row is staged
  const int i = threadIdx.x;
  const float inv = hc_norm_inv(su, p, scratch);
  const int stride = blockDim.x;
#pragma unroll
  for (int k = 0; k < kHcNormPre; ++k) {
    const int64_t c = i + static_cast<int64_t>(k) * stride;
    if (c < p.D) row[c] = from_f32<Tu>(su[c] * inv * nw.w[k]);
  }
  for (int64_t c0 = i + static_cast<int64_t>(kHcNormPre) * stride; c0 < p.D; c0 += 4 * static_cast<int64_t>(stride)) {
    float w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t c = c0 + k * stride;
      w[k] = c < p.D ? hc_norm_weight(p, c) : 1.0f;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t c = c0 + k * stride;
      if (c < p.D) row[c] = from_f32<Tu>(su[c] * inv * w[k]);
    }
  }
  if (qrow != nullptr) {
    for (int64_t b = i >> 5; b < p.D / 128; b += stride >> 5) hc_quant_block<Tu>(su, inv, p, b, qrow);
  }
}

// The 16-byte-load collapse (hc_pre_finalize_kernel<.., VEC = true>; by default for prefill-sized
// launches, DEEPINFER_HC_VEC_COLLAPSE; D % 8 == 0 and x 16-byte aligned, which the launcher checks): a
// thread takes column groups g = c0, c0 + c_step, .. of 8 consecutive columns, one 16-byte load
// per stream and group (two for F32), so a prefill token's 4,096 columns are 512 groups over its
// block's 224 collapsing threads instead of ~18 one-column rounds of 4 loads. Each column is put
// with the scalar loop's value (the same products added in stream order), so the bits do not
// depend on the form.
template <typename T, int HC>
struct HcVecGroup {
  static constexpr int W = sizeof(T) == 2 ? 1 : 2;  // 16-byte words per 8 columns of a stream
  uint4 q[HC][W];
  __device__ __forceinline__ void load(const T* x, const HcPreParams& p, int64_t t, int64_t g) {
#pragma unroll
    for (int i = 0; i < HC; ++i)
#pragma unroll
      for (int w = 0; w < W; ++w) q[i][w] = reinterpret_cast<const uint4*>(x + (t * HC + i) * p.D)[W * g + w];
  }
  // Column e of the 8 of stream i (BF16 pairs in 32-bit words, or F32).
  __device__ __forceinline__ float at(int i, int e) const {
    const uint4& v = q[i][W == 1 ? 0 : e / 4];
    const int k = W == 1 ? e / 2 : e % 4;
    const uint32_t wd = k == 0 ? v.x : (k == 1 ? v.y : (k == 2 ? v.z : v.w));
    if constexpr (W == 1) return __uint_as_float((e & 1) ? (wd & 0xffff0000u) : (wd << 16));
    return __uint_as_float(wd);
  }
};
// The thread's groups from c0 on (`cur`: group c0, loaded already when the thread has one), the
// next group's loads issued before this one's arithmetic; put(c, value) as the scalar loop's.
template <int HC, typename T, typename Put>
__device__ inline void hc_collapse_vec(const T* x, const HcPreParams& p, int64_t t, int64_t c0, int64_t c_step,
                                       HcVecGroup<T, HC> cur, const float (&pre)[HC], Put put) {
  const int64_t groups = p.D / 8;
  for (int64_t g = c0; c0 >= 0 && g < groups; g += c_step) {
    HcVecGroup<T, HC> next;
    const bool more = g + c_step < groups;
    if (more) next.load(x, p, t, g + c_step);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float acc = 0.0f;
#pragma unroll
      for (int i = 0; i < HC; ++i) acc += pre[i] * cur.at(i, e);
      put(8 * g + e, acc);
    }
    if (!more) break;
    cur = next;
  }
}

// Columns per thread of the collapse loaded ahead (a decode token's 4,096 over 1,024 threads: all).
inline constexpr int kHcCollapsePre = 4;
template <int HC, bool VEC, typename T, typename Tu>
__device__ inline void hc_pre_finalize(const T* x, const float* partial, const HcPreParams& p, int64_t t, Tu* u,
                                       float* post_out, float* comb_out, const HcNormWeights& nw) {
  constexpr int hc = HC;
  const int warp = threadIdx.x >> 5;
  if (p.sinkhorn_cta && blockIdx.y == 1) {  // the Sinkhorn block: warp 0 alone
    if (warp == 0) hc_sinkhorn_warp<HC>(hc_mix_columns<HC>(partial, p, t), p, post_out + t * hc, comb_out + t * hc * hc);
    return;
  }
  // Warp 0 runs Sinkhorn while the others collapse, unless a block of its own does.
  const bool sinkhorn_warp = !p.sinkhorn_cta && blockDim.x > 32;
  const int first = sinkhorn_warp ? 32 : 0;
  const int64_t c0 = static_cast<int64_t>(threadIdx.x) - first, c_step = blockDim.x - first;
  // The thread's first kHcCollapsePre columns of every stream (VEC: its first group of 8, kept
  // raw), loaded before the mix columns (whose partial sums are the previous kernel's last
  // writes): the two load latencies overlap.
  struct ScalarCols {
    float v[kHcCollapsePre][hc];
  };
  std::conditional_t<VEC, HcVecGroup<T, HC>, ScalarCols> ahead;
  if constexpr (VEC) {
    if (c0 >= 0 && c0 < p.D / 8) ahead.load(x, p, t, c0);
  } else if (c0 >= 0) {
#pragma unroll
    for (int j = 0; j < kHcCollapsePre; ++j) {
      const int64_t c = c0 + j * c_step;
#pragma unroll
      for (int i = 0; i < hc; ++i) ahead.v[j][i] = c < p.D ? to_f32(x[(t * hc + i) * p.D + c]) : 0.0f;
    }
  }
  const HcMix m = hc_mix_columns<HC>(partial, p, t);
  if (sinkhorn_warp && warp == 0) {
    hc_sinkhorn_warp<HC>(m, p, post_out + t * hc, comb_out + t * hc * hc);
    if (p.fold_norm) hc_fold_norm(u + t * p.D, p, nw, p.uq == nullptr ? nullptr : p.uq + t * p.D);
    return;
  }
  float pre[hc];
  hc_pre_weights<HC>(m, p, pre);
  // u's column c: sum_i pre_i X_i in stream order (the same operations for preloaded columns).
  auto put = [&](int64_t c, float acc) {
    if (p.fold_norm) {
      hc_u_stage()[c] = to_f32(from_f32<Tu>(acc));  // u as rms_norm would read it; written normalised
    } else {
      u[t * p.D + c] = from_f32<Tu>(acc);
    }
  };
  if constexpr (VEC) {
    hc_collapse_vec<HC>(x, p, t, c0, c_step, ahead, pre, put);
  } else {
#pragma unroll
    for (int j = 0; j < kHcCollapsePre; ++j) {
      const int64_t c = c0 + j * c_step;
      if (c >= p.D) break;
      float acc = 0.0f;
#pragma unroll
      for (int i = 0; i < hc; ++i) acc += pre[i] * ahead.v[j][i];
      put(c, acc);
    }
#pragma unroll 4
    for (int64_t c = c0 + kHcCollapsePre * c_step; c < p.D; c += c_step) {
      float acc = 0.0f;
#pragma unroll
      for (int i = 0; i < hc; ++i) acc += pre[i] * to_f32(x[(t * hc + i) * p.D + c]);
      put(c, acc);
    }
  }
  if (blockDim.x == 32 && !p.sinkhorn_cta) hc_sinkhorn_warp<HC>(m, p, post_out + t * hc, comb_out + t * hc * hc);
  if (p.fold_norm) {  // (launch_hc_pre folds only with >= 256 threads)
    hc_fold_norm(u + t * p.D, p, nw, p.uq == nullptr ? nullptr : p.uq + t * p.D);
  }
}

// Threads per token: decode-sized batches (< 64 tokens) take 1,024 so the collapse u = sum_i pre_i
// X_i (31 warps) takes one or two memory latencies while warp 0 runs Sinkhorn; prefill 256. Both
// >= 256, which the folded norm needs.
inline constexpr int kHcFinalizeDecodeThreads = 1024, kHcFinalizePrefillThreads = 256;
// VEC: the collapse's 16-byte loads (HcVecGroup, hc_collapse_vec), a kernel of its own so that
// the default one keeps its registers.
template <typename T, typename Tu, bool VEC = false>
__global__ void __launch_bounds__(kHcFinalizeDecodeThreads)
    hc_pre_finalize_kernel(const T* x, const float* partial, HcPreParams p, Tu* u, float* post_out, float* comb_out) {
  const HcNormWeights nw = hc_norm_preload(p);  // before the wait: weights only
  pdl_prologue();
  const int64_t t = blockIdx.x;
  switch (p.hc) {
    case 1: hc_pre_finalize<1, VEC>(x, partial, p, t, u, post_out, comb_out, nw); break;
    case 2: hc_pre_finalize<2, VEC>(x, partial, p, t, u, post_out, comb_out, nw); break;
    case 3: hc_pre_finalize<3, VEC>(x, partial, p, t, u, post_out, comb_out, nw); break;
    default: hc_pre_finalize<4, VEC>(x, partial, p, t, u, post_out, comb_out, nw); break;
  }
}

// grid: (T, hc, D chunks of kHcPostChunk).
inline constexpr int kHcPostChunk = 1024;
template <typename T, typename To>
__global__ void hc_post_kernel(const To* o, const T* x, const float* post, const float* comb, T* out, int64_t D, int hc) {
  pdl_prologue();
  const int64_t t = blockIdx.x;
  const int k = blockIdx.y;
  const float pk = post[t * hc + k];
  const int64_t c1 = min64(D, (static_cast<int64_t>(blockIdx.z) + 1) * kHcPostChunk);
  for (int64_t c = static_cast<int64_t>(blockIdx.z) * kHcPostChunk + threadIdx.x; c < c1; c += blockDim.x) {
    float cj[4], xj[4];  // hc <= 4 (the launcher checks)
    for (int j = 0; j < hc; ++j) cj[j] = comb[(t * hc + j) * hc + k], xj[j] = to_f32(x[(t * hc + j) * D + c]);
    out[(t * hc + k) * D + c] = from_f32<T>(hc_post_value(pk, to_f32(o[t * D + c]), cj, xj, hc));
  }
}

// hc_post for 16-byte aligned rows with D % 8 == 0: a thread owns 8 consecutive columns of all
// HC outputs, so o and each X_j are read once (vector loads) instead of once per output stream;
// each output element is the same FMA chain as hc_post_kernel's. grid: (T, D / (8 x 128)).
inline constexpr int kHcPostVecThreads = 128;
template <typename T>
__device__ __forceinline__ void store8(T* p, const float (&v)[8]) {
  if constexpr (sizeof(T) == 2) {
    *reinterpret_cast<uint4*>(p) =
        make_uint4(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]), pack_bf16(v[4], v[5]), pack_bf16(v[6], v[7]));
  } else {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}
template <typename T, typename To, int HC>
__global__ void __launch_bounds__(kHcPostVecThreads)
    hc_post_vec_kernel(const To* o, const T* x, const float* post, const float* comb, T* out, int64_t D) {
  pdl_prologue();
  const int64_t t = blockIdx.x;
  const int64_t c = (static_cast<int64_t>(blockIdx.y) * kHcPostVecThreads + threadIdx.x) * 8;
  if (c >= D) return;
  float ov[8], xv[HC][8];
  load8_f32(o + t * D + c, ov);
#pragma unroll
  for (int j = 0; j < HC; ++j) load8_f32(x + (t * HC + j) * D + c, xv[j]);
#pragma unroll
  for (int k = 0; k < HC; ++k) {
    const float pk = post[t * HC + k];
    float cj[HC];
#pragma unroll
    for (int j = 0; j < HC; ++j) cj[j] = comb[(t * HC + j) * HC + k];
    float r[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float xj[HC];
#pragma unroll
      for (int j = 0; j < HC; ++j) xj[j] = xv[j][e];
      r[e] = hc_post_value(pk, ov[e], cj, xj, HC);
    }
    store8(out + (t * HC + k) * D + c, r);
  }
}

// Block (token, chunk of kHcHeadChunk columns). Threads 0..hc (warp 0) fold the mix partials in
// sub-range order (column m, then the sum of squares) side by side and thread 0 derives the
// weights; every thread then mixes kHcHeadPer columns with all its stream loads in flight (one
// block walking the row serially took 11 us of a decode step).
inline constexpr int kHcHeadThreads = 256, kHcHeadPer = 4;
inline constexpr int64_t kHcHeadChunk = kHcHeadThreads * kHcHeadPer;
template <typename T, typename Ty>
__global__ void __launch_bounds__(kHcHeadThreads)
    hc_head_finalize_kernel(const T* x, const float* partial, HcPreParams p, Ty* y) {
  pdl_prologue();
  __shared__ float w[4], sums[5];  // hc <= 4
  const int64_t t = blockIdx.x;
  const int hc = p.hc;
  if (static_cast<int>(threadIdx.x) <= hc) {
    const float* rows = partial + t * p.n_split * (hc + 1);  // [n_split][hc + 1]
    sums[threadIdx.x] = sum_in_order(rows + threadIdx.x, hc + 1, p.n_split);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const float rho = rsqrtf(sums[hc] / static_cast<float>(hc * p.D) + p.norm_eps);
    for (int i = 0; i < hc; ++i) w[i] = sigmoidf_(p.scale[0] * rho * sums[i] + p.base[i]) + p.hc_eps;
  }
  __syncthreads();
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kHcHeadChunk + threadIdx.x;
  float xv[4][kHcHeadPer];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int e = 0; e < kHcHeadPer; ++e) {
      const int64_t c = c0 + e * kHcHeadThreads;
      xv[i][e] = i < hc && c < p.D ? to_f32(x[(t * hc + i) * p.D + c]) : 0.0f;
    }
#pragma unroll
  for (int e = 0; e < kHcHeadPer; ++e) {
    const int64_t c = c0 + e * kHcHeadThreads;
    if (c >= p.D) continue;
    float acc = 0.0f;
    for (int i = 0; i < hc; ++i) acc += w[i] * xv[i][e];
    y[t * p.D + c] = from_f32<Ty>(acc);
  }
}

}  // namespace deepinfer::kernels
