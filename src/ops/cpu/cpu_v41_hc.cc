// CpuOps V4.1 residual-stream ops: single-pass mHC coefficient sets and collapse
// (model_v41_flash.md §5) and the Engram gate (§4.2). All math in F32, per token row.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Row softmax + eps, column normalisation, then (iters - 1) x (row, column) normalisations of the
// comb matrix c [hc, hc] (row j = source stream, column k = destination).
void sinkhorn(float* c, int64_t hc, int iters, float eps) {
  for (int64_t j = 0; j < hc; ++j) {
    float mx = c[j * hc];
    for (int64_t k = 1; k < hc; ++k) mx = std::max(mx, c[j * hc + k]);
    float sum = 0.0f;
    for (int64_t k = 0; k < hc; ++k) sum += (c[j * hc + k] = std::exp(c[j * hc + k] - mx));
    for (int64_t k = 0; k < hc; ++k) c[j * hc + k] = c[j * hc + k] / sum + eps;
  }
  auto columns = [&] {
    for (int64_t k = 0; k < hc; ++k) {
      float s = 0.0f;
      for (int64_t j = 0; j < hc; ++j) s += c[j * hc + k];
      for (int64_t j = 0; j < hc; ++j) c[j * hc + k] /= (s + eps);
    }
  };
  auto rows = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      float s = 0.0f;
      for (int64_t k = 0; k < hc; ++k) s += c[j * hc + k];
      for (int64_t k = 0; k < hc; ++k) c[j * hc + k] /= (s + eps);
    }
  };
  columns();
  for (int i = 0; i < iters - 1; ++i) {
    rows();
    columns();
  }
}

}  // namespace

void CpuOps::hc_mix(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& pre,
                    const TensorView& post, const TensorView& comb) {
  check_activation(x, "hc_mix x");
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2], n = hc * D;
  const int64_t n_mix = w.fn.shape[0];
  DI_CHECK(n_mix == (2 + hc) * hc && w.fn.shape[1] == n, "hc_mix: fn {} for streams {}", w.fn.shape_string(),
           x.shape_string());
  const float* scale = w.scale.as<const float>();
  const float* base = w.base.as<const float>();
  const float* fn = w.fn.as<const float>();
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> v(static_cast<size_t>(n));
    read_f32(x, t * n, n, v.data());
    // Normalise the flattened streams first, then project (the reference's order).
    const float rho = 1.0f / std::sqrt(dot(v.data(), v.data(), n) / static_cast<float>(n) + params.norm_eps);
    for (float& e : v) e *= rho;
    std::vector<float> mu(static_cast<size_t>(n_mix));
    for (int64_t m = 0; m < n_mix; ++m) mu[m] = dot(fn + m * n, v.data(), n);
    float* p_pre = pre.as<float>() + t * hc;
    float* p_post = post.as<float>() + t * hc;
    float* p_comb = comb.as<float>() + t * hc * hc;
    for (int64_t i = 0; i < hc; ++i) {
      p_pre[i] = sigmoid(mu[i] * scale[0] + base[i]) + params.hc_eps;
      p_post[i] = 2.0f * sigmoid(mu[hc + i] * scale[1] + base[hc + i]);
    }
    for (int64_t i = 0; i < hc * hc; ++i) p_comb[i] = mu[2 * hc + i] * scale[2] + base[2 * hc + i];
    sinkhorn(p_comb, hc, params.sinkhorn_iters, params.hc_eps);
  }
}

void CpuOps::hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& u) {
  check_activation(x, "hc_collapse x");
  check_activation(u, "hc_collapse u");
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  DI_CHECK(pre.dtype == DType::kF32 && pre.numel() == T * hc, "hc_collapse: pre {}", pre.shape_string());
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> v(static_cast<size_t>(hc * D)), out(static_cast<size_t>(D), 0.0f);
    read_f32(x, t * hc * D, hc * D, v.data());
    const float* p = pre.as<const float>() + t * hc;
    for (int64_t i = 0; i < hc; ++i)
      for (int64_t c = 0; c < D; ++c) out[c] += p[i] * v[i * D + c];
    write_f32(u, t * D, D, out.data());
  }
}

void CpuOps::engram_gate(const TensorView& x, const TensorView& kv, const TensorView& q_weight,
                         const TensorView& k_weight, const TensorView& live, float eps, const TensorView& out) {
  check_activation(x, "engram_gate x");
  check_activation(kv, "engram_gate kv");
  check_activation(out, "engram_gate out");
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  DI_CHECK(row_width(kv) == (hc + 1) * D && n_rows(kv) == T, "engram_gate: kv {} for streams {}", kv.shape_string(),
           x.shape_string());
  const float* qw = q_weight.as<const float>();
  const float* kw = k_weight.as<const float>();
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(D));
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> h(static_cast<size_t>(hc * D)), k(static_cast<size_t>((hc + 1) * D));
    read_f32(x, t * hc * D, hc * D, h.data());
    read_f32(kv, t * (hc + 1) * D, (hc + 1) * D, k.data());
    const float* value = &k[hc * D];
    const bool is_live = live.empty() || live.as<const int32_t>()[t] != 0;
    for (int64_t i = 0; i < hc; ++i) {
      float* hi = &h[i * D];
      const float* ki = &k[i * D];
      float gate = 0.0f;
      if (is_live) {
        float sum = 0.0f;
        for (int64_t d = 0; d < D; ++d) sum += hi[d] * (qw[i * D + d] * kw[i * D + d]) * ki[d];
        const float rstd = (1.0f / std::sqrt(dot(hi, hi, D) / static_cast<float>(D) + eps)) *
                           (1.0f / std::sqrt(dot(ki, ki, D) / static_cast<float>(D) + eps));
        const float d = sum * rstd * inv_sqrt_d;
        gate = sigmoid(std::copysign(std::sqrt(std::max(std::fabs(d), 1e-6f)), d));
      }
      for (int64_t d = 0; d < D; ++d) hi[d] += gate * value[d];
    }
    write_f32(out, t * hc * D, hc * D, h.data());
  }
}

}  // namespace deepinfer::ops::cpu
