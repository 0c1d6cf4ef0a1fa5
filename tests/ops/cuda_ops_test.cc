// CUDA backend conformance: every op against the CPU reference on the same inputs, over shapes
// that exercise tails (1 token, non-multiples of tiles, split-K) and both activation dtypes.
// Tolerances: F32 paths 1e-5 relative (summation order), BF16 outputs 1e-2 (one BF16 ulp),
// integer-valued inputs where the math is exact (indexer selection) compare exactly.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/gemm/fp4_fold_layout.h"
#include "kernels/gemm/fp4_layout.h"
#include "op_test_harness.h"
#include "ops/cuda/launch_fp8_experts.h"

namespace deepinfer::testing {
namespace {

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

TEST_F(CudaOpsTest, LinearMatchesCpuForEveryFormatAndShape) {
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFp8Block, WeightFormat::kFp4Block}) {
    for (int64_t M : {1, 3, 17, 70}) {
      for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{64, 256}, {200, 256}, {96, 2048}, {1000, 128}}) {
        Linear w = make_linear(f, N, K);
        // Plain numerics: F32 activations, bit-exact with the CPU reference.
        Pair x = random(DType::kF32, {M, K});
        Pair y = make(DType::kF32, {M, N});
        cpu_.linear(x.host, w.host, y.host, {});
        gpu_->linear(x.dev, w.dev, y.dev, {});
        EXPECT_EQ(download(y.dev), values(y.host)) << "plain format " << int(f) << " M " << M << " N " << N << " K " << K;
        // Official numerics: BF16 activations quantised to FP8 per 128, BF16 output.
        Pair xb = random(DType::kBF16, {M, K});
        Pair yb = make(DType::kBF16, {M, N});
        cpu_.linear(xb.host, w.host, yb.host, {128});
        gpu_->linear(xb.dev, w.dev, yb.dev, {128});
        EXPECT_LE(rel_error(download(yb.dev), values(yb.host)), 1e-2f) << "official format " << int(f) << " M " << M;
        Pair yf = make(DType::kF32, {M, N});  // F32 output of the same tensor-core path
        cpu_.linear(xb.host, w.host, yf.host, {128});
        gpu_->linear(xb.dev, w.dev, yf.dev, {128});
        EXPECT_LE(rel_error(download(yf.dev), values(yf.host)), 1e-5f) << "official/F32 format " << int(f) << " M " << M;
      }
    }
  }
}

// Batch invariance of the tensor-core GEMMs: a row's output is bitwise the same whether it is
// computed alone or among 5 (streaming small-M kernel, transposed tiles), among 20 rows (its
// two-tile variant) or among 70 or
// 300 (tiled kernels: the pipelined one for whole 128-element K tiles, three 128-row tiles at 300,
// the general one for K = 4160 and 1000) — every kernel follows one canonical summation order
// (gemm_common.cuh). K = 4160 spans several sub-ranges with a ragged tail. With FP8 activation
// quantisation (per 128 as V4, per 32 as V4.1's) the streaming kernel quantises the rows in its
// own staging while the larger batches go through act_quant_bf16 first: the same bits.
TEST_F(CudaOpsTest, DequantGemmRowsAreBitwiseBatchInvariant) {
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFp8Block, WeightFormat::kFp4Block}) {
    // K = 4096: eight sub-ranges (partials folded by the last CTA of each column tile).
    for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{200, 256}, {96, 4096}, {72, 4160}, {40, 1000}}) {
      if (f == WeightFormat::kFp4Block && K % 32 != 0) continue;
      Linear w = make_linear(f, N, K);
      // BF16 activations as given, and BF16 or F32 ones FP8-quantised per 128 or 32 on the way in.
      for (auto [M, dt, block] : std::vector<std::tuple<int64_t, DType, int>>{{70, DType::kBF16, 0},
                                                                              {70, DType::kF32, 128},
                                                                              {70, DType::kBF16, 128},
                                                                              {70, DType::kBF16, 32},
                                                                              {300, DType::kBF16, 0}}) {
        Pair x = random(dt, {M, K});
        Pair y = make(DType::kF32, {M, N});
        gpu_->linear(x.dev, w.dev, y.dev, {block});
        const std::vector<float> all = download(y.dev);
        for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{20}}) {
          Pair xs = make(dt, {rows, K});
          for (int64_t i = 0; i < rows * K; ++i) set(xs.host, i, get(x.host, (M - rows) * K + i));  // the last rows
          upload(xs);
          Pair ys = make(DType::kF32, {rows, N});
          gpu_->linear(xs.dev, w.dev, ys.dev, {block});
          const std::vector<float> part = download(ys.dev);
          const std::vector<float> want(all.end() - rows * N, all.end());
          EXPECT_EQ(part, want) << "format " << int(f) << " N " << N << " K " << K << " M " << M << " rows " << rows
                                << " block " << block;
        }
      }
    }
  }
}

// The tensor-core kernels' weight decoders (the permute/multiply forms and their general paths
// for large scale codes) against the number formats' own decoding: every FP8 and FP4 code at scale
// codes across the whole range where the products stay normal F32 (FP8 10..245, so codes above
// 134 take the F32 path; FP4 2..252, above 128 the plain-scale path). One-hot activations make
// each output one dequantised weight, so the comparison is exact, for the streaming kernel
// (1 and 20 rows) and the large-M kernel (300 rows).
TEST_F(CudaOpsTest, DequantisedWeightsAreExactForEveryCodeAndScale) {
  for (WeightFormat f : {WeightFormat::kFp8Block, WeightFormat::kFp4Block}) {
    const bool fp4 = f == WeightFormat::kFp4Block;
    const int64_t N = fp4 ? 256 : 2048, K = fp4 ? 512 : 256;
    Linear w = make_linear(f, N, K);
    uint8_t* codes = w.host.weight.as<uint8_t>();
    uint8_t* scales = w.host.scale.as<uint8_t>();
    const int64_t scale_cols = w.host.scale.shape[1];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        if (fp4) {
          uint8_t& byte = codes[(n * K + k) / 2];
          const uint8_t code = static_cast<uint8_t>((n + k) % 16);
          byte = k % 2 == 0 ? static_cast<uint8_t>((byte & 0xf0) | code) : static_cast<uint8_t>((byte & 0x0f) | (code << 4));
        } else {
          const uint8_t code = static_cast<uint8_t>((n + 3 * k) % 256);
          codes[n * K + k] = (code & 0x7f) == 0x7f ? 0 : code;  // no NaN codes
        }
      }
    const int64_t n_scales = w.host.scale.shape[0] * scale_cols;
    for (int64_t i = 0; i < n_scales; ++i)
      scales[i] = static_cast<uint8_t>(fp4 ? 2 + i % 251 : 10 + i * 235 / (n_scales - 1));
    gpu_->copy(w.host.weight, w.dev.weight);
    if (fp4) {  // the rewritten codes reach the device anew
      ASSERT_TRUE(gpu_->to_fp4_device_layout(w.dev.weight));
    }
    gpu_->copy(w.host.scale, w.dev.scale);
    auto expected = [&](int64_t n, int64_t k) {
      if (fp4) {
        const uint8_t byte = codes[(n * K + k) / 2];
        return tensor::e2m1_to_f32(k % 2 == 0 ? byte & 0xf : byte >> 4) * tensor::e8m0_to_f32(scales[n * scale_cols + k / 32]);
      }
      return tensor::e4m3_to_f32(codes[n * K + k]) * tensor::e8m0_to_f32(scales[(n / 128) * scale_cols + k / 128]);
    };
    for (int64_t M : {1, 20, 300}) {
      Pair x = make(DType::kBF16, {M, K});
      std::vector<int64_t> hot(M);
      for (int64_t m = 0; m < M; ++m) {
        hot[m] = (m * 41 + 7) % K;
        set(x.host, m * K + hot[m], 1.0f);
      }
      upload(x);
      Pair y = make(DType::kF32, {M, N});
      gpu_->linear(x.dev, w.dev, y.dev, {});
      const std::vector<float> got = download(y.dev);
      int64_t bad = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
          if (got[m * N + n] != expected(n, hot[m]) && bad++ < 5)
            ADD_FAILURE() << "format " << int(f) << " M " << M << " row " << m << " col " << n << ": "
                          << got[m * N + n] << " != " << expected(n, hot[m]);
      EXPECT_EQ(bad, 0) << "format " << int(f) << " M " << M;
    }
  }
}

