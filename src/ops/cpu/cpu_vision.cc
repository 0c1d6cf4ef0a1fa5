// CpuOps for the V4.1 vision tower (model_v41_flash.md §8): bias add, exact GELU, the ViT's 2D
// rotary embedding and its full bidirectional attention over one image's patches. F32 math;
// outputs rounded once to their tensor's dtype (BF16 under the official numerics).
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {
namespace {

void check_vision_params(const VisionAttentionParams& p, int64_t T, int64_t hd, const char* what) {
  DI_CHECK(p.grid_h > 0 && p.grid_w > 0 && p.n_heads > 0, "{}: grid {}x{}, {} heads", what, p.grid_h, p.grid_w,
           p.n_heads);
  DI_CHECK(p.grid_h * p.grid_w == T, "{}: {} rows for a {}x{} patch grid", what, T, p.grid_h, p.grid_w);
  DI_CHECK(hd > 0 && hd % 4 == 0, "{}: head_dim {} is not a multiple of 4", what, hd);
}

// f_i = theta^(-2i / (hd/2)) for i < hd/4: each grid axis gets hd/4 frequencies of an hd/2-wide
// rotary table (hd 64: the spec's theta^(-2i/32), i < 16). F32, as the reference computes it.
std::vector<float> vision_freqs(int64_t hd, float theta) {
  const int64_t quarter = hd / 4;
  std::vector<float> f(static_cast<size_t>(quarter));
  for (int64_t i = 0; i < quarter; ++i)
    f[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(hd / 2));
  return f;
}

// Rotate-half RoPE of one head vector v[0, hd) of the patch at (row, col): dim j pairs with
// j + hd/2; angle j = row * f_j for j < hd/4, col * f_(j - hd/4) for hd/4 <= j < hd/2.
void rope_head(float* v, int64_t hd, int64_t row, int64_t col, const std::vector<float>& f) {
  const int64_t half = hd / 2, quarter = hd / 4;
  for (int64_t j = 0; j < half; ++j) {
    const float angle = j < quarter ? static_cast<float>(row) * f[j] : static_cast<float>(col) * f[j - quarter];
    const float c = std::cos(angle), s = std::sin(angle);
    const float x1 = v[j], x2 = v[j + half];
    v[j] = x1 * c - x2 * s;
    v[j + half] = x2 * c + x1 * s;
  }
}

}  // namespace

void CpuOps::add_bias(const TensorView& x, const TensorView& bias, const TensorView& out) {
  check_activation(x, "add_bias x");
  check_activation(out, "add_bias out");
  const int64_t rows = n_rows(x), n = row_width(x);
  DI_CHECK(bias.numel() == n && out.numel() == x.numel(), "add_bias: x {} bias {} out {}", x.shape_string(),
           bias.shape_string(), out.shape_string());
  std::vector<float> b(static_cast<size_t>(n));
  read_f32(bias, 0, n, b.data());
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> v(static_cast<size_t>(n));
    read_f32(x, r * n, n, v.data());
    for (int64_t i = 0; i < n; ++i) v[i] += b[i];
    write_f32(out, r * n, n, v.data());
  }
}

void CpuOps::gelu_erf(const TensorView& x, const TensorView& out) {
  check_activation(x, "gelu_erf x");
  check_activation(out, "gelu_erf out");
  DI_CHECK(x.numel() == out.numel(), "gelu_erf: x {} out {}", x.shape_string(), out.shape_string());
  const int64_t n = x.numel();
  std::vector<float> v(static_cast<size_t>(n));
  read_f32(x, 0, n, v.data());
  const float inv_sqrt2 = 0.70710678118654752f;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) v[i] = 0.5f * v[i] * (1.0f + std::erf(v[i] * inv_sqrt2));
  write_f32(out, 0, n, v.data());
}

