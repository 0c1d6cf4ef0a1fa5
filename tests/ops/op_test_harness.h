// Harness for CUDA-vs-CPU op conformance (ggml test-backend-ops style): host tensors with random
// (or integer-valued, where exactness is the point) contents, mirrored on the device, and error
// metrics. Every comparison also asserts the reference is non-zero, so an unwritten output fails.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "tensor/number_formats.h"

namespace deepinfer::testing {

using tensor::DType;
using tensor::TensorView;

class OpHarness : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
    gpu_ = std::make_unique<ops::cuda::CudaOps>();
  }

  // A host tensor (owned here) and its device mirror.
  struct Pair {
    TensorView host, dev;
  };
  Pair make(DType dtype, std::initializer_list<int64_t> shape) {
    host_bufs_.emplace_back(std::make_unique<tensor::Buffer>(bytes(dtype, shape)));
    Pair p;
    p.host = host_bufs_.back()->view(dtype, shape);
    p.dev = gpu_->alloc_persistent(dtype, shape);
    // alloc_persistent zero-fills on the ops' (non-blocking) stream; the tests also launch kernels
    // straight on the legacy stream, which does not wait for it: a late fill could zero an output
    // after its kernel wrote it (seen once: cuda_validation_h100_2026-12-06_v106.json) — or two
    // outputs a bitwise comparison then finds equal. Done before the tensor is handed out.
    gpu_->synchronize();
    return p;
  }
  // Fills with N(0, scale) (or integers in [-range, range] when `integers`), mirrored to the GPU.
  Pair random(DType dtype, std::initializer_list<int64_t> shape, float scale = 1.0f, bool integers = false,
              int range = 3) {
    Pair p = make(dtype, shape);
    std::normal_distribution<float> nd(0.0f, scale);
    std::uniform_int_distribution<int> id(-range, range);
    for (int64_t i = 0; i < p.host.numel(); ++i) set(p.host, i, integers ? static_cast<float>(id(rng_)) : nd(rng_));
    upload(p);
    return p;
  }
  void upload(const Pair& p) { gpu_->copy(p.host, p.dev); }
  std::vector<float> download(const TensorView& dev) {
    std::vector<float> out(static_cast<size_t>(dev.numel()));
    tensor::Buffer tmp(dev.nbytes());
    TensorView h = TensorView::contiguous(tmp.data(), dev.dtype, dev.shape.data(), dev.rank);
    gpu_->copy(dev, h);
    for (int64_t i = 0; i < dev.numel(); ++i) out[i] = get(h, i);
    return out;
  }
  std::vector<float> values(const TensorView& host) {
    std::vector<float> out(static_cast<size_t>(host.numel()));
    for (int64_t i = 0; i < host.numel(); ++i) out[i] = get(host, i);
    return out;
  }
  // max |a - b| / max(max |b|, tiny); expects a non-zero reference.
  static float rel_error(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    float num = 0.0f, den = 0.0f;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
      num = std::max(num, std::fabs(a[i] - b[i]));
      den = std::max(den, std::fabs(b[i]));
    }
    EXPECT_GT(den, 0.0f) << "reference output is all zeros";
    return num / std::max(den, 1e-30f);
  }

  // ||a - b||_2 / ||b||_2: insensitive to a few rounding flips of an intermediate (each moves a
  // handful of outputs by a few % of the largest), not to a wrong tile, scale or row (>= 10%).
  static float l2_rel_error(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
      const double d = static_cast<double>(a[i]) - b[i];
      num += d * d;
      den += static_cast<double>(b[i]) * b[i];
    }
    EXPECT_GT(den, 0.0) << "reference output is all zeros";
    return static_cast<float>(std::sqrt(num / std::max(den, 1e-300)));
  }

  static void set(const TensorView& v, int64_t i, float x) {
    switch (v.dtype) {
      case DType::kF32: v.as<float>()[i] = x; break;
      case DType::kBF16: v.as<uint16_t>()[i] = tensor::f32_to_bf16(x); break;
      case DType::kI32: v.as<int32_t>()[i] = static_cast<int32_t>(x); break;
      default: FAIL() << "set: dtype";
    }
  }
  static float get(const TensorView& v, int64_t i) {
    switch (v.dtype) {
      case DType::kF32: return v.as<float>()[i];
      case DType::kBF16: return tensor::bf16_to_f32(v.as<uint16_t>()[i]);
      case DType::kI32: return static_cast<float>(v.as<int32_t>()[i]);
      default: return NAN;
    }
  }
  static size_t bytes(DType dtype, std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return static_cast<size_t>(n) * tensor::dtype_size(dtype);
  }

  ops::cpu::CpuOps cpu_;
  std::unique_ptr<ops::cuda::CudaOps> gpu_;
  std::mt19937 rng_{1234};
  std::vector<std::unique_ptr<tensor::Buffer>> host_bufs_;
};

}  // namespace deepinfer::testing
