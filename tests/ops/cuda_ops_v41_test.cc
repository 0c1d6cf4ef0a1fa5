// CUDA conformance of the DeepSeek-V4.1 ops (ops.h's V4.1 section, kernels/v41/) against the CPU
// reference (ops/cpu/cpu_v41_*.cc): the KV fake-quantisers and the mHC collapse bit for bit (the
// same exact arithmetic), the mHC coefficients, the Engram gate and DSpark's block attention
// within F32 (or BF16) rounding, the two-level indexer's selections exactly on integer-valued
// inputs (every score exact in any order, ties included).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "batch_test_harness.h"

namespace deepinfer::testing {
namespace {

using ops::IndexerV41Params;
using ops::KvQuantFormat;

class CudaV41OpsTest : public BatchHarness {
 protected:
  // Three sequences: a prefill chunk from 0, a later chunk starting at 90 (window floor 84 for
  // block attention), a single decode token at 301.
  void SetUp() override {
    OpHarness::SetUp();
    if (IsSkipped()) return;
    set_batch({{0, 0, 40, 0, 0, 0}, {2, 40, 23, 90, 0, 84}, {1, 63, 1, 301, 0, 0}}, 3);
  }
  // Rows of mixed magnitudes: row r's values scaled by 2^(r % 9 - 4); every seventh row's first
  // 16 values zero (a block whose amax takes the format's floor).
  Pair kv_rows(DType dtype, int64_t rows, int64_t width) {
    Pair x = random(dtype, {rows, width});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c) {
        const float v = get(x.host, r * width + c) * std::ldexp(1.0f, static_cast<int>(r % 9) - 4);
        set(x.host, r * width + c, r % 7 == 3 && c < 16 ? 0.0f : v);
      }
    upload(x);
    return x;
  }
};

TEST_F(CudaV41OpsTest, KvFakeQuantIsTheReferenceBitwise) {
  for (KvQuantFormat f : {KvQuantFormat::kFp8Pow2x32, KvQuantFormat::kFp4E4m3x16, KvQuantFormat::kFp4Pow2x32}) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      Pair x = kv_rows(dt, 37, 96);
      cpu_.kv_fake_quant(x.host, f);
      gpu_->kv_fake_quant(x.dev, f);
      EXPECT_EQ(download(x.dev), values(x.host)) << "format " << static_cast<int>(f) << " dtype " << static_cast<int>(dt);
    }
  }
  Pair odd = kv_rows(DType::kF32, 5, 48);  // 16-wide blocks in rows that are not whole warps
  cpu_.kv_fake_quant(odd.host, KvQuantFormat::kFp4E4m3x16);
  gpu_->kv_fake_quant(odd.dev, KvQuantFormat::kFp4E4m3x16);
  EXPECT_EQ(download(odd.dev), values(odd.host));
}

TEST_F(CudaV41OpsTest, HcCollapseIsTheReferenceBitwise) {
  const int64_t T = 5, hc = 4, D = 200;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Pair x = random(dt, {T, hc, D});
    Pair pre = random(DType::kF32, {T, hc}, 0.5f);
    Pair u = make(dt, {T, D});
    cpu_.hc_collapse(x.host, pre.host, u.host);
    gpu_->hc_collapse(x.dev, pre.dev, u.dev);
    EXPECT_EQ(download(u.dev), values(u.host)) << "dtype " << static_cast<int>(dt);
  }
}

TEST_F(CudaV41OpsTest, HcMixMatchesTheReference) {
  const int64_t T = 6, hc = 4, D = 256, n_mix = (2 + hc) * hc;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Pair x = random(dt, {T, hc, D});
    Pair fn = random(DType::kF32, {n_mix, hc * D}, 0.02f);
    Pair base = random(DType::kF32, {n_mix}, 0.5f);
    Pair scale = random(DType::kF32, {3}, 1.0f);
    ops::HcParams params;
    Pair pre = make(DType::kF32, {T, hc}), post = make(DType::kF32, {T, hc}), comb = make(DType::kF32, {T, hc, hc});
    Pair pre_d = make(DType::kF32, {T, hc}), post_d = make(DType::kF32, {T, hc}),
         comb_d = make(DType::kF32, {T, hc, hc});
    cpu_.hc_mix(x.host, {fn.host, base.host, scale.host}, params, pre.host, post.host, comb.host);
    gpu_->hc_mix(x.dev, {fn.dev, base.dev, scale.dev}, params, pre_d.dev, post_d.dev, comb_d.dev);
    EXPECT_LT(rel_error(download(pre_d.dev), values(pre.host)), 2e-5f);
    EXPECT_LT(rel_error(download(post_d.dev), values(post.host)), 2e-5f);
    EXPECT_LT(rel_error(download(comb_d.dev), values(comb.host)), 1e-4f);
    // Sinkhorn's columns sum to ~1 on the device as on the host (a transposed comb would not).
    const std::vector<float> c = download(comb_d.dev);
    for (int64_t k = 0; k < hc; ++k) {
      float s = 0.0f;
      for (int64_t j = 0; j < hc; ++j) s += c[j * hc + k];
      EXPECT_NEAR(s, 1.0f, 1e-3f);
    }
  }
}

