// Manifold-constrained hyper-connection kernels (model_v4_flash.md §4.2, §4.10).
// hc_mix_partial: split-K partial products of the flattened streams with the mixing matrix plus
// partial sums of squares; grid (T, n_split), each block owns one K chunk, partials are reduced by
// hc_pre_finalize / hc_head_finalize in split order (fixed, so results are batch invariant).
// hc_pre_finalize: one block per token — mix logits, pre/post, Sinkhorn comb (thread 0), and the
// collapsed input u = sum_i pre_i X_i. hc_post: out[t,k] = post_k o + sum_j comb[j,k] X_j.
#pragma once

#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kMaxMix = 32;  // (2 + hc) * hc for hc <= 4

template <typename T>
__global__ void hc_mix_partial_kernel(const T* x, const float* fn, float* partial, int64_t K, int n_mix, int64_t chunk) {
  __shared__ float red[kMaxMix + 1][32];
  const int64_t t = blockIdx.x;
  const int split = blockIdx.y, n_split = gridDim.y;
  const int64_t k0 = split * chunk, k1 = min64(K, k0 + chunk);
  float acc[kMaxMix + 1];
#pragma unroll
  for (int m = 0; m <= kMaxMix; ++m) acc[m] = 0.0f;
  for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
    const float v = to_f32(x[t * K + k]);
    acc[kMaxMix] += v * v;
#pragma unroll
    for (int m = 0; m < kMaxMix; ++m)
      if (m < n_mix) acc[m] += v * fn[m * K + k];
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
#pragma unroll
  for (int m = 0; m <= kMaxMix; ++m) {
    const float s = warp_sum(acc[m]);
    if (lane == 0) red[m][warp] = s;
  }
  __syncthreads();
  if (threadIdx.x <= kMaxMix) {
    const int m = threadIdx.x;
    float s = 0.0f;
    for (int w = 0; w < n_warps; ++w) s += red[m][w];
    const int slot = m == kMaxMix ? n_mix : m;
    if (m < n_mix || m == kMaxMix) partial[(t * n_split + split) * (n_mix + 1) + slot] = s;
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
};

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

// Thread 0 computes mu, pre, post and the Sinkhorn-projected comb (written to the shared pre,
// post, comb). hc is a template parameter so every index is a compile-time constant and the
// arrays live in registers (runtime-indexed local arrays made this the slowest op of a step);
// the operations and their order are the reference's.
inline constexpr int kMaxHc = 4;
template <int HC>
__device__ inline void hc_coefficients(const float* partial, const HcPreParams& p, int64_t t, float* pre_out,
                                       float* post_out, float* comb_out) {
  constexpr int hc = HC, n_mix = (2 + hc) * hc;
  float mu[kMaxMix];
  float ss = 0.0f;
#pragma unroll
  for (int m = 0; m < kMaxMix; ++m) mu[m] = 0.0f;
  for (int s = 0; s < p.n_split; ++s) {
    const float* row = partial + (t * p.n_split + s) * (n_mix + 1);
#pragma unroll
    for (int m = 0; m < kMaxMix; ++m)
      if (m < n_mix) mu[m] += row[m];
    ss += row[n_mix];
  }
  const float rho = rsqrtf(ss / static_cast<float>(hc * p.D) + p.norm_eps);
#pragma unroll
  for (int i = 0; i < kMaxHc; ++i) {
    if (i >= hc) continue;
    pre_out[i] = sigmoidf_(p.scale[0] * rho * mu[i] + p.base[i]) + p.hc_eps;
    post_out[i] = 2.0f * sigmoidf_(p.scale[1] * rho * mu[hc + i] + p.base[hc + i]);
  }
  float comb[kMaxHc][kMaxHc];
#pragma unroll
  for (int j = 0; j < kMaxHc; ++j) {
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) {
      comb[j][k] = 0.0f;
      if (j >= hc || k >= hc) continue;
      const int m = 2 * hc + j * hc + k;
      comb[j][k] = p.scale[2] * rho * mu[m] + p.base[m];
      mx = fmaxf(mx, comb[j][k]);
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      if (j < hc && k < hc) sum += (comb[j][k] = expf(comb[j][k] - mx));
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      if (j < hc && k < hc) comb[j][k] = comb[j][k] / sum + p.hc_eps;
  }
  auto cols = [&] {
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) {
      if (k >= hc) continue;
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < kMaxHc; ++j)
        if (j < hc) s += comb[j][k];
#pragma unroll
      for (int j = 0; j < kMaxHc; ++j)
        if (j < hc) comb[j][k] /= (s + p.hc_eps);
    }
  };
  cols();
  for (int it = 0; it < p.sinkhorn_iters - 1; ++it) {
#pragma unroll
    for (int j = 0; j < kMaxHc; ++j) {
      if (j >= hc) continue;
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < kMaxHc; ++k)
        if (k < hc) s += comb[j][k];
#pragma unroll
      for (int k = 0; k < kMaxHc; ++k)
        if (k < hc) comb[j][k] /= (s + p.hc_eps);
    }
    cols();
  }
