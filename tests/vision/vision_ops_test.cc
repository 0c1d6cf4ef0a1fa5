// The vision ops of the CPU reference (ops/cpu/cpu_vision.cc) against references written here from
// model_v41_flash.md §8: the 2D RoPE per element from its formula, the attention in double
// precision, the bias add and the erf GELU from their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "tensor/number_formats.h"

namespace deepinfer::ops {
namespace {

using tensor::DType;
using tensor::TensorView;
using cpu::CpuOps;

TensorView f32(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(v.data(), DType::kF32, shape);
}

std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Element e of the rotated head vector x (one head, hd dims) of the patch at (row, col), straight
// from §8: pairs (j, j + hd/2); the first hd/4 angles follow the row, the next hd/4 the column;
// f_i = theta^(-2i / (hd/2)).
double rope_ref(const float* x, int64_t hd, int64_t row, int64_t col, double theta, int64_t e) {
  const int64_t half = hd / 2, quarter = hd / 4, j = e % half;
  const int64_t pos = j < quarter ? row : col, i = j < quarter ? j : j - quarter;
  const double angle = static_cast<double>(pos) * std::pow(theta, -2.0 * static_cast<double>(i) / half);
  return e < half ? x[j] * std::cos(angle) - x[j + half] * std::sin(angle)
                  : x[j + half] * std::cos(angle) + x[j] * std::sin(angle);
}

TEST(VisionOps, RopeMatchesTheFormulaPerElement) {
  CpuOps ops;
  for (int64_t hd : {64, 32}) {
    const int64_t gh = 3, gw = 5, H = 2, T = gh * gw;
    std::vector<float> x = randn(static_cast<size_t>(T * H * hd), 7 + hd);
    const std::vector<float> before = x;
    ops.vision_rope(f32(x, {T, H, hd}), VisionAttentionParams{gh, gw, H, 1e4f});
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t e = 0; e < hd; ++e) {
          const double want = rope_ref(&before[(t * H + h) * hd], hd, t / gw, t % gw, 1e4, e);
          ASSERT_NEAR(x[(t * H + h) * hd + e], want, 2e-5 * (1 + std::fabs(want)))
              << "hd " << hd << " patch " << t << " head " << h << " dim " << e;
        }
  }
}

TEST(VisionOps, RopeRowAndColumnDimsAreSeparate) {
  // Patch (0, c) only rotates the column dims; patch (r, 0) only the row dims (angle 0 = identity).
  CpuOps ops;
  const int64_t hd = 64, gh = 2, gw = 2, T = 4;
  std::vector<float> x = randn(static_cast<size_t>(T * hd), 3);
  const std::vector<float> before = x;
  ops.vision_rope(f32(x, {T, 1, hd}), VisionAttentionParams{gh, gw, 1, 1e4f});
  for (int64_t e = 0; e < hd; ++e) {
    const bool row_dim = (e % 32) < 16;
    if (row_dim) {
      EXPECT_EQ(x[1 * hd + e], before[1 * hd + e]) << "patch (0,1) dim " << e;
    } else {
      EXPECT_EQ(x[2 * hd + e], before[2 * hd + e]) << "patch (1,0) dim " << e;
    }
  }
}

// Softmax attention in double over the RoPE'd q, k (rope_ref) of one image, scale hd^-0.5;
// round_qk: the rotated q and k rounded to BF16 first (the op's contract for a BF16 qkv).
std::vector<double> attention_ref(const std::vector<float>& qkv, int64_t gh, int64_t gw, int64_t H, int64_t hd,
                                  bool round_qk = false) {
  auto r = [&](double v) { return round_qk ? static_cast<double>(tensor::round_bf16(static_cast<float>(v))) : v; };
  const int64_t T = gh * gw, dim = H * hd;
  std::vector<double> out(static_cast<size_t>(T * dim));
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> q(static_cast<size_t>(T * hd)), k(q.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < hd; ++e) {
        q[t * hd + e] = r(rope_ref(&qkv[t * 3 * dim + h * hd], hd, t / gw, t % gw, 1e4, e));
        k[t * hd + e] = r(rope_ref(&qkv[t * 3 * dim + dim + h * hd], hd, t / gw, t % gw, 1e4, e));
      }
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> s(static_cast<size_t>(T));
      double mx = -1e300, den = 0;
      for (int64_t j = 0; j < T; ++j) {
        double d = 0;
        for (int64_t e = 0; e < hd; ++e) d += q[t * hd + e] * k[j * hd + e];
        s[j] = d / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, s[j]);
      }
      for (double& v : s) den += (v = std::exp(v - mx));
      for (int64_t e = 0; e < hd; ++e) {
        double o = 0;
        for (int64_t j = 0; j < T; ++j) o += s[j] / den * qkv[j * 3 * dim + 2 * dim + h * hd + e];
        out[t * dim + h * hd + e] = o;
      }
    }
  }
  return out;
}