// linear_pair (one launch for two weights over the same input: a compressor's, a shared
// expert's, the query and KV latents) is bitwise the two linear() calls, in every kernel regime
// (streaming at 1 and 5 rows, its two-tile variant at 20, the tiled kernels at 70), also for
// weights of different widths, and falls back to them for weights of different formats.
TEST_F(CudaOpsTest, LinearPairIsBitwiseTwoLinears) {
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFp8Block, WeightFormat::kFp4Block}) {
    for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{200, 256}, {96, 4096}}) {
      Linear w0 = make_linear(f, N, K), w1 = make_linear(f, N, K), other = make_linear(f, N + 64, K);
      for (int64_t M : {1, 5, 20, 70}) {
        for (auto [dt, block, out] : std::vector<std::tuple<DType, int, DType>>{
                 {DType::kBF16, 128, DType::kBF16}, {DType::kBF16, 0, DType::kF32}, {DType::kF32, 0, DType::kF32}}) {
          Pair x = random(dt, {M, K});
          Pair a0 = make(out, {M, N}), a1 = make(out, {M, N}), b0 = make(out, {M, N}), b1 = make(out, {M, N});
          gpu_->linear(x.dev, w0.dev, a0.dev, {block});
          gpu_->linear(x.dev, w1.dev, a1.dev, {block});
          gpu_->linear_pair(x.dev, w0.dev, w1.dev, b0.dev, b1.dev, {block});
          EXPECT_EQ(download(b0.dev), download(a0.dev)) << "format " << int(f) << " N " << N << " M " << M;
          EXPECT_EQ(download(b1.dev), download(a1.dev)) << "format " << int(f) << " N " << N << " M " << M;
          Pair c1 = make(out, {M, N + 64}), d1 = make(out, {M, N + 64});
          gpu_->linear(x.dev, other.dev, c1.dev, {block});
          gpu_->linear_pair(x.dev, w0.dev, other.dev, b0.dev, d1.dev, {block});
          EXPECT_EQ(download(d1.dev), download(c1.dev)) << "wider second weight, format " << int(f) << " M " << M;
          EXPECT_EQ(download(b0.dev), download(a0.dev)) << "narrower first weight, format " << int(f) << " M " << M;
          const WeightFormat g = f == WeightFormat::kBF16 ? WeightFormat::kFp8Block : WeightFormat::kBF16;
          Linear unlike = make_linear(g, N, K);
          Pair e1 = make(out, {M, N}), f1 = make(out, {M, N});
          gpu_->linear(x.dev, unlike.dev, e1.dev, {block});
          gpu_->linear_pair(x.dev, w0.dev, unlike.dev, b0.dev, f1.dev, {block});
          EXPECT_EQ(download(f1.dev), download(e1.dev)) << "formats " << int(f) << "/" << int(g) << " M " << M;
          EXPECT_EQ(download(b0.dev), download(a0.dev)) << "formats " << int(f) << "/" << int(g) << " M " << M;
        }
      }
    }
  }
}

// A BF16 weight prepared once (prepare_linear: the packed GEMM's blocks, what the LM head keeps) gives
// bitwise the results of the same weight unprepared, alone and as either weight of a pair, on every
// path: small M never reads the copy, large M reads it instead of packing (N = 4000, M = 600 takes
// the packed path at the default thresholds; the suite's packed run sends every large M there).
// Quantised weights get no BF16 copy (2-4x their size): FP8 ones are prepared only under the FP8
// order, as its large-M kernel's blocks (tested in Fp8OrderLargeMIsTheDecodeOrderBitwise).
// The device layout of FP4 codes: the permuting kernel writes exactly fp4_layout.h's words (the
// layout's own algebra is tested on the CPU, fp4_layout_test), in place, over every word. Under
// DEEPINFER_GEMM_FP8_EXPERTS=1 the fold layout instead (fp4_fold_layout.h, fp4_fold_layout_test):
// each row's 64-byte blocks, words in their slots with their sign bits moved.
TEST_F(CudaOpsTest, Fp4CodesReachTheDeviceLayout) {
  const bool fold = kernels::fp8_experts_enabled();
  const int64_t rows = 3, row_bytes = 2048 + (fold ? 64 : 16);  // 4224 or 4128 codes per row
  host_bufs_.emplace_back(std::make_unique<tensor::Buffer>(rows * row_bytes));
  TensorView h = host_bufs_.back()->view(DType::kI8, {rows, row_bytes});
  std::vector<uint32_t> words(static_cast<size_t>(rows * row_bytes / 4));
  for (uint32_t& w : words) w = static_cast<uint32_t>(rng_());
  std::memcpy(h.data, words.data(), h.nbytes());
  TensorView d = gpu_->alloc_persistent(DType::kI8, {rows, row_bytes});
  gpu_->copy(h, d);
  ASSERT_TRUE(gpu_->to_fp4_device_layout(d));
  gpu_->copy(d, h);
  gpu_->synchronize();
  std::vector<uint32_t> got(words.size());
  std::memcpy(got.data(), h.data, h.nbytes());
  for (size_t i = 0; i < words.size(); ++i) {
    if (fold) {
      const size_t block = i / 16, q = i % 16;
      ASSERT_EQ(got[16 * block + kernels::fp4_fold_word_slot(static_cast<int>(q))], kernels::fp4_fold_word_bits(words[i]))
          << "word " << i;
    } else {
      ASSERT_EQ(got[i], kernels::fp4_to_device_word(words[i])) << "word " << i;
    }
  }
}

