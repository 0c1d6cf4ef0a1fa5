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

#include "cuda_ops_fixture.h"
#include "kernels/gemm/fp4_fold_layout.h"
#include "kernels/gemm/fp4_layout.h"
#include "ops/cuda/launch_fp8_experts.h"

// The FP8-order dense GEMM tests: cuda_ops_fp8_order_test.cc; the MoE tests: cuda_ops_moe_test.cc.
namespace deepinfer::testing {


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

}  // namespace deepinfer::testing
