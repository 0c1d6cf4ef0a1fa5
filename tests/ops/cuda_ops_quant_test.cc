// The producers of FP8-GEMM inputs that quantise them once (ops.h QuantCopy): the norm with its
// output quantised, SwiGLU with its output quantised, the mHC calls with u's quantised copy, and
// prequantise. Each is bitwise the separate ops (the op, then fp8_fake_quant / the copy) on the
// device, in the fused launches and in the shapes that fall back to the separate ones, and the
// fused results match the CPU reference's (which runs the separate ops). Also the indexer's Hadamard
// FP4 rounding: its warp-per-row kernel against the block-per-row one.
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/launch.h"
#include "kernels/norm/hc_cluster_plan.h"
#include "op_test_harness.h"

namespace deepinfer::testing {
namespace {

class CudaQuantProducersTest : public OpHarness {
 protected:
  // mHC weights for hc streams of width D, on the device (`keep` owns them).
  tensor::HcWeights hc_weights(int64_t hc, int64_t D, std::vector<Pair>& keep) {
    keep.push_back(random(DType::kF32, {(2 + hc) * hc, hc * D}, 0.01f));
    keep.push_back(random(DType::kF32, {(2 + hc) * hc}, 0.5f));
    keep.push_back(random(DType::kF32, {3}, 0.1f));
    Pair& scale = keep.back();
    for (int i = 0; i < 3; ++i) set(scale.host, i, 1.0f + get(scale.host, i));
    upload(scale);
    return {keep[keep.size() - 3].dev, keep[keep.size() - 2].dev, scale.dev};
  }
  // One launch_hc_pre of streams x [T, hc, D] (BF16 or F32) with weights wd, the norm weight nw
  // folded in when `fold`, u's quantised copy when `copy`, the finalize form `vec` / `cluster`
  // (HcParamsDev); returns u, post, comb and the copy as they came back.
  std::vector<std::vector<float>> run_hc_pre(const Pair& x, DType dt, const tensor::HcWeights& wd, const Pair& nw,
                                             int64_t T, int64_t D, bool fold, bool copy, int vec, int cluster) {
    const int64_t hc = 4;
    const int splits = static_cast<int>(std::clamp<int64_t>(hc * D / 1024, 1, 32));
    Pair partial = make(DType::kF32, {T, splits, (2 + hc) * hc + 1});
    Pair u = make(DType::kBF16, {T, D}), uq = make(DType::kBF16, {T, D});
    Pair post = make(DType::kF32, {T, hc}), comb = make(DType::kF32, {T, hc, hc});
    kernels::HcParamsDev p{x.dev.data, dt == DType::kBF16 ? kernels::ActType::kBF16 : kernels::ActType::kF32,
                           static_cast<const float*>(wd.fn.data), static_cast<const float*>(wd.base.data),
                           static_cast<const float*>(wd.scale.data), static_cast<float*>(partial.dev.data), T, D,
                           static_cast<int>(hc), splits, 20, 1e-6f, 1e-6f, u.dev.data, kernels::ActType::kBF16,
                           static_cast<float*>(post.dev.data), static_cast<float*>(comb.dev.data)};
    if (fold) {
      p.fold_norm = true, p.norm = nw.dev.data, p.norm_type = kernels::ActType::kBF16, p.rms_eps = 1e-6f;
      if (copy) p.uq = uq.dev.data;
    }
    p.vec_collapse = vec;
    p.cluster = cluster;
    // The form asked for is the one launched (a cluster size the shape allows is never dropped).
    EXPECT_EQ(kernels::hc_pre_cluster_size(p), cluster >= 2 ? cluster : 1) << "T " << T << " D " << D;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(kernels::launch_hc_pre(p, nullptr), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return {download(u.dev), download(post.dev), download(comb.dev), download(uq.dev)};
  }
  // x's rows quantised as the GEMM would (BF16 copy, then fp8_fake_quant per 128) on the device.
  std::vector<float> quantised(const TensorView& x) {
    Pair q = make(DType::kBF16, {x.numel() / x.shape[x.rank - 1], x.shape[x.rank - 1]});
    gpu_->convert(x, q.dev);
    gpu_->fp8_fake_quant(q.dev, x.shape[x.rank - 1], 128);
    return download(q.dev);
  }
};

// The query latent's norm: the fused warp kernel (widths <= 1,024 in whole 128-channel blocks; a
// block per row below 64 rows, a warp per row above) and the fallbacks (a ragged width; the
// 4,096-wide row kernel), BF16 and F32, with and without a weight.
TEST_F(CudaQuantProducersTest, RmsNormQuantIsBitwiseNormThenFakeQuant) {
  for (auto [T, n] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1024}, {9, 1024}, {70, 1024}, {3, 384}, {67, 384}, {2, 1000}, {2, 4096}}) {
    EXPECT_EQ(kernels::rms_norm_fuses_quant(n, 128), n <= 1024 && n % 128 == 0) << n;
    for (DType dt : {DType::kBF16, DType::kF32}) {
      Pair w = random(DType::kBF16, {n}, 0.5f);
      for (bool weighted : {true, false}) {
        const TensorView wd = weighted ? w.dev : TensorView{};
        Pair x = random(dt, {T, n}, 2.0f);
        Pair a = make(dt, {T, n}), b = make(dt, {T, n});
        gpu_->rms_norm_quant(x.dev, wd, 1e-6f, a.dev, 128);
        gpu_->rms_norm(x.dev, wd, 1e-6f, b.dev);
        gpu_->fp8_fake_quant(b.dev, n, 128);
        const std::string what = "T " + std::to_string(T) + " n " + std::to_string(n) + " dtype " +
                                 std::to_string(int(dt)) + (weighted ? " weighted" : "");
        EXPECT_EQ(download(a.dev), download(b.dev)) << what;
        // In place, as the model calls it.
        gpu_->rms_norm_quant(x.dev, wd, 1e-6f, x.dev, 128);
        EXPECT_EQ(download(x.dev), download(b.dev)) << what << " in place";
        cpu_.rms_norm_quant(x.host, weighted ? w.host : TensorView{}, 1e-6f, a.host, 128);
        EXPECT_LE(rel_error(download(x.dev), values(a.host)), 0.13f) << what << " vs CPU";  // one FP8 step (a BF16 ulp apart)
      }
    }
  }
}

// The shared expert's SwiGLU with its hidden quantised: the fused kernel (BF16 output, widths of
// whole blocks) from BF16 and F32 inputs, with and without the clamp, and the fallbacks (F32
// output, a ragged width).
TEST_F(CudaQuantProducersTest, SwigluQuantIsBitwiseSwigluThenFakeQuant) {
  for (auto [T, F, out_t] : std::vector<std::tuple<int64_t, int64_t, DType>>{
           {1, 2048, DType::kBF16}, {7, 256, DType::kBF16}, {3, 2048, DType::kF32}, {2, 200, DType::kBF16}}) {
    for (DType in_t : {DType::kBF16, DType::kF32}) {
      for (float limit : {10.0f, 0.0f}) {
        Pair g = random(in_t, {T, F}, 4.0f), u = random(in_t, {T, F}, 4.0f);
        Pair a = make(out_t, {T, F}), b = make(out_t, {T, F});
        gpu_->swiglu_quant(g.dev, u.dev, limit, a.dev, 128);
        gpu_->swiglu(g.dev, u.dev, limit, b.dev);
        gpu_->fp8_fake_quant(b.dev, F, 128);
        const std::string what = "T " + std::to_string(T) + " F " + std::to_string(F) + " in " + std::to_string(int(in_t)) +
                                 " out " + std::to_string(int(out_t)) + " limit " + std::to_string(limit);
        EXPECT_EQ(download(a.dev), download(b.dev)) << what;
        cpu_.swiglu_quant(g.host, u.host, limit, a.host, 128);
        EXPECT_LE(rel_error(download(b.dev), values(a.host)), 0.13f) << what << " vs CPU";  // one FP8 step
      }
    }
  }
}

// hc_pre_norm and hc_post_pre_norm with u's quantised copy: u, post and comb as without it, and
// the copy bitwise u quantised — in the folded launch (decode-sized 1,024-thread and prefill-sized
// 256-thread blocks) and where the norm does not fold (D = 512: separate launches).
TEST_F(CudaQuantProducersTest, HcQuantCopyIsBitwiseTheQuantisedU) {
  const int64_t hc = 4;
  for (auto [T, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 4096}, {3, 2048}, {70, 2048}, {2, 512}}) {
    EXPECT_EQ(kernels::hc_pre_quant_copies(D, 128), D > 1024) << D;
    std::vector<Pair> keep;
    const tensor::HcWeights wd = hc_weights(hc, D, keep);
    const ops::HcParams hp;
    Pair nw = random(DType::kBF16, {D}, 0.5f);
    Pair x = random(DType::kBF16, {T, hc, D});
    const std::string what = "T " + std::to_string(T) + " D " + std::to_string(D);
    {
      Pair u = make(DType::kBF16, {T, D}), uq = make(DType::kBF16, {T, D});
      Pair post = make(DType::kF32, {T, hc}), comb = make(DType::kF32, {T, hc, hc});
      gpu_->hc_pre_norm(x.dev, wd, hp, nw.dev, 1e-6f, u.dev, post.dev, comb.dev, {uq.dev, 128});
      Pair u2 = make(DType::kBF16, {T, D}), post2 = make(DType::kF32, {T, hc}), comb2 = make(DType::kF32, {T, hc, hc});
      gpu_->hc_pre_norm(x.dev, wd, hp, nw.dev, 1e-6f, u2.dev, post2.dev, comb2.dev, {});
      EXPECT_EQ(download(u.dev), download(u2.dev)) << what;
      EXPECT_EQ(download(post.dev), download(post2.dev)) << what;
      EXPECT_EQ(download(comb.dev), download(comb2.dev)) << what;
      EXPECT_EQ(download(uq.dev), quantised(u2.dev)) << what;
    }
    // After a sublayer: the new streams, u and its copy.
    Pair o = random(DType::kBF16, {T, D});
    Pair post0 = random(DType::kF32, {T, hc}, 1.0f), comb0 = random(DType::kF32, {T, hc, hc}, 0.5f);
    Pair x1 = make(DType::kBF16, {T, hc, D}), u = make(DType::kBF16, {T, D}), uq = make(DType::kBF16, {T, D});
    Pair post = make(DType::kF32, {T, hc}), comb = make(DType::kF32, {T, hc, hc});
    gpu_->copy(post0.dev, post.dev);
    gpu_->copy(comb0.dev, comb.dev);
    gpu_->hc_post_pre_norm(o.dev, x.dev, post.dev, comb.dev, x1.dev, wd, hp, nw.dev, 1e-6f, u.dev, {uq.dev, 128});
    Pair x2 = make(DType::kBF16, {T, hc, D}), u2 = make(DType::kBF16, {T, D});
    gpu_->copy(post0.dev, post.dev);
    gpu_->copy(comb0.dev, comb.dev);
    gpu_->hc_post_pre_norm(o.dev, x.dev, post.dev, comb.dev, x2.dev, wd, hp, nw.dev, 1e-6f, u2.dev, {});
    EXPECT_EQ(download(x1.dev), download(x2.dev)) << what << " post";
    EXPECT_EQ(download(u.dev), download(u2.dev)) << what << " post";
    EXPECT_EQ(download(uq.dev), quantised(u2.dev)) << what << " post";
  }
}