TEST_F(CudaOpsTest, PreparedLinearWeightIsBitwiseTheUnpreparedOne) {
  const bool can_prepare =
      std::getenv("DEEPINFER_GEMM_KERNEL") == nullptr && std::getenv("DEEPINFER_GEMM_PREPACK_MB") == nullptr;
  Linear fp8 = make_linear(WeightFormat::kFp8Block, 256, 256);
  const char* fp8_order = std::getenv("DEEPINFER_GEMM_FP8_ORDER");
  const bool fp8_made = gpu_->prepare_linear(fp8.dev);
  if (std::getenv("DEEPINFER_GEMM_PREPACK_MB") == nullptr) {
    EXPECT_EQ(fp8_made, fp8_order != nullptr && std::string(fp8_order) == "1");
  }
  for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{4000, 256}, {1000, 2048}, {200, 128}}) {
    Linear w = make_linear(WeightFormat::kBF16, N, K), other = make_linear(WeightFormat::kBF16, N + 64, K);
    LinearWeight prepared = w.dev;
    const bool made = gpu_->prepare_linear(prepared);
    if (can_prepare) {
      ASSERT_TRUE(made) << "N " << N << " K " << K;
      ASSERT_FALSE(prepared.prepared.empty());
    }
    EXPECT_TRUE(w.dev.prepared.empty());  // the copy only
    for (int64_t M : {1, 20, 70, 600}) {
      for (auto [block, out] : std::vector<std::pair<int, DType>>{{0, DType::kBF16}, {128, DType::kF32}}) {
        const std::string what = "N " + std::to_string(N) + " K " + std::to_string(K) + " M " + std::to_string(M) +
                                 " block " + std::to_string(block);
        Pair x = random(DType::kBF16, {M, K});
        Pair a = make(out, {M, N}), b = make(out, {M, N});
        gpu_->linear(x.dev, w.dev, a.dev, {block});
        gpu_->linear(x.dev, prepared, b.dev, {block});
        const std::vector<float> want = download(a.dev);
        EXPECT_EQ(download(b.dev), want) << what;
        Pair c = make(out, {M, N + 64}), d = make(out, {M, N + 64});
        gpu_->linear(x.dev, other.dev, c.dev, {block});
        gpu_->linear_pair(x.dev, prepared, other.dev, b.dev, d.dev, {block});
        EXPECT_EQ(download(b.dev), want) << what << " pair, first";
        EXPECT_EQ(download(d.dev), download(c.dev)) << what << " pair, first";
        gpu_->linear_pair(x.dev, other.dev, prepared, d.dev, b.dev, {block});
        EXPECT_EQ(download(b.dev), want) << what << " pair, second";
        EXPECT_EQ(download(d.dev), download(c.dev)) << what << " pair, second";
      }
    }
    // The equalities above would also hold if no launch read the copy: with it zeroed, a launch on
    // the packed path (600 rows x 32 column tiles: at the default thresholds and the suite's packed
    // run alike) must give zeros, and a small-M one (streaming kernel) still the stored weight's sums.
    const char* packed_rows = std::getenv("DEEPINFER_GEMM_PACKED_ROWS");
    if (made && N == 4000 && (packed_rows == nullptr || std::string(packed_rows) != "0")) {
      gpu_->fill(TensorView::contiguous(prepared.prepared.data, DType::kBF16, {prepared.prepared.numel() / 2},
                                        tensor::Device::kCuda),
                 0.0f);
      for (int64_t M : {1, 600}) {
        Pair x = random(DType::kBF16, {M, K});
        Pair a = make(DType::kF32, {M, N}), b = make(DType::kF32, {M, N});
        gpu_->linear(x.dev, w.dev, a.dev, {});
        gpu_->linear(x.dev, prepared, b.dev, {});
        if (M == 1) {
          EXPECT_EQ(download(b.dev), download(a.dev)) << "small M read the prepared copy";
        } else {
          EXPECT_EQ(download(b.dev), std::vector<float>(static_cast<size_t>(M * N), 0.0f))
              << "the packed launch did not read the prepared copy";
        }
      }
    }
  }
}

// A GEMM on an input already FP8-quantised (BF16 copy + fp8_fake_quant per 128, what the
// producers of FP8-GEMM inputs write: ops.h QuantCopy) with no further quantisation is bitwise the
// GEMM quantising the input itself — in every kernel family: the lean decode kernel (1-8 rows),
// the small-M streaming kernel (20), the large-M kernels (70, 300) — for FP8 and FP4 weights, one
// projection and a pair.
TEST_F(CudaOpsTest, GemmOnPrequantisedInputIsBitwiseTheQuantisingGemm) {
  for (WeightFormat f : {WeightFormat::kFp8Block, WeightFormat::kFp4Block}) {
    for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{512, 1024}, {96, 4096}}) {
      Linear w0 = make_linear(f, N, K), w1 = make_linear(f, N, K);
      for (int64_t M : {1, 3, 8, 20, 70, 300}) {
        Pair x = random(DType::kBF16, {M, K}, 2.0f), xq = make(DType::kBF16, {M, K});
        gpu_->convert(x.dev, xq.dev);
        gpu_->fp8_fake_quant(xq.dev, K, 128);
        Pair a = make(DType::kBF16, {M, N}), b = make(DType::kBF16, {M, N});
        gpu_->linear(x.dev, w0.dev, a.dev, {128});
        gpu_->linear(xq.dev, w0.dev, b.dev, {0, 128});  // xq declared FP8-quantised per 128
        const std::string what = "format " + std::to_string(int(f)) + " N " + std::to_string(N) + " K " +
                                 std::to_string(K) + " M " + std::to_string(M);
        EXPECT_EQ(download(b.dev), download(a.dev)) << what;
        Pair a1 = make(DType::kBF16, {M, N}), b1 = make(DType::kBF16, {M, N});
        gpu_->linear_pair(x.dev, w0.dev, w1.dev, a.dev, a1.dev, {128});
        gpu_->linear_pair(xq.dev, w0.dev, w1.dev, b.dev, b1.dev, {0, 128});
        EXPECT_EQ(download(b.dev), download(a.dev)) << what << " pair";
        EXPECT_EQ(download(b1.dev), download(a1.dev)) << what << " pair";
      }
    }
  }
}

// The FP8 order (fp8_gemv.cuh: FP8 weights x E4M3 activation codes on wgmma, each 128-input
// block's chain promoted into F32), taken by dense FP8 launches of <= 32 rows with
// DEEPINFER_GEMM_FP8_ORDER=1 (the suite's FP8-order run; skipped otherwise): every output against
// the exact sum of the dequantised products (the tensor core adds E4M3 products with a limited
// accumulator: ~1e-4 of sum |products| per element in tools/device/probes/wgmma_fp8_probe.cu), and
// bitwise: raw rows quantised in the kernel = the same rows quantised first (codes re-derived),
// a row alone = among M (wgmma's N = 8, 16 or 32 by M), a pair = two launches. K = 7168 takes
// seven blocks per sub-range (more than a lane holds in flight), N = 200 a partial column tile,
// K = 128 one sub-range.
TEST_F(CudaOpsTest, Fp8OrderDecodeMatchesExactSumsAndIsBitwiseStable) {
  const char* knob = std::getenv("DEEPINFER_GEMM_FP8_ORDER");
  if (knob == nullptr || std::string(knob) != "1") GTEST_SKIP() << "DEEPINFER_GEMM_FP8_ORDER=1 runs it";
  for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{64, 128}, {200, 1024}, {576, 4096}, {96, 8192}, {128, 7168}}) {
    Linear w = make_linear(WeightFormat::kFp8Block, N, K), w1 = make_linear(WeightFormat::kFp8Block, N + 64, K);
    std::vector<double> wv(static_cast<size_t>(N * K));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        wv[n * K + k] = static_cast<double>(tensor::e4m3_to_f32(w.host.weight.as<uint8_t>()[n * K + k])) *
                        tensor::e8m0_to_f32(w.host.scale.as<uint8_t>()[(n / 128) * w.host.scale.shape[1] + k / 128]);
    for (int64_t M : {1, 3, 8, 13, 32}) {
      const std::string what = "N " + std::to_string(N) + " K " + std::to_string(K) + " M " + std::to_string(M);
      Pair x = random(DType::kBF16, {M, K}, 2.0f), xq = make(DType::kBF16, {M, K});
      gpu_->convert(x.dev, xq.dev);
      gpu_->fp8_fake_quant(xq.dev, K, 128);
      const std::vector<float> xv = download(xq.dev);
      Pair y = make(DType::kF32, {M, N}), yq = make(DType::kF32, {M, N});
      gpu_->linear(x.dev, w.dev, y.dev, {128});      // raw rows (quantised in the staging at M <= 4)
      gpu_->linear(xq.dev, w.dev, yq.dev, {0, 128});  // rows quantised first
      const std::vector<float> got = download(y.dev);
      EXPECT_EQ(download(yq.dev), got) << what;
      double worst = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double exact = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double prod = static_cast<double>(xv[m * K + k]) * wv[n * K + k];
            exact += prod;
            mag += std::fabs(prod);
          }
          worst = std::max(worst, std::fabs(got[m * N + n] - exact) / std::max(mag, 1e-30));
        }
      EXPECT_LE(worst, 1e-3) << what;
      // Each row alone gives its bits among M.
      for (int64_t r = 0; r < M; ++r) {
        Pair xr = make(DType::kBF16, {1, K});
        for (int64_t k = 0; k < K; ++k) set(xr.host, k, get(x.host, r * K + k));
        upload(xr);
        Pair yr = make(DType::kF32, {1, N});
        gpu_->linear(xr.dev, w.dev, yr.dev, {128});
        EXPECT_EQ(download(yr.dev), std::vector<float>(got.begin() + r * N, got.begin() + (r + 1) * N)) << what << " row " << r;
      }
      // A pair (the second weight wider) = two launches; BF16 outputs too.
      Pair a0 = make(DType::kBF16, {M, N}), a1 = make(DType::kBF16, {M, N + 64});
      Pair b0 = make(DType::kBF16, {M, N}), b1 = make(DType::kBF16, {M, N + 64});
      gpu_->linear(xq.dev, w.dev, a0.dev, {0, 128});
      gpu_->linear(xq.dev, w1.dev, a1.dev, {0, 128});
      gpu_->linear_pair(xq.dev, w.dev, w1.dev, b0.dev, b1.dev, {0, 128});
      EXPECT_EQ(download(b0.dev), download(a0.dev)) << what << " pair";
      EXPECT_EQ(download(b1.dev), download(a1.dev)) << what << " pair";
      // F32 rows quantised in the kernel: the same codes as the same rows in BF16 when exact.
      Pair xf = make(DType::kF32, {M, K});
      for (int64_t i = 0; i < M * K; ++i) set(xf.host, i, get(x.host, i));
      upload(xf);
      Pair yf = make(DType::kF32, {M, N});
      gpu_->linear(xf.dev, w.dev, yf.dev, {128});
      EXPECT_EQ(download(yf.dev), got) << what << " F32 rows";
    }
  }
}

