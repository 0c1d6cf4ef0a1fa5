// CpuOps manifold-constrained hyper-connections (model_v4_flash.md §4.2, §4.10), all in F32.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// mu = rsqrt(mean(v^2) + eps) * (fn v) for the flattened streams v [hc*D]; fn [n_mix, hc*D].
std::vector<float> mix_logits(const std::vector<float>& v, const TensorView& fn, float norm_eps) {
  const int64_t n = static_cast<int64_t>(v.size()), n_mix = fn.shape[0];
  const float rho = 1.0f / std::sqrt(dot(v.data(), v.data(), n) / static_cast<float>(n) + norm_eps);
  std::vector<float> mu(static_cast<size_t>(n_mix));
  const float* f = fn.as<const float>();
  for (int64_t m = 0; m < n_mix; ++m) mu[m] = rho * dot(f + m * n, v.data(), n);
  return mu;
}

// Sinkhorn projection of comb logits z [hc, hc] (row j = source stream, column k = destination).
void sinkhorn(float* c, int64_t hc, int iters, float eps) {
  for (int64_t j = 0; j < hc; ++j) {  // row softmax, then + eps
    float mx = c[j * hc];
    for (int64_t k = 1; k < hc; ++k) mx = std::max(mx, c[j * hc + k]);
    float sum = 0.0f;
    for (int64_t k = 0; k < hc; ++k) sum += (c[j * hc + k] = std::exp(c[j * hc + k] - mx));
    for (int64_t k = 0; k < hc; ++k) c[j * hc + k] = c[j * hc + k] / sum + eps;
  }
  auto normalize_columns = [&] {
    for (int64_t k = 0; k < hc; ++k) {
      float s = 0.0f;
      for (int64_t j = 0; j < hc; ++j) s += c[j * hc + k];
      for (int64_t j = 0; j < hc; ++j) c[j * hc + k] /= (s + eps);
    }
  };
  auto normalize_rows = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      float s = 0.0f;
      for (int64_t k = 0; k < hc; ++k) s += c[j * hc + k];
      for (int64_t k = 0; k < hc; ++k) c[j * hc + k] /= (s + eps);
    }
  };
  normalize_columns();
  for (int i = 0; i < iters - 1; ++i) {
    normalize_rows();
    normalize_columns();
  }
}

}  // namespace

void CpuOps::hc_pre(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& u,
                    const TensorView& post, const TensorView& comb) {
  check_activation(x, "hc_pre x");
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  const float* scale = w.scale.as<const float>();
  const float* base = w.base.as<const float>();
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> v(static_cast<size_t>(hc * D));
    read_f32(x, t * hc * D, hc * D, v.data());
    const std::vector<float> mu = mix_logits(v, w.fn, params.norm_eps);
    std::vector<float> pre(static_cast<size_t>(hc));
    float* p_post = post.as<float>() + t * hc;
    float* p_comb = comb.as<float>() + t * hc * hc;
    for (int64_t i = 0; i < hc; ++i) {
      pre[i] = sigmoid(scale[0] * mu[i] + base[i]) + params.hc_eps;
      p_post[i] = 2.0f * sigmoid(scale[1] * mu[hc + i] + base[hc + i]);
    }
    for (int64_t i = 0; i < hc * hc; ++i) p_comb[i] = scale[2] * mu[2 * hc + i] + base[2 * hc + i];
    sinkhorn(p_comb, hc, params.sinkhorn_iters, params.hc_eps);
    std::vector<float> out(static_cast<size_t>(D), 0.0f);
    for (int64_t i = 0; i < hc; ++i)
      for (int64_t c = 0; c < D; ++c) out[c] += pre[i] * v[i * D + c];
    write_f32(u, t * D, D, out.data());
  }
}

void CpuOps::hc_post(const TensorView& o, const TensorView& x, const TensorView& post, const TensorView& comb,
                     const TensorView& out) {
  check_activation(o, "hc_post o");
  check_activation(x, "hc_post x");
  check_activation(out, "hc_post out");
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  DI_CHECK(out.data != x.data, "hc_post: out must not alias x");
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> v(static_cast<size_t>(hc * D)), ov(static_cast<size_t>(D)), r(static_cast<size_t>(D));
    read_f32(x, t * hc * D, hc * D, v.data());
    read_f32(o, t * D, D, ov.data());
    const float* p_post = post.as<const float>() + t * hc;
    const float* p_comb = comb.as<const float>() + t * hc * hc;
    for (int64_t k = 0; k < hc; ++k) {
      for (int64_t c = 0; c < D; ++c) {
        float acc = p_post[k] * ov[c];
        for (int64_t j = 0; j < hc; ++j) acc += p_comb[j * hc + k] * v[j * D + c];
        r[c] = acc;
      }
      write_f32(out, (t * hc + k) * D, D, r.data());
    }
  }
}

void CpuOps::hc_head(const TensorView& x, const HcHeadWeights& w, const HcParams& params, const TensorView& y) {
  check_activation(x, "hc_head x");
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  const float scale = w.scale.as<const float>()[0];
  const float* base = w.base.as<const float>();
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> v(static_cast<size_t>(hc * D));
    read_f32(x, t * hc * D, hc * D, v.data());
    const std::vector<float> mu = mix_logits(v, w.fn, params.norm_eps);
    std::vector<float> out(static_cast<size_t>(D), 0.0f);
    for (int64_t i = 0; i < hc; ++i) {
      const float wi = sigmoid(scale * mu[i] + base[i]) + params.hc_eps;
      for (int64_t c = 0; c < D; ++c) out[c] += wi * v[i * D + c];
    }
    write_f32(y, t * D, D, out.data());
  }
}

}  // namespace deepinfer::ops::cpu