// prequantise: either x is left for the GEMM (and the options say so) or x is quantised in place
// and the options say not to quantise again; the GEMM's result is the same bits either way.
TEST_F(CudaQuantProducersTest, PrequantiseKeepsTheGemmInput) {
  for (int64_t T : {1, 5, 300}) {
    Pair x = random(DType::kBF16, {T, 1024}, 3.0f);
    const std::vector<float> before = quantised(x.dev);
    const ops::LinearOptions o = gpu_->prequantise(x.dev, 128);
    if (o.act_quant_block == 0) {
      EXPECT_EQ(download(x.dev), before) << T;
      EXPECT_EQ(o.act_fp8_block, 128) << T;  // the GEMM may take x as FP8 codes
    } else {
      EXPECT_EQ(o.act_quant_block, 128) << T;
      EXPECT_EQ(quantised(x.dev), before) << T;
    }
    EXPECT_EQ(gpu_->prequantise(x.dev, 0).act_quant_block, 0) << T;  // nothing to do
  }
}

// The mHC finalize's collapse with 16-byte loads (HcParamsDev::vec_collapse) gives the bits of the
// one-column loads: u, post, comb and u's quantised copy, with and without the folded norm, for
// decode-sized (1,024-thread) and prefill-sized (256-thread) launches, BF16 and F32 streams.
TEST_F(CudaQuantProducersTest, HcVectorCollapseIsBitwiseTheScalarOne) {
  const int64_t hc = 4;
  for (auto [T, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 4096}, {3, 2048}, {70, 4096}, {66, 512}}) {
    for (DType dt : {DType::kBF16, DType::kF32}) {
      std::vector<Pair> keep;
      const tensor::HcWeights wd = hc_weights(hc, D, keep);
      Pair nw = random(DType::kBF16, {D}, 0.5f);
      Pair x = random(dt, {T, hc, D});
      const bool fold = kernels::hc_pre_folds_norm(D), copy = kernels::hc_pre_quant_copies(D, 128);
      // The one-CTA finalize's two collapse forms (the cluster kernel: below).
      const auto scalar = run_hc_pre(x, dt, wd, nw, T, D, fold, copy, /*vec=*/0, /*cluster=*/0);
      const auto vec = run_hc_pre(x, dt, wd, nw, T, D, fold, copy, /*vec=*/1, /*cluster=*/0);
      const std::string what = "T " + std::to_string(T) + " D " + std::to_string(D) + " dtype " + std::to_string(int(dt));
      EXPECT_EQ(vec[0], scalar[0]) << what << " u";
      EXPECT_EQ(vec[1], scalar[1]) << what << " post";
      EXPECT_EQ(vec[2], scalar[2]) << what << " comb";
      EXPECT_EQ(vec[3], scalar[3]) << what << " uq";
    }
  }
}