// The large-M kernel of the FP8 order (fp8_gemm.cuh) against the decode kernel: every row of a
// launch of 20, 33, 70 or 200 rows (one or two 128-token tiles, a partial last one — or, with
// DEEPINFER_GEMM_FP8_SMALL_TILES=1, one 32- or 64-token tile for 20 and 33; pairs; BF16 and
// F32 outputs) bitwise the same row computed alone (the decode kernel), and a subset of outputs
// within 1e-3 of Σ|products| of the exact sums. K = 7168 has seven blocks per sub-range, N = 196
// a partial warpgroup (and BF16 rows the 16-byte stores cannot take: element stores), N = 64
// warpgroups wholly past N; 1,100 rows x 2,048 columns (a pair: 242 or 288 tiles) make persistent
// CTAs walk several tiles and the token tiles' raster a partial group. Weights prepared as the
// kernel's blocks (CudaOps::prepare_linear) give the same bits.
TEST_F(CudaOpsTest, Fp8OrderLargeMIsTheDecodeOrderBitwise) {
  const char* knob = std::getenv("DEEPINFER_GEMM_FP8_ORDER");
  if (knob == nullptr || std::string(knob) != "1") GTEST_SKIP() << "DEEPINFER_GEMM_FP8_ORDER=1 runs it";
  for (auto [N, K] :
       std::vector<std::pair<int64_t, int64_t>>{{64, 128}, {196, 1024}, {576, 4096}, {128, 7168}, {2048, 1024}}) {
    Linear w = make_linear(WeightFormat::kFp8Block, N, K), w1 = make_linear(WeightFormat::kFp8Block, N + 64, K);
    for (int64_t M : N == 2048 ? std::vector<int64_t>{1100} : std::vector<int64_t>{20, 33, 70, 200}) {
      const std::string what = "N " + std::to_string(N) + " K " + std::to_string(K) + " M " + std::to_string(M);
      Pair x = random(DType::kBF16, {M, K}, 2.0f);
      Pair y = make(DType::kF32, {M, N}), yb = make(DType::kBF16, {M, N});
      gpu_->linear(x.dev, w.dev, y.dev, {128});
      gpu_->linear(x.dev, w.dev, yb.dev, {128});
      const std::vector<float> got = download(y.dev), got_b = download(yb.dev);
      Pair a0 = make(DType::kF32, {M, N}), a1 = make(DType::kF32, {M, N + 64});
      gpu_->linear_pair(x.dev, w.dev, w1.dev, a0.dev, a1.dev, {128});
      EXPECT_EQ(download(a0.dev), got) << what << " pair";
      const std::vector<float> pair1 = download(a1.dev);
      // The weights' prepared blocks (prepare_linear under the FP8 order) read instead of packing
      // them per launch: the same bits, alone, in a pair, with one set prepared and one not.
      {
        LinearWeight wp = w.dev, wp1 = w1.dev;
        ASSERT_TRUE(gpu_->prepare_linear(wp)) << what;
        ASSERT_TRUE(gpu_->prepare_linear(wp1)) << what;
        Pair yp = make(DType::kF32, {M, N}), p0 = make(DType::kF32, {M, N}), p1 = make(DType::kF32, {M, N + 64});
        gpu_->linear(x.dev, wp, yp.dev, {128});
        EXPECT_EQ(download(yp.dev), got) << what << " prepared";
        gpu_->linear_pair(x.dev, wp, wp1, p0.dev, p1.dev, {128});
        EXPECT_EQ(download(p0.dev), got) << what << " prepared pair";
        EXPECT_EQ(download(p1.dev), pair1) << what << " prepared pair";
        gpu_->linear_pair(x.dev, w.dev, wp1, p0.dev, p1.dev, {128});
        EXPECT_EQ(download(p0.dev), got) << what << " half-prepared pair";
        EXPECT_EQ(download(p1.dev), pair1) << what << " half-prepared pair";
      }
      Pair xq = make(DType::kBF16, {M, K});
      gpu_->convert(x.dev, xq.dev);
      gpu_->fp8_fake_quant(xq.dev, K, 128);
      const std::vector<float> xv = download(xq.dev);
      for (int64_t r : {int64_t{0}, M / 2, M - 1}) {
        Pair xr = make(DType::kBF16, {1, K});
        for (int64_t k = 0; k < K; ++k) set(xr.host, k, get(x.host, r * K + k));
        upload(xr);
        Pair yr = make(DType::kF32, {1, N}), yr1 = make(DType::kF32, {1, N + 64}), yrb = make(DType::kBF16, {1, N});
        gpu_->linear(xr.dev, w.dev, yr.dev, {128});
        gpu_->linear(xr.dev, w1.dev, yr1.dev, {128});
        gpu_->linear(xr.dev, w.dev, yrb.dev, {128});
        const std::vector<float> alone = download(yr.dev);
        EXPECT_EQ(alone, std::vector<float>(got.begin() + r * N, got.begin() + (r + 1) * N)) << what << " row " << r;
        EXPECT_EQ(download(yr1.dev), std::vector<float>(pair1.begin() + r * (N + 64), pair1.begin() + (r + 1) * (N + 64)))
            << what << " pair row " << r;
        EXPECT_EQ(download(yrb.dev), std::vector<float>(got_b.begin() + r * N, got_b.begin() + (r + 1) * N))
            << what << " BF16 row " << r;
        double worst = 0;
        for (int64_t n = 0; n < N; ++n) {
          double exact = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double wv =
                static_cast<double>(tensor::e4m3_to_f32(w.host.weight.as<uint8_t>()[n * K + k])) *
                tensor::e8m0_to_f32(w.host.scale.as<uint8_t>()[(n / 128) * w.host.scale.shape[1] + k / 128]);
            const double prod = static_cast<double>(xv[r * K + k]) * wv;
            exact += prod;
            mag += std::fabs(prod);
          }
          worst = std::max(worst, std::fabs(alone[n] - exact) / std::max(mag, 1e-30));
        }
        EXPECT_LE(worst, 1e-3) << what << " row " << r;
      }
    }
  }
}

