// CpuOps linear algebra: y = x W^T for every LinearWeight format, with optional FP8 activation
// quantisation (§3.2). Weights are dequantised one output row at a time (exact: every stored
// format times its power-of-two or F32 scale is representable in F32), then dotted with the
// F32 activations (dot(): double accumulation, one rounding), so the math is the reference's up
// to summation order. With an FP8-order step model (CpuOps::set_fp8_order_model; from the
// environment under DEEPINFER_GEMM_FP8_ORDER=1) the launches the CUDA backend sends to its FP8-order
// kernels are computed in that order instead (fp8_order_ref.h), so the GPU's FP8 order can be held
// to the reference bit for bit per GEMM.
#include <vector>

#include "kernels/gemm/fp8_gemv_plan.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/fp8_order_ref.h"

namespace deepinfer::ops::cpu {
namespace {

// Whether the CUDA backend's FP8 order takes this launch (launch_fp8_gemm.h, for either kernel: they
// give a row the same bits): FP8 weights with UE8M0 scales in 128-input x (power of two >= 64)-output
// blocks, K per fp8_order_k_ok, activations FP8-quantised per 128 inputs (now or already), a dense
// ungrouped launch — not plain numerics, whose F32 activations take the F32 GEMM. (Its alignment
// conditions hold for every projection of the model: rows of whole 128-input blocks.)
bool takes_fp8_order(const TensorView& x, const LinearWeight& w, const LinearOptions& o) {
  if (w.format != tensor::WeightFormat::kFp8Block || w.scale.dtype == DType::kF32) return false;
  if (!kernels::fp8_order_scale_blocks_ok(w.block_in, w.block_out) || !kernels::fp8_order_k_ok(w.in)) return false;
  if (x.dtype == DType::kF32 && o.act_quant_block == 0) return false;
  return o.act_quant_block == kernels::kFp8GemvBlock ||
         (o.act_quant_block == 0 && o.act_fp8_block == kernels::kFp8GemvBlock);
}

// yf [T, out] = the FP8 order's dot products of xf [T, in] (values FP8-quantised per 128 inputs)
// with w: each 128-input block of a row as E4M3 codes under its power-of-two scale (re-deriving the
// scale from the quantised values may halve it — the codes then double, and every product with
// them: the tensor core's alignment is relative, so the sums scale exactly).
void fp8_order_linear(const std::vector<float>& xf, int64_t T, const LinearWeight& w, const Fp8MmaModel& model,
                      std::vector<float>& yf) {
  constexpr int kBlock = kernels::kFp8GemvBlock;
  const int64_t in = w.in, out = w.out, kb = in / kBlock;
  std::vector<uint8_t> codes(static_cast<size_t>(T * in));  // [T, in]
  std::vector<float> scales(static_cast<size_t>(T * kb));   // [T, kb]
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < kb; ++b) {
      const float* v = &xf[t * in + b * kBlock];
      const int k = fp8_block_scale_exponent(v, kBlock);
      scales[t * kb + b] = std::ldexp(1.0f, k);
      for (int i = 0; i < kBlock; ++i) codes[t * in + b * kBlock + i] = tensor::f32_to_e4m3(std::ldexp(v[i], -k));
    }
  }
#pragma omp parallel
  {
    std::vector<float> w_scale(static_cast<size_t>(kb));  // [kb]
#pragma omp for schedule(dynamic, 16)
    for (int64_t o = 0; o < out; ++o) {
      const auto* w_codes = static_cast<const uint8_t*>(w.weight.at({o}));  // [in]
      for (int64_t b = 0; b < kb; ++b) w_scale[b] = w.scale_at(o, b * kBlock);
      for (int64_t t = 0; t < T; ++t)
        yf[t * out + o] = fp8_order_dot(&codes[t * in], &scales[t * kb], w_codes, w_scale.data(), in, model);
    }
  }
}

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
  if (fp8_order_ && takes_fp8_order(x, w, options)) {
    fp8_order_linear(xf, T, w, *fp8_order_, yf);
    write_f32(y, 0, T * out, yf.data());
    return;
  }
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