// The decode-sized mHC finalize over a cluster of C CTAs per token (HcParamsDev::cluster,
// hc_cluster.cuh) gives the bits of the one-CTA finalize: u, post, comb and u's quantised copy, for
// every size the width allows, BF16 and F32 streams, with and without the copy, for 1 to 63 tokens.
TEST_F(CudaQuantProducersTest, HcClusterFinalizeIsBitwiseTheOneCtaOne) {
  const int64_t hc = 4;
  int compared = 0;
  for (auto [T, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 4096}, {3, 4096}, {8, 2048}, {63, 4096}, {5, 3072}}) {
    for (DType dt : {DType::kBF16, DType::kF32}) {
      for (bool copy : {true, false}) {
        std::vector<Pair> keep;
        const tensor::HcWeights wd = hc_weights(hc, D, keep);
        Pair nw = random(DType::kBF16, {D}, 0.5f);
        Pair x = random(dt, {T, hc, D});
        const auto want = run_hc_pre(x, dt, wd, nw, T, D, /*fold=*/true, copy, /*vec=*/0, /*cluster=*/0);
        for (int c : {2, 4, 8}) {
          if (!kernels::hc_cluster_supports(D, static_cast<int>(hc), c)) continue;
          const auto got = run_hc_pre(x, dt, wd, nw, T, D, /*fold=*/true, copy, /*vec=*/0, c);
          ++compared;
          const std::string what = "T " + std::to_string(T) + " D " + std::to_string(D) + " dtype " +
                                   std::to_string(int(dt)) + " copy " + std::to_string(copy) + " C " +
                                   std::to_string(c);
          EXPECT_EQ(got[0], want[0]) << what << " u";
          EXPECT_EQ(got[1], want[1]) << what << " post";
          EXPECT_EQ(got[2], want[2]) << what << " comb";
          EXPECT_EQ(got[3], want[3]) << what << " uq";
        }
      }
    }
  }
  // Sizes per width: 4096 takes 2, 4 and 8, 2048 takes 2 and 4, 3072 only 2 (D / C a multiple of 512).
  EXPECT_EQ(compared, 4 * (3 + 3 + 2 + 3 + 1));
}