TEST_F(CudaOpsTest, GroupedLinearMatchesCpu) {
  Linear w = make_linear(WeightFormat::kFp8Block, 2 * 128, 256);  // 2 groups of 128 rows, 256 inputs each
  for (int64_t T : {1, 33}) {
    Pair x = random(DType::kBF16, {T, 2, 256});
    Pair y = make(DType::kF32, {T, 2, 128});
    cpu_.linear_grouped(x.host, w.host, y.host, {});
    gpu_->linear_grouped(x.dev, w.dev, y.dev, {});
    EXPECT_LE(rel_error(download(y.dev), values(y.host)), 1e-5f);
  }
}

TEST_F(CudaOpsTest, NormsSwigluAndConversions) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const float tol = dt == DType::kF32 ? 1e-5f : 1e-2f;
    Pair x = random(dt, {37, 300}, 2.0f);
    Pair w = random(DType::kBF16, {300});
    Pair out = make(dt, {37, 300});
    cpu_.rms_norm(x.host, w.host, 1e-6f, out.host);
    gpu_->rms_norm(x.dev, w.dev, 1e-6f, out.dev);
    EXPECT_LE(rel_error(download(out.dev), values(out.host)), tol);
    cpu_.rms_norm(x.host, TensorView{}, 1e-6f, out.host);
    gpu_->rms_norm(x.dev, TensorView{}, 1e-6f, out.dev);
    EXPECT_LE(rel_error(download(out.dev), values(out.host)), tol);
    Pair g = random(dt, {5, 130}, 8.0f), u = random(dt, {5, 130}, 8.0f), s = make(dt, {5, 130});
    cpu_.swiglu(g.host, u.host, 10.0f, s.host);
    gpu_->swiglu(g.dev, u.dev, 10.0f, s.dev);
    EXPECT_LE(rel_error(download(s.dev), values(s.host)), tol);
  }
}

TEST_F(CudaOpsTest, RopeAndFakeQuantisers) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Pair x = random(dt, {9, 4, 128});
    Pair pos = make(DType::kI32, {9});
    for (int i = 0; i < 9; ++i) set(pos.host, i, static_cast<float>(i * 977 + 3));
    upload(pos);
    std::vector<float> freqs(32);
    for (int i = 0; i < 32; ++i) freqs[i] = std::pow(160000.0f, -2.0f * i / 64.0f);
    Pair f = make(DType::kF32, {32});
    std::copy(freqs.begin(), freqs.end(), f.host.as<float>());
    upload(f);
    ops::RopeParams rp{f.dev, 64};
    ops::RopeParams rph{f.host, 64};
    cpu_.rope(x.host, pos.host, rph);
    gpu_->rope(x.dev, pos.dev, rp);
    EXPECT_LE(rel_error(download(x.dev), values(x.host)), dt == DType::kF32 ? 1e-5f : 1e-2f);
  }
  // FP8 / FP4 fake quant: identical inputs give identical quantisation decisions.
  Pair a = random(DType::kF32, {11, 128}, 3.0f);
  cpu_.fp8_fake_quant(a.host, 64, 64);
  gpu_->fp8_fake_quant(a.dev, 64, 64);
  EXPECT_EQ(download(a.dev), values(a.host));
  Pair h = random(DType::kF32, {6, 128}, 2.0f);
  cpu_.hadamard_fp4_fake_quant(h.host);
  gpu_->hadamard_fp4_fake_quant(h.dev);
  EXPECT_LE(rel_error(download(h.dev), values(h.host)), 1e-6f);
}

// norm_rope (the query and KV rows' preparation in one launch) is bitwise rms_norm + rope
// (+ fp8_fake_quant): unweighted per-head norms of [T, H, 512] query rows, weighted [T, 512] KV
// rows with their 448 non-RoPE dims quantised in blocks of 64, in BF16 and F32.
TEST_F(CudaOpsTest, NormRopeIsBitwiseTheSeparateOps) {
  const int64_t d = 512, n_rope = 64;
  std::vector<float> freqs(n_rope / 2);
  for (int64_t i = 0; i < n_rope / 2; ++i) freqs[i] = std::pow(10000.0f, -2.0f * i / n_rope);
  Pair f = make(DType::kF32, {n_rope / 2});
  std::copy(freqs.begin(), freqs.end(), f.host.as<float>());
  upload(f);
  const ops::RopeParams rp{f.dev, static_cast<int>(n_rope)};
  Pair w = random(DType::kBF16, {d}, 0.5f);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (auto [T, H, weighted, quant] : std::vector<std::tuple<int64_t, int64_t, bool, int64_t>>{
             {5, 8, false, 0}, {1, 64, false, 0}, {3, 1, true, 448}, {2, 1, false, 448}}) {
      Pair pos = make(DType::kI32, {T});
      for (int64_t i = 0; i < T; ++i) set(pos.host, i, static_cast<float>(4093 + 977 * i));
      upload(pos);
      Pair a = random(dt, {T, H, d}, 2.0f), b = make(dt, {T, H, d});
      for (int64_t i = 0; i < T * H * d; ++i) set(b.host, i, get(a.host, i));
      upload(b);
      const TensorView nw = weighted ? w.dev : TensorView{};
      gpu_->norm_rope(a.dev, nw, 1e-6f, pos.dev, rp, quant, 64);
      gpu_->rms_norm(b.dev.reshape({T * H, d}), nw, 1e-6f, b.dev.reshape({T * H, d}));
      gpu_->rope(b.dev, pos.dev, rp);
      if (quant > 0) gpu_->fp8_fake_quant(b.dev, quant, 64);
      EXPECT_EQ(download(a.dev), download(b.dev))
          << "dtype " << int(dt) << " T " << T << " heads " << H << (weighted ? " weighted" : "") << " quant " << quant;
    }
  }
}

TEST_F(CudaOpsTest, HyperConnections) {
  const int64_t T = 5, hc = 4, D = 256;
  Pair x = random(DType::kF32, {T, hc, D});
  Pair fn = random(DType::kF32, {24, hc * D}, 0.01f), base = random(DType::kF32, {24}, 0.5f);
  Pair scale = random(DType::kF32, {3}, 0.1f);
  for (int i = 0; i < 3; ++i) set(scale.host, i, 1.0f + get(scale.host, i));
  upload(scale);
  ops::HcParams hp;
  tensor::HcWeights wh{fn.host, base.host, scale.host}, wd{fn.dev, base.dev, scale.dev};
  Pair u = make(DType::kF32, {T, D}), post = make(DType::kF32, {T, hc}), comb = make(DType::kF32, {T, hc, hc});
  cpu_.hc_pre(x.host, wh, hp, u.host, post.host, comb.host);
  gpu_->hc_pre(x.dev, wd, hp, u.dev, post.dev, comb.dev);
  EXPECT_LE(rel_error(download(u.dev), values(u.host)), 1e-5f);
  EXPECT_LE(rel_error(download(post.dev), values(post.host)), 1e-5f);
  EXPECT_LE(rel_error(download(comb.dev), values(comb.host)), 1e-5f);
  Pair o = random(DType::kF32, {T, D}), out = make(DType::kF32, {T, hc, D});
  cpu_.hc_post(o.host, x.host, post.host, comb.host, out.host);
  gpu_->hc_post(o.dev, x.dev, post.dev, comb.dev, out.dev);
  EXPECT_LE(rel_error(download(out.dev), values(out.host)), 1e-5f);
  Pair hfn = random(DType::kF32, {hc, hc * D}, 0.01f), hbase = random(DType::kF32, {hc}), hscale = random(DType::kF32, {1});
  Pair y = make(DType::kF32, {T, D});
  cpu_.hc_head(x.host, {hfn.host, hbase.host, hscale.host}, hp, y.host);
  gpu_->hc_head(x.dev, {hfn.dev, hbase.dev, hscale.dev}, hp, y.dev);
  EXPECT_LE(rel_error(download(y.dev), values(y.host)), 1e-5f);
}

