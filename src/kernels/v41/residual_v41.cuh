// DeepSeek-V4.1 residual-stream and KV-format kernels (model_v41_flash.md §3.4, §4.2, §5): the KV
// fake-quantisers, single-pass mHC's coefficient sets and collapse, and the Engram gate. Written
// for the CPU reference's arithmetic (ops/cpu/cpu_v41_*.cc), one token (or block) at a time:
// correctness first, their speed later (docs/v41.md, "CUDA").
#pragma once

#include <cstdint>

#include "kernels/common/device_utils.cuh"
#include "kernels/norm/hc.cuh"  // V4's mHC warp forms: pre weights, Sinkhorn

namespace deepinfer::kernels {

// ---- KV fake-quantisers (§3.4) ------------------------------------------------------------
inline constexpr int kKvFormatFp8Pow2x32 = 0, kKvFormatFp4E4m3x16 = 1, kKvFormatFp4Pow2x32 = 2;
__host__ __device__ constexpr int kv_v41_block(int format) { return format == kKvFormatFp4E4m3x16 ? 16 : 32; }

// 2^ceil(log2 t) for t > 0, exactly (frexp, as the reference: no log2 rounding at powers of two).
__device__ __forceinline__ float pow2_ceil_exact(float t) {
  int e = 0;
  const float m = frexpf(t, &e);  // t = m 2^e, m in [0.5, 1)
  return ldexpf(1.0f, m == 0.5f ? e - 1 : e);
}
// The reference's E2M1 rounding with its zero: a value that rounds to 0 is +0 (code 0 carries no sign).
__device__ __forceinline__ float round_e2m1_unsigned_zero(float x) {
  const float r = round_e2m1(x);
  return r == 0.0f ? 0.0f : r;
}

// One thread per element; a block of B = 16 or 32 elements is B consecutive lanes of a warp (rows
// of `width`, a multiple of B, are whole blocks, so the flat index names the block). The scale is
// the block's amax over its lanes; the value divided by it (IEEE: the E4M3 scale is no power of
// two) and rounded, then multiplied back.
template <typename T>
__global__ void kv_fake_quant_v41_kernel(T* x, int64_t n, int format) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool valid = i < n;
  const float v = valid ? to_f32(x[i]) : 0.0f;
  float amax = fabsf(v);
  const int B = kv_v41_block(format);
  for (int o = B / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  float q;
  if (format == kKvFormatFp8Pow2x32) {
    const float s = pow2_ceil_exact(__fmul_rn(fmaxf(amax, 1e-4f), 1.0f / 448.0f));
    q = __fmul_rn(round_e4m3(__fdiv_rn(v, s)), s);
  } else if (format == kKvFormatFp4E4m3x16) {
    const float s = round_e4m3(__fdiv_rn(fmaxf(amax, 6.0f * 0.001953125f /* 2^-9 */), 6.0f));
    q = __fmul_rn(round_e2m1_unsigned_zero(__fdiv_rn(v, s)), s);
  } else {
    const float s = pow2_ceil_exact(__fmul_rn(fmaxf(amax, 6.0f * 1.1754943508222875e-38f /* 2^-126 */), 1.0f / 6.0f));
    q = __fmul_rn(round_e2m1_unsigned_zero(__fdiv_rn(v, s)), s);
  }
  if (valid) x[i] = from_f32<T>(q);
}

// ---- single-pass mHC (§5) ------------------------------------------------------------------
inline constexpr int kHcMixV41Threads = 256;

// Warp 0's part: pre, post and the Sinkhorn-projected comb from the token's projections mu[0,
// n_mix), by V4's warp forms (hc.cuh: the reference's operations in the reference's order) with
// rho 1 — V4.1 normalises the streams before projecting, so mu is already scaled.
template <int HC>
__device__ inline void hc_mix_v41_coefficients(const float* mu, const HcPreParams& p, float* pre, float* post,
                                               float* comb) {
  constexpr int n_mix = (2 + HC) * HC;
  const int lane = threadIdx.x & 31;
  const HcMix m{lane < n_mix ? mu[lane] : 0.0f, 1.0f};
  float w[HC];
  hc_pre_weights<HC>(m, p, w);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < HC; ++i) pre[i] = w[i];
  }
  hc_sinkhorn_warp<HC>(m, p, post, comb);
}

