// CpuOps RoPE (interleaved pairs on the tail dims, §4.4) and the in-graph fake-quantisers (§3.3).
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {

void CpuOps::rope(const TensorView& x, const TensorView& positions, const RopeParams& params) {
  check_activation(x, "rope");
  const int64_t N = x.shape[0];
  const int64_t width = row_width(x);               // head_dim
  const int64_t heads = x.numel() / (N * width);    // heads per row (1 for a [N, d] tensor)
  const int64_t half = params.n_rope / 2;
  const float* inv_freq = params.inv_freq.as<const float>();
  const int32_t* pos = positions.as<const int32_t>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
      // The angle is formed in F32 as the reference does; cos/sin of that value in double.
      const float angle = static_cast<float>(pos[n]) * inv_freq[i];
      c[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      s[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * (params.inverse ? -1.0f : 1.0f);
    }
    std::vector<float> v(static_cast<size_t>(params.n_rope));
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t off = (n * heads + h) * width + (width - params.n_rope);
      read_f32(x, off, params.n_rope, v.data());
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c[i] - x1 * s[i];
        v[2 * i + 1] = x0 * s[i] + x1 * c[i];
      }
      write_f32(x, off, params.n_rope, v.data());
    }
  }
}

void CpuOps::fp8_fake_quant(const TensorView& x, int64_t n_dims, int block) {
  check_activation(x, "fp8_fake_quant");
  const int64_t rows = n_rows(x), width = row_width(x);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> v(static_cast<size_t>(n_dims));
    read_f32(x, r * width, n_dims, v.data());
    fp8_quant_dequant(v.data(), n_dims, block);
    write_f32(x, r * width, n_dims, v.data());
  }
}

namespace {

// In-place normalised fast Walsh-Hadamard transform (Sylvester / natural order).
void hadamard(float* v, int64_t n) {
  for (int64_t len = 1; len < n; len <<= 1) {
    for (int64_t i = 0; i < n; i += len << 1) {
      for (int64_t j = i; j < i + len; ++j) {
        const float a = v[j], b = v[j + len];
        v[j] = a + b;
        v[j + len] = a - b;
      }
    }
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) v[i] *= norm;
}

// FP4 E2M1 quantise-dequantise in blocks of 32, scale 2^ceil(log2(max(amax, 6*2^-126) / 6)).
void fp4_quant_dequant(float* v, int64_t n) {
  const float floor_amax = 6.0f * std::ldexp(1.0f, -126);
  for (int64_t b0 = 0; b0 < n; b0 += 32) {
    float amax = floor_amax;
    for (int64_t i = b0; i < b0 + 32 && i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
    const int k = tensor::pow2_scale_exponent(amax, 6.0f);
    const float s = std::ldexp(1.0f, k), inv = std::ldexp(1.0f, -k);
    for (int64_t i = b0; i < b0 + 32 && i < n; ++i) v[i] = tensor::round_e2m1(v[i] * inv) * s;
  }
}

}  // namespace

void CpuOps::hadamard_fp4_fake_quant(const TensorView& x) {
  check_activation(x, "hadamard_fp4_fake_quant");
  const int64_t rows = n_rows(x), n = row_width(x);
  DI_CHECK((n & (n - 1)) == 0, "Hadamard size {} is not a power of two", n);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> v(static_cast<size_t>(n));
    read_f32(x, r * n, n, v.data());
    hadamard(v.data(), n);
    fp4_quant_dequant(v.data(), n);
    write_f32(x, r * n, n, v.data());
  }
}

}  // namespace deepinfer::ops::cpu