// hc_pre_norm (the block's collapse with its RMS norm folded into the same launch for the widths
// of one-block rows) is bitwise hc_pre followed by rms_norm: decode-sized (1,024-thread blocks) and
// prefill-sized (256-thread) launches, BF16 / F32 / no norm weight; D = 512 takes the two launches.
TEST_F(CudaOpsTest, HcPreNormIsBitwiseHcPreThenRmsNorm) {
  const int64_t hc = 4;
  for (auto [T, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 4096}, {3, 2048}, {70, 2048}, {2, 512}}) {
    // The widths that must take the folded launch do (else this would compare the two ops with
    // themselves).
    EXPECT_EQ(kernels::hc_pre_folds_norm(D), D > 512) << D;
    Pair x = random(DType::kBF16, {T, hc, D});
    Pair fn = random(DType::kF32, {24, hc * D}, 0.01f), base = random(DType::kF32, {24}, 0.5f);
    Pair scale = random(DType::kF32, {3}, 0.1f);
    for (int i = 0; i < 3; ++i) set(scale.host, i, 1.0f + get(scale.host, i));
    upload(scale);
    const tensor::HcWeights wd{fn.dev, base.dev, scale.dev};
    ops::HcParams hp;
    Pair nb = random(DType::kBF16, {D}, 0.5f), nf = random(DType::kF32, {D}, 0.5f);
    for (const TensorView* norm : std::vector<const TensorView*>{&nb.dev, &nf.dev, nullptr}) {
      const TensorView nw = norm != nullptr ? *norm : TensorView{};
      Pair u = make(DType::kBF16, {T, D}), post = make(DType::kF32, {T, hc}), comb = make(DType::kF32, {T, hc, hc});
      gpu_->hc_pre_norm(x.dev, wd, hp, nw, 1e-6f, u.dev, post.dev, comb.dev, {});
      Pair u2 = make(DType::kBF16, {T, D}), post2 = make(DType::kF32, {T, hc}), comb2 = make(DType::kF32, {T, hc, hc});
      gpu_->hc_pre(x.dev, wd, hp, u2.dev, post2.dev, comb2.dev);
      gpu_->rms_norm(u2.dev, nw, 1e-6f, u2.dev);
      const std::string what = "T " + std::to_string(T) + " D " + std::to_string(D) +
                               (norm == nullptr ? " no weight" : (norm == &nb.dev ? " BF16 weight" : " F32 weight"));
      EXPECT_EQ(download(u.dev), download(u2.dev)) << what;
      EXPECT_EQ(download(post.dev), download(post2.dev)) << what;
      EXPECT_EQ(download(comb.dev), download(comb2.dev)) << what;
    }
  }
}

// hc_post followed by the next sublayer's hc_pre_norm in one call (the decode-sized mixing pass
// computes the new streams itself; 70 tokens take hc_post first) is bitwise the two ops: the new
// streams, u, post and comb.
TEST_F(CudaOpsTest, HcPostPreNormIsBitwiseTheTwoOps) {
  const int64_t hc = 4;
  for (auto [T, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 4096}, {5, 2048}, {70, 2048}}) {
    EXPECT_EQ(kernels::hc_pre_folds_post(T, hc), T < 64) << T;
    for (DType ot : {DType::kBF16, DType::kF32}) {
      Pair x = random(DType::kBF16, {T, hc, D}), o = random(ot, {T, D});
      Pair post0 = random(DType::kF32, {T, hc}, 1.0f), comb0 = random(DType::kF32, {T, hc, hc}, 0.5f);
      Pair fn = random(DType::kF32, {24, hc * D}, 0.01f), base = random(DType::kF32, {24}, 0.5f);
      Pair scale = random(DType::kF32, {3}, 0.1f);
      for (int i = 0; i < 3; ++i) set(scale.host, i, 1.0f + get(scale.host, i));
      upload(scale);
      const tensor::HcWeights wd{fn.dev, base.dev, scale.dev};
      const ops::HcParams hp;
      Pair nw = random(DType::kBF16, {D}, 0.5f);
      // Fused: post / comb are read, then overwritten with the next sublayer's.
      Pair x1 = make(DType::kBF16, {T, hc, D}), u = make(DType::kBF16, {T, D});
      Pair post = make(DType::kF32, {T, hc}), comb = make(DType::kF32, {T, hc, hc});
      gpu_->copy(post0.dev, post.dev);
      gpu_->copy(comb0.dev, comb.dev);
      gpu_->hc_post_pre_norm(o.dev, x.dev, post.dev, comb.dev, x1.dev, wd, hp, nw.dev, 1e-6f, u.dev, {});
      Pair x2 = make(DType::kBF16, {T, hc, D}), u2 = make(DType::kBF16, {T, D});
      Pair post2 = make(DType::kF32, {T, hc}), comb2 = make(DType::kF32, {T, hc, hc});
      gpu_->hc_post(o.dev, x.dev, post0.dev, comb0.dev, x2.dev);
      gpu_->hc_pre_norm(x2.dev, wd, hp, nw.dev, 1e-6f, u2.dev, post2.dev, comb2.dev, {});
      const std::string what = "T " + std::to_string(T) + " D " + std::to_string(D) + " o dtype " + std::to_string(int(ot));
      EXPECT_EQ(download(x1.dev), download(x2.dev)) << what;
      EXPECT_EQ(download(u.dev), download(u2.dev)) << what;
      EXPECT_EQ(download(post.dev), download(post2.dev)) << what;
      EXPECT_EQ(download(comb.dev), download(comb2.dev)) << what;
    }
  }
}

// mHC mixing over 601 BF16 tokens is bitwise what each token gets alone (the split of the
// reduction is a function of the width only; prefill-sized launches give blocks several tokens,
// the last one ragged), and matches the reference: the prefill kernel (32-token blocks) at the
// V4 width (16 splits of 1,024), with two splits, and with one split of 992 (threads with 3 of
// 4 k), against the one-token launches of the decode kernel.
TEST_F(CudaOpsTest, HyperConnectionsAreBitwiseBatchInvariant) {
  for (const int64_t D : {int64_t{512}, int64_t{248}, int64_t{4096}}) {
    SCOPED_TRACE("D " + std::to_string(D));
    hc_batch_invariance(D);
  }
}
void CudaOpsTest::hc_batch_invariance(int64_t D) {
  const int64_t T = 601, hc = 4, K = hc * D;
  const int64_t n_split = std::clamp<int64_t>(K / 1024, 1, 32), chunk = (K + n_split - 1) / n_split;
  // The prefill kernel must be what runs, unless the GPU suite's re-run picked the 1-, 2- or
  // 4-token kernel (DEEPINFER_HC_MIX_TOKENS; 32 and 64 are the prefill kernel's blocks).
  const char* knob = std::getenv("DEEPINFER_HC_MIX_TOKENS");
  EXPECT_EQ(kernels::hc_mix_uses_prefill_kernel(24, T, chunk), knob == nullptr || std::atoi(knob) >= 32);
  EXPECT_FALSE(kernels::hc_mix_uses_prefill_kernel(24, 1, chunk));
  Pair x = random(DType::kBF16, {T, hc, D});
  Pair fn = random(DType::kF32, {24, hc * D}, 0.01f), base = random(DType::kF32, {24}, 0.5f);
  Pair scale = random(DType::kF32, {3}, 0.1f);
  for (int i = 0; i < 3; ++i) set(scale.host, i, 1.0f + get(scale.host, i));
  upload(scale);
  ops::HcParams hp;
  const tensor::HcWeights wd{fn.dev, base.dev, scale.dev};
  Pair u = make(DType::kBF16, {T, D}), post = make(DType::kF32, {T, hc}), comb = make(DType::kF32, {T, hc, hc});
  gpu_->hc_pre(x.dev, wd, hp, u.dev, post.dev, comb.dev);
  Pair u_ref = make(DType::kBF16, {T, D}), post_ref = make(DType::kF32, {T, hc}), comb_ref = make(DType::kF32, {T, hc, hc});
  cpu_.hc_pre(x.host, {fn.host, base.host, scale.host}, hp, u_ref.host, post_ref.host, comb_ref.host);
  const std::vector<float> u_all = download(u.dev), post_all = download(post.dev), comb_all = download(comb.dev);
  EXPECT_LE(rel_error(post_all, values(post_ref.host)), 1e-5f);
  EXPECT_LE(rel_error(comb_all, values(comb_ref.host)), 1e-5f);
  for (int64_t t : {int64_t{0}, int64_t{301}, T - 1}) {
    Pair u1 = make(DType::kBF16, {1, D}), post1 = make(DType::kF32, {1, hc}), comb1 = make(DType::kF32, {1, hc, hc});
    gpu_->hc_pre(x.dev.slice0(t, t + 1), wd, hp, u1.dev, post1.dev, comb1.dev);
    EXPECT_EQ(download(u1.dev), std::vector<float>(u_all.begin() + t * D, u_all.begin() + (t + 1) * D)) << t;
    EXPECT_EQ(download(post1.dev), std::vector<float>(post_all.begin() + t * hc, post_all.begin() + (t + 1) * hc)) << t;
    EXPECT_EQ(download(comb1.dev),
              std::vector<float>(comb_all.begin() + t * hc * hc, comb_all.begin() + (t + 1) * hc * hc))
        << t;
  }
}