TEST_F(CudaV41OpsTest, EngramGateMatchesTheReferenceInPlaceToo) {
  const int64_t T = 7, hc = 4, D = 192;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Pair x = random(dt, {T, hc, D});
    Pair kv = random(dt, {T, (hc + 1) * D});
    Pair qw = random(DType::kF32, {hc, D}, 1.0f), kw = random(DType::kF32, {hc, D}, 1.0f);
    Pair live = make(DType::kI32, {T});
    for (int64_t t = 0; t < T; ++t) set(live.host, t, t == 2 ? 0.0f : 1.0f);  // token 2: an image span (gate 0)
    upload(live);
    const float tol = dt == DType::kF32 ? 1e-5f : 8e-3f;
    Pair out = make(dt, {T, hc, D});
    cpu_.engram_gate(x.host, kv.host, qw.host, kw.host, live.host, 1e-6f, out.host);
    gpu_->engram_gate(x.dev, kv.dev, qw.dev, kw.dev, live.dev, 1e-6f, out.dev);
    const std::vector<float> want = values(out.host);
    EXPECT_LT(rel_error(download(out.dev), want), tol) << "dtype " << static_cast<int>(dt);
    gpu_->engram_gate(x.dev, kv.dev, qw.dev, kw.dev, TensorView{}, 1e-6f, x.dev);  // in place, all live
    cpu_.engram_gate(x.host, kv.host, qw.host, kw.host, TensorView{}, 1e-6f, x.host);
    EXPECT_LT(rel_error(download(x.dev), values(x.host)), tol) << "in place, dtype " << static_cast<int>(dt);
  }
}

TEST_F(CudaV41OpsTest, BlockAttentionMatchesTheReference) {
  const int64_t T = host_.n_tokens, H = 4, d = 64, ring = 32;
  ops::AttentionParams ap;
  ap.window = 16;
  ap.softmax_scale = 0.125f;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Pair q = random(dt, {T, H, d});
    Pair kv_block = random(dt, {T, d});
    Pair window = random(dt, {3, ring, d});
    Pair sinks = random(DType::kF32, {H}, 1.0f);
    Pair out = make(dt, {T, H, d});
    Pair out_d = make(dt, {T, H, d});
    cpu_.block_attention(q.host, kv_block.host, window.host, sinks.host, host_, ap, out.host);
    gpu_->block_attention(q.dev, kv_block.dev, window.dev, sinks.dev, dev_, ap, out_d.dev);
    EXPECT_LT(rel_error(download(out_d.dev), values(out.host)), dt == DType::kF32 ? 1e-5f : 1e-2f)
        << "dtype " << static_cast<int>(dt);
  }
}

// Ratio 2 (64 entries per 128-position block); candidate blocks of 8 entries, 3 kept. Integer
// q, keys and weights with power-of-two scales: every score exact, many ties.
TEST_F(CudaV41OpsTest, IndexerV41SelectsTheReferenceEntriesAndBlocks) {
  const int64_t T = host_.n_tokens, Hi = 4, di = 32, K = 16, nc = 3;
  IndexerV41Params p;
  p.ratio = 2;
  p.rows_per_block = 64;
  p.score_scale = 0.5f;
  p.weight_scale = 0.25f;
  p.candidate_topk_blocks = static_cast<int32_t>(nc);
  p.candidate_block_size = 8;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Pair q = random(dt, {T, Hi, di}, 1.0f, /*integers=*/true, 2);
    Pair w = random(DType::kF32, {T, Hi}, 1.0f, true, 2);
    Pair keys = random(dt, {3 * 3 * 64, di}, 1.0f, true, 1);
    Pair cand = make(DType::kI32, {T, nc});
    for (auto mode : {IndexerV41Params::Candidates::kNone, IndexerV41Params::Candidates::kPublish,
                      IndexerV41Params::Candidates::kRestrict}) {
      p.candidates = mode;
      Pair idx = make(DType::kI32, {T, K});
      cpu_.indexer_topk_v41(q.host, w.host, keys.host, host_, p, cand.host, idx.host);
      gpu_->indexer_topk_v41(q.dev, w.dev, keys.dev, dev_, p, cand.dev, idx.dev);
      const std::string what = "mode " + std::to_string(static_cast<int>(mode)) + " dtype " +
                               std::to_string(static_cast<int>(dt));
      EXPECT_EQ(download(idx.dev), values(idx.host)) << what;
      // Restrict reads the blocks publish wrote: the same on both sides (checked here).
      if (mode == IndexerV41Params::Candidates::kPublish) {
        EXPECT_EQ(download(cand.dev), values(cand.host)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::testing
