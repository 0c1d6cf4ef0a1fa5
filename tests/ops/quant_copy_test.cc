// The FP8-GEMM inputs quantised by their producers (ops.h QuantCopy) on the CPU reference: a GEMM
// on a quantised copy with no further quantisation is bitwise the GEMM quantising the input itself
// (the claim the V4 forward's producers stand on), and the producer calls the model makes — the
// norm and SwiGLU with their outputs quantised, the mHC collapse with u's copy, prequantise — give
// the bits of the separate ops.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops {
namespace {

class QuantCopyTest : public ::testing::Test {
 protected:
  // [rows, n] of N(0, scale) in dtype.
  TensorView random(DType dtype, std::initializer_list<int64_t> shape, float scale) {
    TensorView t = ops_.alloc_persistent(dtype, shape);
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (float& x : v) x = nd(rng_);
    TensorView src = ops_.alloc_persistent(DType::kF32, shape);
    std::copy(v.begin(), v.end(), src.as<float>());
    ops_.convert(src, t);
    return t;
  }
  std::vector<float> floats(const TensorView& t) {
    TensorView f = ops_.alloc_persistent(DType::kF32, {t.numel()});
    ops_.convert(t, f);
    return {f.as<float>(), f.as<float>() + t.numel()};
  }
  cpu::CpuOps ops_;
  std::mt19937 rng_{7};
};

TEST_F(QuantCopyTest, GemmOnAQuantisedCopyIsBitwiseTheQuantisingGemm) {
  const int64_t T = 3, K = 384, N = 40;
  LinearWeight w;
  w.format = tensor::WeightFormat::kBF16;
  w.out = N;
  w.in = K;
  w.weight = random(DType::kBF16, {N, K}, 0.05f);
  const TensorView x = random(DType::kBF16, {T, K}, 3.0f);
  const QuantCopy xq{ops_.alloc_persistent(DType::kBF16, {T, K}), 128};
  ops_.quant_copy(x, xq);
  const TensorView a = ops_.alloc_persistent(DType::kF32, {T, N}), b = ops_.alloc_persistent(DType::kF32, {T, N});
  ops_.linear(x, w, a, {128});
  ops_.linear(xq.out, w, b, {});
  EXPECT_EQ(floats(a), floats(b));
  // The copy did change the input, and quantising matters to the GEMM (else this test could not
  // tell the two GEMMs apart).
  EXPECT_NE(floats(x), floats(xq.out));
  ops_.linear(x, w, b, {});
  EXPECT_NE(floats(a), floats(b));
}

TEST_F(QuantCopyTest, ProducersGiveTheBitsOfTheSeparateOps) {
  const int64_t T = 2, n = 256;
  const TensorView x = random(DType::kBF16, {T, n}, 2.0f), w = random(DType::kBF16, {n}, 0.5f);
  const TensorView a = ops_.alloc_persistent(DType::kBF16, {T, n}), b = ops_.alloc_persistent(DType::kBF16, {T, n});
  ops_.rms_norm_quant(x, w, 1e-6f, a, 128);
  ops_.rms_norm(x, w, 1e-6f, b);
  ops_.fp8_fake_quant(b, n, 128);
  EXPECT_EQ(floats(a), floats(b));
  const TensorView g = random(DType::kBF16, {T, n}, 4.0f), u = random(DType::kBF16, {T, n}, 4.0f);
  ops_.swiglu_quant(g, u, 10.0f, a, 128);
  ops_.swiglu(g, u, 10.0f, b);
  ops_.fp8_fake_quant(b, n, 128);
  EXPECT_EQ(floats(a), floats(b));
  // Block 0 (plain numerics): the op alone.
  ops_.rms_norm_quant(x, w, 1e-6f, a, 0);
  ops_.rms_norm(x, w, 1e-6f, b);
  EXPECT_EQ(floats(a), floats(b));
  ops_.swiglu_quant(g, u, 10.0f, a, 0);
  ops_.swiglu(g, u, 10.0f, b);
  EXPECT_EQ(floats(a), floats(b));
  // The reference backend leaves the quantisation to the GEMM.
  EXPECT_EQ(ops_.prequantise(a, 128).act_quant_block, 128);
}

TEST_F(QuantCopyTest, HcPreNormWritesTheQuantisedCopyOfU) {
  const int64_t T = 2, hc = 4, D = 256;
  const TensorView x = random(DType::kBF16, {T, hc, D}, 1.0f);
  const TensorView fn = random(DType::kF32, {(2 + hc) * hc, hc * D}, 0.01f);
  const TensorView base = random(DType::kF32, {(2 + hc) * hc}, 0.5f), scale = random(DType::kF32, {3}, 0.1f);
  const TensorView norm = random(DType::kBF16, {D}, 0.5f);
  const HcWeights hw{fn, base, scale};
  const HcParams hp;
  auto out = [&] { return ops_.alloc_persistent(DType::kBF16, {T, D}); };
  const TensorView post = ops_.alloc_persistent(DType::kF32, {T, hc}), comb = ops_.alloc_persistent(DType::kF32, {T, hc, hc});
  const TensorView u = out(), u2 = out();
  const QuantCopy uq{out(), 128};
  ops_.hc_pre_norm(x, hw, hp, norm, 1e-6f, u, post, comb, uq);
  ops_.hc_pre_norm(x, hw, hp, norm, 1e-6f, u2, post, comb, {});
  EXPECT_EQ(floats(u), floats(u2));
  const TensorView q = out();
  ops_.convert(u2, q);
  ops_.fp8_fake_quant(q, D, 128);
  EXPECT_EQ(floats(uq.out), floats(q));
}

}  // namespace
}  // namespace deepinfer::ops