TEST_F(CudaOpsTest, MoeRoutingAndExpertsMatchCpu) { moe_matches_cpu(256, 128); }
// Several canonical K sub-ranges per launch, the last one shorter (gate/up: 1,280 inputs as 512 /
// 512 / 256; down: 640 as 384 / 256): under DEEPINFER_GEMM_FP8_EXPERTS=1 the rows' per-sub-range
// fold references and the folds of their scaled sums.
TEST_F(CudaOpsTest, MoeExpertsOverSeveralSubRangesMatchCpu) { moe_matches_cpu(1280, 640); }

void CudaOpsTest::moe_matches_cpu(int64_t D, int64_t F) {
  const int64_t E = 8, k = 3;
  std::vector<Linear> w1, w2, w3;
  std::vector<tensor::ExpertWeights> eh, ed;
  for (int64_t e = 0; e < E; ++e) {
    w1.push_back(make_linear(WeightFormat::kFp4Block, F, D));
    w2.push_back(make_linear(WeightFormat::kFp4Block, D, F));
    w3.push_back(make_linear(WeightFormat::kFp4Block, F, D));
    eh.push_back({w1.back().host, w2.back().host, w3.back().host});
    ed.push_back({w1.back().dev, w2.back().dev, w3.back().dev});
  }
  // DEEPINFER_GEMM_FP8_EXPERTS=1: rows quantised per 128 take the FP8-order expert kernel (32-pair
  // tiles up to T = 40, 128-pair tiles at 300; F32 rows as BF16 copies), plain F32 the F32 kernels.
  const bool fp8_accumulates = kernels::fp8_experts_enabled();
  for (int64_t T : {1, 13, 40, 300}) {  // 300: the large-M expert kernels
    Pair logits = random(DType::kF32, {T, E}, 2.0f), bias = random(DType::kF32, {E}, 0.3f);
    Pair ids = make(DType::kI32, {T});
    upload(ids);
    Pair sel = make(DType::kI32, {T, k}), wts = make(DType::kF32, {T, k});
    ops::MoeParams mp{k, 1.5f, 10.0f, 0};
    cpu_.moe_route(logits.host, bias.host, TensorView{}, ids.host, mp, sel.host, wts.host);
    gpu_->moe_route(logits.dev, bias.dev, TensorView{}, ids.dev, mp, sel.dev, wts.dev);
    ASSERT_EQ(download(sel.dev), values(sel.host)) << "T " << T;
    EXPECT_LE(rel_error(download(wts.dev), values(wts.host)), 1e-6f);
    // F32 plain, and F32 and BF16 activations FP8-quantised per 128 (at T = 1 by the grouping
    // launch, once, for the expert kernels to stage as they are).
    for (auto [dt, block] : {std::pair{DType::kF32, 0}, std::pair{DType::kF32, 128}, std::pair{DType::kBF16, 128}}) {
      mp.act_quant_block = block;
      Pair x = random(dt, {T, D});
      Pair out = make(DType::kF32, {T, D});
      cpu_.moe_experts(x.host, sel.host, wts.host, eh, mp, out.host);
      gpu_->moe_experts(x.dev, sel.dev, wts.dev, ed, mp, out.dev);
      const std::vector<float> got = download(out.dev), want = values(out.host);
      const std::string what = "D " + std::to_string(D) + " T " + std::to_string(T) + " dtype " + std::to_string(int(dt)) + " block " +
                               std::to_string(block);
      if (fp8_accumulates && block != 0) {
        // FP8 tensor-core sums (~1e-4 of sum |products|, wgmma_fp8_probe) flip the rounding of
        // some g / u (BF16 rows) and so the FP8 code of some h: each flip moves a few outputs by up
        // to a few % of the largest (0.027 at T = 300, BF16, on the H100), which the max error
        // cannot tell from a bug; the L2 error can (a wrong tile, row or scale is >= 10%), and
        // MoeExpertsAreBitwiseBatchInvariant checks the tiles against each other bit for bit.
        const float l2 = l2_rel_error(got, want), mx = rel_error(got, want);
        std::printf("%s: L2 %.3g, max %.3g (FP8 accumulation)\n", what.c_str(), l2, mx);
        EXPECT_LE(l2, 1e-2f) << what;
        EXPECT_LE(mx, 6e-2f) << what;
      } else {
        EXPECT_LE(rel_error(got, want), block == 0 ? 1e-5f : 2e-2f) << what;
      }
    }
  }
}

// The MoE sublayer output in one call (the combine adds the shared expert's output and rounds)
// is bitwise moe_experts + add + convert (the Ops default), with and without a shared output.
TEST_F(CudaOpsTest, MoeExpertsOutIsBitwiseTheSeparateOps) {
  const int64_t E = 8, k = 3, D = 256, F = 128;
  std::vector<Linear> keep;
  const std::vector<tensor::ExpertWeights> ed = make_fp4_experts(E, D, F, keep);
  for (int64_t T : {1, 13}) {
    Pair logits = random(DType::kF32, {T, E}, 2.0f), bias = random(DType::kF32, {E}, 0.3f);
    Pair ids = make(DType::kI32, {T});
    upload(ids);
    Pair sel = make(DType::kI32, {T, k}), wts = make(DType::kF32, {T, k});
    for (DType dt : {DType::kF32, DType::kBF16}) {
      ops::MoeParams mp{k, 1.5f, 10.0f, dt == DType::kBF16 ? 128 : 0};
      gpu_->moe_route(logits.dev, bias.dev, TensorView{}, ids.dev, mp, sel.dev, wts.dev);
      Pair x = random(dt, {T, D}, 1.0f), shared = random(dt, {T, D}, 0.5f);
      for (bool with_shared : {true, false}) {
        const TensorView s = with_shared ? shared.dev : TensorView{};
        Pair fused = make(dt, {T, D}), separate = make(dt, {T, D});
        gpu_->moe_experts_out(x.dev, sel.dev, wts.dev, ed, mp, s, fused.dev);
        gpu_->ops::Ops::moe_experts_out(x.dev, sel.dev, wts.dev, ed, mp, s, separate.dev);
        EXPECT_EQ(download(fused.dev), download(separate.dev))
            << "T " << T << " dtype " << int(dt) << (with_shared ? " with shared" : "");
      }
    }
  }
}

