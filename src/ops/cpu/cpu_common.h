// Helpers shared by the CPU reference ops: reading and writing activation rows in F32 or BF16,
// the dot product every reduction uses (fixed summation order, so results never depend on the
// batch or the thread count), and the FP8 activation quantiser.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/check.h"
#include "tensor/number_formats.h"
#include "tensor/tensor.h"

namespace deepinfer::ops::cpu {

using tensor::DType;
using tensor::TensorView;

inline int64_t n_rows(const TensorView& x) { return x.rank == 0 ? 0 : x.numel() / x.shape[x.rank - 1]; }
inline int64_t row_width(const TensorView& x) { return x.shape[x.rank - 1]; }

inline void check_activation(const TensorView& x, const char* what) {
  DI_CHECK(x.device == tensor::Device::kCpu, "{}: CPU op given a device tensor", what);
  DI_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16, "{}: activation dtype {}", what,
           tensor::dtype_name(x.dtype));
  DI_CHECK(x.is_contiguous(), "{}: needs a contiguous tensor {}", what, x.shape_string());
}

// Reads n values starting at flat element `offset` as F32.
inline void read_f32(const TensorView& x, int64_t offset, int64_t n, float* dst) {
  if (x.dtype == DType::kF32) {
    const float* p = x.as<const float>() + offset;
    for (int64_t i = 0; i < n; ++i) dst[i] = p[i];
  } else {
    const uint16_t* p = x.as<const uint16_t>() + offset;
    for (int64_t i = 0; i < n; ++i) dst[i] = tensor::bf16_to_f32(p[i]);
  }
}

// Writes n F32 values at flat element `offset`, rounding to BF16 when the tensor is BF16.
inline void write_f32(const TensorView& x, int64_t offset, int64_t n, const float* src) {
  if (x.dtype == DType::kF32) {
    float* p = x.as<float>() + offset;
    for (int64_t i = 0; i < n; ++i) p[i] = src[i];
  } else {
    uint16_t* p = x.as<uint16_t>() + offset;
    for (int64_t i = 0; i < n; ++i) p[i] = tensor::f32_to_bf16(src[i]);
  }
}

inline std::vector<float> read_row(const TensorView& x, int64_t row) {
  const int64_t n = row_width(x);
  std::vector<float> v(static_cast<size_t>(n));
  read_f32(x, row * n, n, v.data());
  return v;
}

// Sum of a[i]*b[i] with eight interleaved partial sums combined in a fixed order, accumulated in
// double (every F32 product is exact there) and rounded to F32 once. The result is then within
// one rounding of the exact dot product, so values that the reference quantises to FP8/FP4 land
// on the side of a rounding midpoint where the exact value lies — an F32 sum misplaced one such
// value against transformers' V4.1 port (docs/v41.md). The CUDA backend's plain F32 GEMM does the
// same operations in the same order (bitwise equal).
inline float dot(const float* a, const float* b, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(a[i + k]) * b[i + k];
  }
  for (; i < n; ++i) acc[i % 8] += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])));
}

// The exponent k of the power-of-two FP8 E4M3 scale of the block x[0, n):
// 2^k = 2^ceil(log2(max(amax, 1e-4) / 448)) (the reference's act_quant and KV fake-quant).
inline int fp8_block_scale_exponent(const float* x, int64_t n) {
  float amax = 1e-4f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return tensor::pow2_scale_exponent(amax, 448.0f);
}

// FP8 E4M3 quantise-dequantise of x[0, n) in blocks of `block` (fp8_block_scale_exponent's scales).
inline void fp8_quant_dequant(float* x, int64_t n, int block) {
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min<int64_t>(n, b0 + block);
    const int k = fp8_block_scale_exponent(&x[b0], b1 - b0);
    const float s = std::ldexp(1.0f, k), inv = std::ldexp(1.0f, -k);
    for (int64_t i = b0; i < b1; ++i) x[i] = tensor::round_e4m3(x[i] * inv) * s;
  }
}

}  // namespace deepinfer::ops::cpu