// grid: (T); block kHcMixV41Threads; dynamic shared memory hc D floats (the token's streams,
// normalised). hc <= 4 (V4's warp forms: a lane per projection). pre / post [T, hc], comb [T, hc, hc].
template <typename T>
__global__ void hc_mix_v41_kernel(const T* x, const float* fn, HcPreParams p, float* pre, float* post, float* comb) {
  pdl_prologue();
  extern __shared__ float hc_v[];  // [hc D]
  __shared__ float scratch[32];
  __shared__ float mu[32];
  const int hc = p.hc;
  const int64_t t = blockIdx.x, n = hc * p.D;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = to_f32(x[t * n + i]);
    hc_v[i] = v;
    ss += v * v;
  }
  // Normalise the flattened streams first, then project (the reference's order).
  const float rho = 1.0f / sqrtf(block_sum(ss, scratch) / static_cast<float>(n) + p.norm_eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) hc_v[i] *= rho;
  __syncthreads();
  const int n_mix = (2 + hc) * hc;
  for (int m = 0; m < n_mix; ++m) {
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += fn[m * n + i] * hc_v[i];
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) mu[m] = acc;
  }
  __syncthreads();
  if (threadIdx.x >= 32) return;
  float* pr = pre + t * hc;
  float* po = post + t * hc;
  float* co = comb + t * hc * hc;
  switch (hc) {
    case 1: hc_mix_v41_coefficients<1>(mu, p, pr, po, co); break;
    case 2: hc_mix_v41_coefficients<2>(mu, p, pr, po, co); break;
    case 3: hc_mix_v41_coefficients<3>(mu, p, pr, po, co); break;
    default: hc_mix_v41_coefficients<4>(mu, p, pr, po, co); break;
  }
}

// u [T, D] = sum_i pre[t, i] x[t, i, :], streams in order with separate roundings (the
// reference's loop: bit for bit). One thread per (t, c).
template <typename Tx, typename Tu>
__global__ void hc_collapse_v41_kernel(const Tx* x, const float* pre, Tu* u, int64_t T, int64_t D, int hc) {
  pdl_prologue();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * D) return;
  const int64_t t = i / D, c = i % D;
  float out = 0.0f;
  for (int s = 0; s < hc; ++s) out = __fadd_rn(out, __fmul_rn(pre[t * hc + s], to_f32(x[(t * hc + s) * D + c])));
  u[i] = from_f32<Tu>(out);
}

// ---- Engram gate (§4.2) --------------------------------------------------------------------
// One warp per (token, stream): the three sums over D, the gate, then out = x + gate * value.
// The warp reads its stream whole before writing it, so out may be x.
template <typename Tx, typename Tk, typename To>
__global__ void engram_gate_kernel(const Tx* x, const Tk* kv, const float* qw, const float* kw, const int32_t* live,
                                   To* out, int64_t T, int64_t D, int hc, float eps) {
  pdl_prologue();
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= T * hc) return;  // whole warps exit together
  const int64_t t = w / hc;
  const int i = static_cast<int>(w % hc);
  const Tx* h = x + (t * hc + i) * D;
  const Tk* key = kv + t * (hc + 1) * D + i * D;
  const Tk* value = kv + t * (hc + 1) * D + hc * D;
  float gate = 0.0f;
  if (live == nullptr || live[t] != 0) {
    float s = 0.0f, hh = 0.0f, kk = 0.0f;
    for (int64_t d = lane; d < D; d += 32) {
      const float hv = to_f32(h[d]), kv_d = to_f32(key[d]);
      s += hv * (qw[i * D + d] * kw[i * D + d]) * kv_d;
      hh += hv * hv;
      kk += kv_d * kv_d;
    }
    s = warp_sum(s), hh = warp_sum(hh), kk = warp_sum(kk);
    const float Df = static_cast<float>(D);
    const float rstd = (1.0f / sqrtf(hh / Df + eps)) * (1.0f / sqrtf(kk / Df + eps));
    const float dval = s * rstd * (1.0f / sqrtf(Df));
    gate = sigmoidf_(copysignf(sqrtf(fmaxf(fabsf(dval), 1e-6f)), dval));
  }
  To* o = out + (t * hc + i) * D;
  for (int64_t d = lane; d < D; d += 32) {
    o[d] = from_f32<To>(__fadd_rn(to_f32(h[d]), __fmul_rn(gate, to_f32(value[d]))));
  }
}

}  // namespace deepinfer::kernels