void CpuOps::vision_rope(const TensorView& x, const VisionAttentionParams& params) {
  check_activation(x, "vision_rope");
  DI_CHECK(x.rank == 3 && x.shape[1] == params.n_heads, "vision_rope: x {} for {} heads", x.shape_string(),
           params.n_heads);
  const int64_t T = x.shape[0], H = x.shape[1], hd = x.shape[2];
  check_vision_params(params, T, hd, "vision_rope");
  const std::vector<float> f = vision_freqs(hd, params.rope_theta);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> v(static_cast<size_t>(hd));
    for (int64_t h = 0; h < H; ++h) {
      read_f32(x, (t * H + h) * hd, hd, v.data());
      rope_head(v.data(), hd, t / params.grid_w, t % params.grid_w, f);
      write_f32(x, (t * H + h) * hd, hd, v.data());
    }
  }
}

void CpuOps::vision_attention(const TensorView& qkv, const VisionAttentionParams& params, const TensorView& out) {
  check_activation(qkv, "vision_attention qkv");
  check_activation(out, "vision_attention out");
  const int64_t T = n_rows(qkv), width = row_width(qkv), H = params.n_heads;
  DI_CHECK(H > 0 && width % (3 * H) == 0, "vision_attention: qkv {} for {} heads", qkv.shape_string(), H);
  const int64_t hd = width / (3 * H), dim = H * hd;
  check_vision_params(params, T, hd, "vision_attention");
  DI_CHECK(n_rows(out) == T && row_width(out) == dim, "vision_attention: out {} for qkv {}", out.shape_string(),
           qkv.shape_string());
  const std::vector<float> f = vision_freqs(hd, params.rope_theta);
  // Head-major F32 copies [H, T, hd] of q and k (RoPE applied) and of v. With a BF16 qkv the
  // rotated q and k are rounded to BF16, as the reference keeps them before its attention call.
  const bool round_qk = qkv.dtype == DType::kBF16;
  std::vector<float> q(static_cast<size_t>(H * T * hd)), k(q.size()), v(q.size());
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> row(static_cast<size_t>(width));
    read_f32(qkv, t * width, width, row.data());
    for (int64_t h = 0; h < H; ++h) {
      float* qh = &q[(h * T + t) * hd];
      float* kh = &k[(h * T + t) * hd];
      for (int64_t c = 0; c < hd; ++c) {
        qh[c] = row[h * hd + c];
        kh[c] = row[dim + h * hd + c];
        v[(h * T + t) * hd + c] = row[2 * dim + h * hd + c];
      }
      rope_head(qh, hd, t / params.grid_w, t % params.grid_w, f);
      rope_head(kh, hd, t / params.grid_w, t % params.grid_w, f);
      if (round_qk) {
        for (int64_t c = 0; c < hd; ++c) {
          qh[c] = tensor::round_bf16(qh[c]);
          kh[c] = tensor::round_bf16(kh[c]);
        }
      }
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // One (token, head) output per iteration: softmax over every patch of the image (no mask).
#pragma omp parallel for schedule(dynamic)
  for (int64_t th = 0; th < T * H; ++th) {
    const int64_t t = th / H, h = th % H;
    const float* qh = &q[(h * T + t) * hd];
    std::vector<float> z(static_cast<size_t>(T)), o(static_cast<size_t>(hd), 0.0f);
    float mx = -INFINITY;
    for (int64_t j = 0; j < T; ++j) mx = std::max(mx, z[j] = dot(qh, &k[(h * T + j) * hd], hd) * scale);
    float den = 0.0f;
    for (int64_t j = 0; j < T; ++j) den += (z[j] = std::exp(z[j] - mx));
    for (int64_t j = 0; j < T; ++j) {
      const float p = z[j] / den;
      const float* vj = &v[(h * T + j) * hd];
      for (int64_t c = 0; c < hd; ++c) o[c] += p * vj[c];
    }
    write_f32(out, t * dim + h * hd, hd, o.data());
  }
}

}  // namespace deepinfer::ops::cpu