#pragma unroll
  for (int j = 0; j < kMaxHc; ++j)
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      if (j < hc && k < hc) comb_out[j * hc + k] = comb[j][k];
}

template <typename T, typename Tu>
__global__ void hc_pre_finalize_kernel(const T* x, const float* partial, HcPreParams p, Tu* u, float* post_out,
                                       float* comb_out) {
  __shared__ float pre[4], post[4], comb[16];
  const int64_t t = blockIdx.x;
  const int hc = p.hc;
  if (threadIdx.x == 0) {
    switch (hc) {
      case 1: hc_coefficients<1>(partial, p, t, pre, post, comb); break;
      case 2: hc_coefficients<2>(partial, p, t, pre, post, comb); break;
      case 3: hc_coefficients<3>(partial, p, t, pre, post, comb); break;
      default: hc_coefficients<4>(partial, p, t, pre, post, comb); break;
    }
  }
  __syncthreads();
  if (threadIdx.x < hc) post_out[t * hc + threadIdx.x] = post[threadIdx.x];
  if (threadIdx.x < hc * hc) comb_out[t * hc * hc + threadIdx.x] = comb[threadIdx.x];
  for (int64_t c = threadIdx.x; c < p.D; c += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < hc; ++i) acc += pre[i] * to_f32(x[(t * hc + i) * p.D + c]);
    u[t * p.D + c] = from_f32<Tu>(acc);
  }
}

template <typename T, typename To>
__global__ void hc_post_kernel(const To* o, const T* x, const float* post, const float* comb, T* out, int64_t D, int hc) {
  const int64_t t = blockIdx.x;
  const int k = blockIdx.y;
  const float pk = post[t * hc + k];
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    float acc = pk * to_f32(o[t * D + c]);
    for (int j = 0; j < hc; ++j) acc += comb[(t * hc + j) * hc + k] * to_f32(x[(t * hc + j) * D + c]);
    out[(t * hc + k) * D + c] = from_f32<T>(acc);
  }
}

template <typename T, typename Ty>
__global__ void hc_head_finalize_kernel(const T* x, const float* partial, HcPreParams p, Ty* y) {
  __shared__ float w[4];
  const int64_t t = blockIdx.x;
  const int hc = p.hc;
  if (threadIdx.x == 0) {
    float mu[4] = {0, 0, 0, 0};
    float ss = 0.0f;
    for (int s = 0; s < p.n_split; ++s) {
      const float* row = partial + (t * p.n_split + s) * (hc + 1);
      for (int m = 0; m < hc; ++m) mu[m] += row[m];
      ss += row[hc];
    }
    const float rho = rsqrtf(ss / static_cast<float>(hc * p.D) + p.norm_eps);
    for (int i = 0; i < hc; ++i) w[i] = sigmoidf_(p.scale[0] * rho * mu[i] + p.base[i]) + p.hc_eps;
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < p.D; c += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < hc; ++i) acc += w[i] * to_f32(x[(t * hc + i) * p.D + c]);
    y[t * p.D + c] = from_f32<Ty>(acc);
  }
}

}  // namespace deepinfer::kernels
