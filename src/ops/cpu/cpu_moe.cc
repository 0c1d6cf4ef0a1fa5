// CpuOps MoE (model_v4_flash.md §4.9): sqrt-softplus routing with bias or hash selection, and
// the routed experts with the asymmetric SwiGLU clamp, weight applied before the down projection.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {
namespace {

float sqrt_softplus(float z) {
  const float sp = z > 20.0f ? z : std::log1p(std::exp(z));
  return std::sqrt(sp);
}

}  // namespace

void CpuOps::moe_route(const TensorView& logits, const TensorView& bias, const TensorView& tid2eid,
                       const TensorView& token_ids, const MoeParams& params, const TensorView& sel,
                       const TensorView& weights) {
  const int64_t T = logits.shape[0], E = logits.shape[1], k = params.n_experts_per_tok;
  const float* z = logits.as<const float>();
  int32_t* out_sel = sel.as<int32_t>();
  float* out_w = weights.as<float>();
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> s(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) s[e] = sqrt_softplus(z[t * E + e]);
    std::vector<int32_t> chosen(static_cast<size_t>(k));
    if (!tid2eid.empty()) {
      const int32_t id = token_ids.as<const int32_t>()[t];
      const int64_t* row = tid2eid.as<const int64_t>() + static_cast<int64_t>(id) * k;
      for (int64_t i = 0; i < k; ++i) chosen[i] = static_cast<int32_t>(row[i]);
    } else {
      std::vector<int32_t> order(static_cast<size_t>(E));
      std::iota(order.begin(), order.end(), 0);
      const float* b = bias.as<const float>();
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t c) {
        const float va = s[a] + b[a], vc = s[c] + b[c];
        return va != vc ? va > vc : a < c;
      });
      std::copy(order.begin(), order.begin() + k, chosen.begin());
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < k; ++i) sum += s[chosen[i]];
    for (int64_t i = 0; i < k; ++i) {
      DI_CHECK(chosen[i] >= 0 && chosen[i] < E, "expert id {} out of range", chosen[i]);
      out_sel[t * k + i] = chosen[i];
      out_w[t * k + i] = params.route_scale * s[chosen[i]] / sum;
    }
  }
}

void CpuOps::moe_experts(const TensorView& x, const TensorView& sel, const TensorView& weights,
                         std::span<const ExpertWeights> experts, const MoeParams& params, const TensorView& out) {
  check_activation(x, "moe_experts x");
  const int64_t T = x.shape[0], D = x.shape[1], k = params.n_experts_per_tok;
  const int64_t E = static_cast<int64_t>(experts.size());
  const bool bf16 = x.dtype == DType::kBF16;  // reference stores expert hidden/outputs in BF16
  auto round = [&](float v) { return bf16 ? tensor::round_bf16(v) : v; };
  std::vector<float> xf(static_cast<size_t>(T * D));
  read_f32(x, 0, T * D, xf.data());
  if (params.act_quant_block > 0) {
    for (int64_t t = 0; t < T; ++t) fp8_quant_dequant(&xf[t * D], D, params.act_quant_block);
  }
  const int32_t* s = sel.as<const int32_t>();
  const float* wt = weights.as<const float>();
  std::vector<float> y_slot(static_cast<size_t>(T * k * D), 0.0f);  // per (token, slot) output
  for (int64_t e = 0; e < E; ++e) {
    std::vector<int64_t> rows;  // (token, slot) pairs routed to e, as t * k + i
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < k; ++i)
        if (s[t * k + i] == e) rows.push_back(t * k + i);
    if (rows.empty()) continue;
    const ExpertWeights& ew = experts[e];
    const int64_t F = ew.w1.out, n = static_cast<int64_t>(rows.size());
    std::vector<float> g(static_cast<size_t>(n * F)), u(static_cast<size_t>(n * F));
#pragma omp parallel
    {
      std::vector<float> w1(static_cast<size_t>(D)), w3(static_cast<size_t>(D));
#pragma omp for schedule(static)
      for (int64_t f = 0; f < F; ++f) {
        ew.w1.dequantize_row(f, w1.data());
        ew.w3.dequantize_row(f, w3.data());
        for (int64_t r = 0; r < n; ++r) {
          const float* xr = &xf[(rows[r] / k) * D];
          g[r * F + f] = round(dot(xr, w1.data(), D));
          u[r * F + f] = round(dot(xr, w3.data(), D));
        }
      }
    }
    std::vector<float> h(static_cast<size_t>(n * F));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t f = 0; f < F; ++f) {
        float gi = g[r * F + f], ui = u[r * F + f];
        if (params.swiglu_limit > 0) {
          gi = std::min(gi, params.swiglu_limit);
          ui = std::clamp(ui, -params.swiglu_limit, params.swiglu_limit);
        }
        h[r * F + f] = round(wt[rows[r]] * (gi / (1.0f + std::exp(-gi)) * ui));
      }
      if (params.act_quant_block > 0) fp8_quant_dequant(&h[r * F], F, params.act_quant_block);
    }
#pragma omp parallel
    {
      std::vector<float> w2(static_cast<size_t>(F));
#pragma omp for schedule(static)
      for (int64_t c = 0; c < D; ++c) {
        ew.w2.dequantize_row(c, w2.data());
        for (int64_t r = 0; r < n; ++r) y_slot[rows[r] * D + c] = round(dot(&h[r * F], w2.data(), F));
      }
    }
  }
  // Combine in ascending expert id per token (a fixed order, whatever the batch).
  std::vector<float> acc(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int64_t> slots(static_cast<size_t>(k));
    std::iota(slots.begin(), slots.end(), 0);
    std::sort(slots.begin(), slots.end(), [&](int64_t a, int64_t b) { return s[t * k + a] < s[t * k + b]; });
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t i : slots)
      for (int64_t c = 0; c < D; ++c) acc[c] += y_slot[(t * k + i) * D + c];
    write_f32(out, t * D, D, acc.data());
  }
}

}  // namespace deepinfer::ops::cpu