// Routing and the MoE sublayer in one call (the grouping launch routes batches of up to 64 tokens
// itself, larger ones run the routing kernel first) is bitwise the Ops default (moe_route, then
// moe_experts_out): sel, weights and the output, for biased top-k over E <= 256 and E > 256
// (the routing's two selection loops) and for hash layers (tid2eid), F32 and BF16 activations.
// (The suite also runs it with DEEPINFER_MOE_ROUTE_GROUP=0.)
TEST_F(CudaOpsTest, MoeRouteInTheGroupingIsBitwiseTheRoutingKernel) {
  const int64_t k = 3, D = 256, F = 128, vocab = 50;
  for (int64_t E : {8, 300}) {
    std::vector<Linear> keep;
    const std::vector<tensor::ExpertWeights> ed = make_fp4_experts(E, D, F, keep);
    Pair tid2eid = make(DType::kI64, {vocab, k});
    for (int64_t i = 0; i < vocab * k; ++i) tid2eid.host.as<int64_t>()[i] = (i * 7 + i / k) % E;
    upload(tid2eid);
    for (int64_t T : {1, 13, 64, 65, 200}) {
      Pair logits = random(DType::kF32, {T, E}, 2.0f), bias = random(DType::kF32, {E}, 0.3f);
      Pair ids = make(DType::kI32, {T});
      for (int64_t t = 0; t < T; ++t) set(ids.host, t, static_cast<float>((t * 13) % vocab));
      upload(ids);
      for (bool hashed : {false, true}) {
        for (DType dt : {DType::kF32, DType::kBF16}) {
          const std::string what = "E " + std::to_string(E) + " T " + std::to_string(T) + (hashed ? " hashed" : "") +
                                   (dt == DType::kBF16 ? " BF16" : " F32");
          ops::MoeParams mp{k, 1.5f, 10.0f, dt == DType::kBF16 ? 128 : 0};
          Pair x = random(dt, {T, D}, 1.0f), shared = random(dt, {T, D}, 0.5f);
          Pair sel = make(DType::kI32, {T, k}), wts = make(DType::kF32, {T, k}), out = make(dt, {T, D});
          Pair sel_ref = make(DType::kI32, {T, k}), wts_ref = make(DType::kF32, {T, k}), ref = make(dt, {T, D});
          const TensorView h = hashed ? tid2eid.dev : TensorView{};
          gpu_->moe_route_experts_out({logits.dev, bias.dev, h, ids.dev, sel.dev, wts.dev}, x.dev, ed, mp, shared.dev,
                                      out.dev);
          gpu_->ops::Ops::moe_route_experts_out({logits.dev, bias.dev, h, ids.dev, sel_ref.dev, wts_ref.dev}, x.dev, ed,
                                                mp, shared.dev, ref.dev);
          EXPECT_EQ(download(sel.dev), download(sel_ref.dev)) << what;
          EXPECT_EQ(download(wts.dev), download(wts_ref.dev)) << what;
          const std::vector<float> got = download(out.dev), want = download(ref.dev);
          EXPECT_EQ(got, want) << what;
          EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](float v) { return v != 0.0f; })) << what;
        }
      }
    }
  }
}

// The MoE experts of a token give bitwise the same output alone, among 100 tokens (streaming
// kernel; ~37 rows per expert, so experts span several 32-row chunks) and among 600 (pipelined
// tiled kernel: with 8 experts ~225 rows each, two 128-row tiles; with 40, the CTA's search for
// its (expert, tile) pair spans two 32-expert chunks). D = 1024 gives the gate/up GEMMs two K
// sub-ranges. Activations FP8-quantised per 128 (V4) and per 32 (V4.1): in the streaming kernel's
// staging for 1 token, by act_quant_bf16 before the pipelined kernel for 600. F = 224: the
// gate/up launches' second 128-column tile is partly past N (the packed expert kernels' edge).
// D = 1280, F = 640: three and two K sub-ranges, the last one shorter.
// Under DEEPINFER_GEMM_FP8_EXPERTS=1 (the FP8-order expert kernels for every launch: the lean form
// at 1, 8 and 100 tokens — 3, 24 and 300 pairs —, 128-pair tiles at 600; 32-pair tiles at 1 to 100
// with DEEPINFER_GEMM_FP8_EXPERTS_LEAN=0) only V4's shapes run: the fold needs whole 128-input
// blocks and one activation scale per block (V4.1's per-32 activations and F = 224 are outside
// the knob's scope, and its layout refuses them).
TEST_F(CudaOpsTest, MoeExpertsAreBitwiseBatchInvariant) {
  for (int64_t E : {8, 40}) moe_batch_invariance(E, 128);
  moe_batch_invariance(8, 128, 640, 1280);
  if (kernels::fp8_experts_enabled()) {
    std::printf("DEEPINFER_GEMM_FP8_EXPERTS=1: the per-32 activation and F = 224 cases do not apply\n");
    return;
  }
  moe_batch_invariance(8, 32);
  moe_batch_invariance(8, 128, 224);
}

// The decode expert launches (the lean kernel) at V4-Flash's widths (D = 4096, F = 2048: gate/up
// in eight K sub-ranges, down in four) give the bits of the large-M kernels: 3 experts and k = 3,
// so 8 tokens put 8 rows on every expert. Its own test (not under the suite's '*Moe*' re-runs:
// 75M weights to generate on the host).
TEST_F(CudaOpsTest, DecodeExpertsAtV4WidthsAreBitwiseTheLargeMKernels) { moe_batch_invariance(3, 128, 2048, 4096); }

void CudaOpsTest::moe_batch_invariance(int64_t E, int act_block, int64_t F, int64_t D) {
  const int64_t k = 3, T = 600;
  std::vector<Linear> keep;
  const std::vector<tensor::ExpertWeights> ed = make_fp4_experts(E, D, F, keep);
  Pair logits = random(DType::kF32, {T, E}, 2.0f), bias = random(DType::kF32, {E}, 0.3f);
  Pair ids = make(DType::kI32, {T});
  upload(ids);
  Pair sel = make(DType::kI32, {T, k}), wts = make(DType::kF32, {T, k});
  ops::MoeParams mp{k, 1.5f, 10.0f, act_block};
  gpu_->moe_route(logits.dev, bias.dev, TensorView{}, ids.dev, mp, sel.dev, wts.dev);
  Pair x = random(DType::kBF16, {T, D});
  Pair out = make(DType::kF32, {T, D});
  gpu_->moe_experts(x.dev, sel.dev, wts.dev, ed, mp, out.dev);
  const std::vector<float> all = download(out.dev);
  const std::vector<float> sel_all = download(sel.dev), wts_all = download(wts.dev);
  for (int64_t n : {int64_t{1}, int64_t{8}, int64_t{100}}) {  // the last n tokens
    const int64_t t0 = T - n;
    Pair xn = make(DType::kBF16, {n, D}), sn = make(DType::kI32, {n, k}), wn = make(DType::kF32, {n, k});
    for (int64_t i = 0; i < n * D; ++i) set(xn.host, i, get(x.host, t0 * D + i));
    for (int64_t i = 0; i < n * k; ++i) set(sn.host, i, sel_all[t0 * k + i]), set(wn.host, i, wts_all[t0 * k + i]);
    upload(xn);
    upload(sn);
    upload(wn);
    Pair on = make(DType::kF32, {n, D});
    gpu_->moe_experts(xn.dev, sn.dev, wn.dev, ed, mp, on.dev);
    EXPECT_EQ(download(on.dev), std::vector<float>(all.begin() + t0 * D, all.end()))
        << n << " tokens, " << E << " experts, block " << act_block << ", F " << F << ", D " << D;
  }
}

}  // namespace
}  // namespace deepinfer::testing