// The indexer's Hadamard transform + FP4 fake-quant one warp per row (rows of 32..256 elements) is
// bitwise the one-block-per-row kernel, in BF16 and F32, for any row count (512-wide rows take the
// block kernel both times); and the result matches the CPU reference's.
TEST_F(CudaQuantProducersTest, HadamardWarpRowsAreBitwiseTheBlockKernel) {
  for (int64_t n : {32, 64, 128, 256, 512}) {
    for (int64_t rows : {1, 7, 64, 1001}) {
      for (DType dt : {DType::kBF16, DType::kF32}) {
        const std::string what = "n " + std::to_string(n) + " rows " + std::to_string(rows) + " dtype " +
                                 std::to_string(int(dt));
        Pair a = random(dt, {rows, n}, 2.0f);
        Pair b = make(dt, {rows, n});
        gpu_->copy(a.dev, b.dev);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const kernels::ActType t = dt == DType::kBF16 ? kernels::ActType::kBF16 : kernels::ActType::kF32;
        ASSERT_EQ(kernels::launch_hadamard_fp4({a.dev.data, t, rows, n, n, 32}, nullptr, true), cudaSuccess);
        ASSERT_EQ(kernels::launch_hadamard_fp4({b.dev.data, t, rows, n, n, 32}, nullptr, false), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<float> warp = download(a.dev);
        EXPECT_EQ(warp, download(b.dev)) << what;
        cpu_.hadamard_fp4_fake_quant(a.host);
        EXPECT_LE(rel_error(warp, values(a.host)), 1e-3f) << what;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::testing
