// CpuOps linear algebra: y = x W^T for every LinearWeight format, with optional FP8 activation
// quantisation (§3.2). Weights are dequantised one output row at a time (exact: every stored
// format times its power-of-two or F32 scale is representable in F32), then dotted with the
// F32 activations (dot(): double accumulation, one rounding), so the math is the reference's up
// to summation order.
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {
namespace {

// Activations [T, in] as F32, FP8-quantised per block when asked.
std::vector<float> prepare_activations(const TensorView& x, int64_t T, int64_t in, int act_quant_block) {
  std::vector<float> xf(static_cast<size_t>(T * in));
  read_f32(x, 0, T * in, xf.data());
  if (act_quant_block > 0) {
    for (int64_t t = 0; t < T; ++t) fp8_quant_dequant(&xf[t * in], in, act_quant_block);
  }
  return xf;
}

}  // namespace

void CpuOps::linear(const TensorView& x, const LinearWeight& w, const TensorView& y, const LinearOptions& options) {
  check_activation(x, "linear x");
  check_activation(y, "linear y");
  const int64_t in = w.in, out = w.out;
  const int64_t T = n_rows(x);
  DI_CHECK(row_width(x) == in, "linear: x {} vs weight {}", x.shape_string(), w.describe());
  DI_CHECK(n_rows(y) == T && row_width(y) == out, "linear: y {} vs weight {}", y.shape_string(), w.describe());
  const std::vector<float> xf = prepare_activations(x, T, in, options.act_quant_block);
  std::vector<float> yf(static_cast<size_t>(T * out));
#pragma omp parallel
  {
    std::vector<float> wrow(static_cast<size_t>(in));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < out; ++o) {
      w.dequantize_row(o, wrow.data());
      for (int64_t t = 0; t < T; ++t) yf[t * out + o] = dot(&xf[t * in], wrow.data(), in);
    }
  }
  write_f32(y, 0, T * out, yf.data());
}

void CpuOps::linear_grouped(const TensorView& x, const LinearWeight& w, const TensorView& y,
                            const LinearOptions& options) {
  check_activation(x, "linear_grouped x");
  check_activation(y, "linear_grouped y");
  const int64_t T = x.shape[0], G = x.shape[1], in_g = x.shape[2], R = y.shape[2];
  DI_CHECK(w.in == in_g && w.out == G * R, "linear_grouped: x {} y {} weight {}", x.shape_string(),
           y.shape_string(), w.describe());
  const std::vector<float> xf = prepare_activations(x, T * G, in_g, options.act_quant_block);
  std::vector<float> yf(static_cast<size_t>(T * G * R));
#pragma omp parallel
  {
    std::vector<float> wrow(static_cast<size_t>(in_g));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < G * R; ++o) {
      const int64_t g = o / R, r = o % R;
      w.dequantize_row(o, wrow.data());
      for (int64_t t = 0; t < T; ++t) yf[(t * G + g) * R + r] = dot(&xf[(t * G + g) * in_g], wrow.data(), in_g);
    }
  }
  write_f32(y, 0, T * G * R, yf.data());
}

}  // namespace deepinfer::ops::cpu