TEST(VisionOps, AttentionMatchesDoubleReference) {
  CpuOps ops;
  const int64_t gh = 4, gw = 3, H = 2, hd = 32, T = gh * gw, dim = H * hd;
  std::vector<float> qkv = randn(static_cast<size_t>(T * 3 * dim), 11);
  std::vector<float> out(static_cast<size_t>(T * dim));
  ops.vision_attention(f32(qkv, {T, 3 * dim}), VisionAttentionParams{gh, gw, H, 1e4f}, f32(out, {T, dim}));
  const std::vector<double> want = attention_ref(qkv, gh, gw, H, hd);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5) << "element " << i;
}

TEST(VisionOps, AttentionSeesEveryPatchBothWays) {
  // Bidirectional: changing the value of the last patch changes the first patch's output.
  CpuOps ops;
  const int64_t gh = 2, gw = 2, H = 1, T = 4, dim = 8;  // one head of 8
  std::vector<float> qkv = randn(static_cast<size_t>(T * 3 * dim), 5), out1(T * dim), out2(T * dim);
  ops.vision_attention(f32(qkv, {T, 3 * dim}), VisionAttentionParams{gh, gw, H, 1e4f}, f32(out1, {T, dim}));
  qkv[(T - 1) * 3 * dim + 2 * dim] += 1.0f;
  ops.vision_attention(f32(qkv, {T, 3 * dim}), VisionAttentionParams{gh, gw, H, 1e4f}, f32(out2, {T, dim}));
  EXPECT_NE(out1[0], out2[0]);
}

TEST(VisionOps, AttentionBf16OutputIsRoundedReference) {
  CpuOps ops;
  const int64_t gh = 3, gw = 3, H = 2, hd = 16, T = 9, dim = H * hd;
  std::vector<float> qkv = randn(static_cast<size_t>(T * 3 * dim), 13);
  for (float& v : qkv) v = tensor::round_bf16(v);
  std::vector<uint16_t> in(qkv.size()), out(static_cast<size_t>(T * dim));
  for (size_t i = 0; i < qkv.size(); ++i) in[i] = tensor::f32_to_bf16(qkv[i]);
  ops.vision_attention(TensorView::contiguous(in.data(), DType::kBF16, {T, 3 * dim}),
                       VisionAttentionParams{gh, gw, H, 1e4f},
                       TensorView::contiguous(out.data(), DType::kBF16, {T, dim}));
  // q and k rounded to BF16 after RoPE, the output once: within one BF16 rounding (2^-8 relative).
  const std::vector<double> want = attention_ref(qkv, gh, gw, H, hd, true);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(tensor::bf16_to_f32(out[i]), want[i], 4.5e-3 * std::fabs(want[i]) + 1e-6) << "element " << i;
}

TEST(VisionOps, AddBiasAndGeluErf) {
  CpuOps ops;
  std::vector<float> x = randn(12, 1, 2.0f), bias = randn(4, 2), y(12), g(12);
  ops.add_bias(f32(x, {3, 4}), f32(bias, {4}), f32(y, {3, 4}));
  for (int64_t i = 0; i < 12; ++i) ASSERT_EQ(y[i], x[i] + bias[i % 4]);
  ops.gelu_erf(f32(x, {3, 4}), f32(g, {3, 4}));
  for (int64_t i = 0; i < 12; ++i) {
    const double want = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    ASSERT_NEAR(g[i], want, 1e-6 * (1 + std::fabs(want)));
  }
  // The tanh approximation differs from erf GELU by ~1e-4 near |x| = 2: make sure it is not that.
  std::vector<float> two = {2.0f}, g2(1);
  ops.gelu_erf(f32(two, {1, 1}), f32(g2, {1, 1}));
  EXPECT_NEAR(g2[0], 1.9544997f, 2e-6);
}

}  // namespace
}  // namespace deepinfer::ops
