// The CUDA op tests' fixture (cuda_ops_test.cc, cuda_ops_fp8_order_test.cc, cuda_ops_moe_test.cc):
// the harness plus random weights stored in the checkpoint's formats (BF16, FP8 128 x 128 blocks,
// FP4 1 x 32 blocks) on the host and the device.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "op_test_harness.h"

namespace deepinfer::testing {

using tensor::LinearWeight;
using tensor::WeightFormat;

class CudaOpsTest : public OpHarness {
 protected:
  struct Linear {
    LinearWeight host, dev;
  };
  void moe_batch_invariance(int64_t E, int act_block, int64_t F = 256, int64_t D = 1024);
  void moe_matches_cpu(int64_t D, int64_t F);
  void hc_batch_invariance(int64_t D);
  // E experts of random FP4 weights (w1, w3: [F, D], w2: [D, F]) on the device; `keep` owns them.
  std::vector<tensor::ExpertWeights> make_fp4_experts(int64_t E, int64_t D, int64_t F, std::vector<Linear>& keep) {
    std::vector<tensor::ExpertWeights> ed;
    for (int64_t e = 0; e < E; ++e) {
      keep.push_back(make_linear(WeightFormat::kFp4Block, F, D));
      keep.push_back(make_linear(WeightFormat::kFp4Block, D, F));
      keep.push_back(make_linear(WeightFormat::kFp4Block, F, D));
      ed.push_back({keep[keep.size() - 3].dev, keep[keep.size() - 2].dev, keep.back().dev});
    }
    return ed;
  }
  // A random weight stored in `format` (quantised with the checkpoint's recipe).
  Linear make_linear(WeightFormat format, int64_t out, int64_t in, int block = 128) {
    std::normal_distribution<float> nd(0.0f, 1.0f / std::sqrt(static_cast<float>(in)));
    std::vector<float> w(static_cast<size_t>(out * in));
    for (float& v : w) v = nd(rng_);
    Linear l;
    l.host.format = l.dev.format = format;
    l.host.out = l.dev.out = out;
    l.host.in = l.dev.in = in;
    if (format == WeightFormat::kBF16) {
      Pair p = make(DType::kBF16, {out, in});
      for (int64_t i = 0; i < out * in; ++i) set(p.host, i, w[i]);
      upload(p);
      l.host.weight = p.host;
      l.dev.weight = p.dev;
      return l;
    }
    const bool fp4 = format == WeightFormat::kFp4Block;
    const int bo = fp4 ? 1 : block, bi = fp4 ? 32 : block;
    const int64_t sr = (out + bo - 1) / bo, sc = (in + bi - 1) / bi;
    host_bufs_.emplace_back(std::make_unique<tensor::Buffer>(fp4 ? out * in / 2 : out * in));
    TensorView qh = host_bufs_.back()->view(DType::kI8, {out, fp4 ? in / 2 : in});
    if (!fp4) qh.dtype = DType::kF8E4M3;
    host_bufs_.emplace_back(std::make_unique<tensor::Buffer>(sr * sc));
    TensorView sh = host_bufs_.back()->view(DType::kF8E8M0, {sr, sc});
    uint8_t* q = qh.as<uint8_t>();
    for (int64_t b = 0; b < sr * sc; ++b) {
      const int64_t r0 = (b / sc) * bo, c0 = (b % sc) * bi;
      float amax = 1e-30f;
      for (int64_t r = r0; r < std::min(out, r0 + bo); ++r)
        for (int64_t c = c0; c < std::min(in, c0 + bi); ++c) amax = std::max(amax, std::fabs(w[r * in + c]));
      const int k = tensor::pow2_scale_exponent(amax, fp4 ? 6.0f : 448.0f);
      sh.as<uint8_t>()[b] = tensor::e8m0_from_exponent(k);
      for (int64_t r = r0; r < std::min(out, r0 + bo); ++r)
        for (int64_t c = c0; c < std::min(in, c0 + bi); ++c) {
          const float v = std::ldexp(w[r * in + c], -k);
          if (fp4) {
            uint8_t& byte = q[(r * in + c) / 2];
            const uint8_t code = tensor::f32_to_e2m1(v);
            byte = (c % 2 == 0) ? static_cast<uint8_t>((byte & 0xf0) | code) : static_cast<uint8_t>((byte & 0x0f) | (code << 4));
          } else {
            q[r * in + c] = tensor::f32_to_e4m3(v);
          }
        }
    }
    TensorView qd = gpu_->alloc_persistent(qh.dtype, {qh.shape[0], qh.shape[1]});
    TensorView sd = gpu_->alloc_persistent(DType::kF8E8M0, {sr, sc});
    gpu_->copy(qh, qd);
    gpu_->copy(sh, sd);
    // FP4 codes reach the device as the loader's do: rewritten into the kernels' layout (the host
    // copy, which the CPU reference reads, keeps the checkpoint's).
    if (fp4) l.dev.fp4_device_layout = gpu_->to_fp4_device_layout(qd);
    EXPECT_EQ(l.dev.fp4_device_layout, fp4);
    l.host.weight = qh;
    l.host.scale = sh;
    l.dev.weight = qd;
    l.dev.scale = sd;
    l.host.block_out = l.dev.block_out = bo;
    l.host.block_in = l.dev.block_in = bi;
    return l;
  }
};

}  // namespace deepinfer::testing
