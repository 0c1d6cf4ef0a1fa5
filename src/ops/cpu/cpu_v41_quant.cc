// CpuOps V4.1 KV quantizers (model_v41_flash.md §3.4): FP8 window KV with power-of-two scales per
// 32, FP4 main KV with E4M3 scales per 16, FP4 index keys/queries with power-of-two scales per 32.
// Scale exponents are exact (frexp), not log2-based: 2^ceil(log2 t) for any normal t.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {
namespace {

// 2^ceil(log2(t)) for t > 0, exactly.
float pow2_ceil(float t) {
  int e = 0;
  const float m = std::frexp(t, &e);  // t = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
}

void quant_block(float* v, int64_t n, KvQuantFormat format) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  switch (format) {
    case KvQuantFormat::kFp8Pow2x32: {
      const float s = pow2_ceil(std::max(amax, 1e-4f) * (1.0f / 448.0f));
      for (int64_t i = 0; i < n; ++i) v[i] = tensor::round_e4m3(v[i] / s) * s;
      return;
    }
    case KvQuantFormat::kFp4E4m3x16: {
      const float s = tensor::round_e4m3(std::max(amax, 6.0f * std::ldexp(1.0f, -9)) / 6.0f);
      for (int64_t i = 0; i < n; ++i) v[i] = tensor::round_e2m1(v[i] / s) * s;
      return;
    }
    case KvQuantFormat::kFp4Pow2x32: {
      const float s = pow2_ceil(std::max(amax, 6.0f * std::ldexp(1.0f, -126)) * (1.0f / 6.0f));
      for (int64_t i = 0; i < n; ++i) v[i] = tensor::round_e2m1(v[i] / s) * s;
      return;
    }
  }
}

int block_of(KvQuantFormat format) { return format == KvQuantFormat::kFp4E4m3x16 ? 16 : 32; }

}  // namespace

void CpuOps::kv_fake_quant(const TensorView& x, KvQuantFormat format) {
  check_activation(x, "kv_fake_quant");
  const int64_t rows = n_rows(x), width = row_width(x), block = block_of(format);
  DI_CHECK(width % block == 0, "kv_fake_quant: row width {} is not a multiple of {}", width, block);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> v(static_cast<size_t>(width));
    read_f32(x, r * width, width, v.data());
    for (int64_t b = 0; b < width; b += block) quant_block(&v[b], block, format);
    write_f32(x, r * width, width, v.data());
  }
}

}  // namespace deepinfer::ops::cpu
