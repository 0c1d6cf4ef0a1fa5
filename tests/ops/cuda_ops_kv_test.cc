// CUDA conformance of the KV-state ops (window store, streaming compressor, row stores), the
// lightning indexer (integer-valued inputs: selection must match exactly, ties included),
// sparse attention and MoE, on multi-sequence batches mixing prefill chunks and decode tokens.
#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "batch_test_harness.h"
#include "kernels/launch.h"

namespace deepinfer::testing {
namespace {

class CudaKvOpsTest : public BatchHarness {
 protected:
  // Three sequences: a prefill chunk from 0, a later chunk, a single decode token.
  void SetUp() override {
    OpHarness::SetUp();
    if (IsSkipped()) return;
    set_batch({{0, 0, 40, 0, 0, 0}, {2, 40, 23, 90, 0, 0}, {1, 63, 1, 301, 0, 0}}, 3);
  }
  // A CSA token's selected compressed rows [T, K] (ratio 4), uploaded: ascending, every other one
  // past the first 200, a -1 tail.
  Pair selected_rows(int64_t T, int64_t K) {
    Pair idx = make(DType::kI32, {T, K});
    for (int64_t t = 0; t < T; ++t) {
      const int32_t n_avail = (positions_[t] + 1) / 4;
      int64_t k = 0;
      for (int32_t g = 0; g < n_avail && k < K; g += g < 200 ? 1 : 2) set(idx.host, t * K + k++, static_cast<float>(g));
      for (; k < K; ++k) set(idx.host, t * K + k, -1.0f);
    }
    upload(idx);
    return idx;
  }
};

TEST_F(CudaKvOpsTest, CompressorWindowAndRowStores) {
  for (int ratio : {4, 16}) {
    const bool overlapped = ratio == 4;
    const int64_t dc = 96, width = (overlapped ? 2 : 1) * dc, n_state = overlapped ? 2 * ratio : ratio;
    const int64_t T = host_.n_tokens;
    ops::EmitPlan ph, pd;
    ops::plan_emissions(host_, ratio, &ph);
    pd = ph;
    auto up = [&](std::vector<int32_t>& v) {
      std::vector<int32_t> copy = v.empty() ? std::vector<int32_t>{0} : v;
      TensorView d = gpu_->alloc_persistent(DType::kI32, {static_cast<int64_t>(copy.size())});
      gpu_->copy(TensorView::contiguous(copy.data(), DType::kI32, {static_cast<int64_t>(copy.size())}), d);
      return d;
    };
    pd.token = up(ph.h_token);
    pd.group = up(ph.h_group);
    pd.dst = up(ph.h_dst);
    Pair kv = random(DType::kF32, {T, width}), sc = random(DType::kF32, {T, width}), ape = random(DType::kF32, {ratio, width}, 0.1f);
    Pair sk = make(DType::kF32, {3, n_state, width}), ss = make(DType::kF32, {3, n_state, width});
    for (int64_t i = 0; i < ss.host.numel(); ++i) set(ss.host, i, -INFINITY);
    upload(sk);
    upload(ss);
    const int64_t n = std::max<int64_t>(ph.n_emit, 1);
    Pair rows = make(DType::kF32, {n, dc});
    ops::CompressParams cp{ratio, overlapped, dc};
    cpu_.compress(kv.host, sc.host, ape.host, host_, ph, cp, sk.host, ss.host, rows.host);
    gpu_->compress(kv.dev, sc.dev, ape.dev, dev_, pd, cp, sk.dev, ss.dev, rows.dev);
    EXPECT_LE(rel_error(download(rows.dev), values(rows.host)), 1e-6f) << "ratio " << ratio;
    EXPECT_LE(rel_error(download(sk.dev), values(sk.host)), 0.0f);
    // Row stores on identical inputs (the GPU's rows) must match exactly.
    const std::vector<float> grows = download(rows.dev);
    std::copy(grows.begin(), grows.end(), rows.host.as<float>());
    Pair pool = make(DType::kF32, {9 * 128 / ratio, dc});
    cpu_.store_rows(rows.host, ph, pool.host);
    gpu_->store_rows(rows.dev, pd, pool.dev);
    EXPECT_EQ(download(pool.dev), values(pool.host));
  }
  Pair kvw = random(DType::kBF16, {host_.n_tokens, 64});
  for (int64_t ring : {16, 19}) {  // window 16, and with 3 spare positions
    Pair window = make(DType::kBF16, {3, ring, 64});
    cpu_.window_store(kvw.host, host_, window.host);
    gpu_->window_store(kvw.dev, dev_, window.dev);
    EXPECT_EQ(download(window.dev), values(window.host)) << "ring " << ring;
  }
}

// Two sequences fed chunk after chunk (prefill pieces, single decode tokens, chunks that start
// and end mid-group): the compressor's rows and its carried state must follow the reference step
// by step — rows to rounding, the state bit for bit — so emissions that read tokens of earlier
// chunks from the state are covered; with the minimal ring (2m / m positions) and with spare
// positions (speculative decoding's), where a position's slot is p % ring.
TEST_F(CudaKvOpsTest, CompressorCarriesItsStateAcrossChunks) {
  const std::vector<std::pair<int32_t, int32_t>> steps = {{37, 5}, {53, 1}, {1, 64}, {1, 3}, {7, 1}, {30, 17}, {1, 1}};
  for (int ratio : {4, 16})
  for (int64_t spare : {0, 3}) {
    const bool overlapped = ratio == 4;
    const int64_t dc = 64, width = (overlapped ? 2 : 1) * dc, n_state = (overlapped ? 2 * ratio : ratio) + spare;
    Pair ape = random(DType::kF32, {ratio, width}, 0.1f);
    Pair sk = make(DType::kF32, {2, n_state, width}), ss = make(DType::kF32, {2, n_state, width});
    for (int64_t i = 0; i < ss.host.numel(); ++i) set(ss.host, i, -INFINITY), set(sk.host, i, 0.0f);
    upload(sk);
    upload(ss);
    int32_t pos[2] = {0, 0};
    for (const auto& [n0, n1] : steps) {
      set_batch({{0, 0, n0, pos[0], 0, 0}, {1, n0, n1, pos[1], 0, 0}}, 1);
      const int64_t T = host_.n_tokens;
      Pair kv = random(DType::kF32, {T, width}), sc = random(DType::kF32, {T, width});
      ops::EmitPlan ph, pd;
      ops::plan_emissions(host_, ratio, &ph);
      pd = ph;
      std::vector<int32_t> tok = ph.h_token.empty() ? std::vector<int32_t>{0} : ph.h_token;
      pd.token = gpu_->alloc_persistent(DType::kI32, {static_cast<int64_t>(tok.size())});
      gpu_->copy(TensorView::contiguous(tok.data(), DType::kI32, {static_cast<int64_t>(tok.size())}), pd.token);
      const int64_t n = std::max<int64_t>(ph.n_emit, 1);
      Pair rows = make(DType::kF32, {n, dc});
      const ops::CompressParams cp{ratio, overlapped, dc};
      cpu_.compress(kv.host, sc.host, ape.host, host_, ph, cp, sk.host, ss.host, rows.host);
      gpu_->compress(kv.dev, sc.dev, ape.dev, dev_, pd, cp, sk.dev, ss.dev, rows.dev);
      if (ph.n_emit > 0) {
        EXPECT_LE(rel_error(download(rows.dev), values(rows.host)), 1e-6f) << "ratio " << ratio << " at " << pos[0];
      }
      EXPECT_EQ(download(sk.dev), values(sk.host)) << "ratio " << ratio << " at " << pos[0] << ", " << pos[1];
      EXPECT_EQ(download(ss.dev), values(ss.host)) << "ratio " << ratio << " at " << pos[0] << ", " << pos[1];
      pos[0] += n0;
      pos[1] += n1;
    }
  }
}

// F32 inputs take the scalar scores, BF16 the tensor-core ones (zero-padding 4 heads x 32 dims).
TEST_F(CudaKvOpsTest, IndexerSelectsTheSameRowsIncludingTies) {
  const int64_t T = host_.n_tokens, Hi = 4, di = 32, K = 8;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Pair q = random(dt, {T, Hi, di}, 1.0f, /*integers=*/true, 2);
    Pair w = random(DType::kF32, {T, Hi}, 1.0f, true, 2);
    Pair keys = random(dt, {9 * 32, di}, 1.0f, true, 1);  // ratio 4: 32 rows per block
    Pair idx = make(DType::kI32, {T, K});
    cpu_.indexer_topk(q.host, w.host, keys.host, host_, 4, 32, 0.5f, idx.host);
    gpu_->indexer_topk(q.dev, w.dev, keys.dev, dev_, 4, 32, 0.5f, idx.dev);
    EXPECT_EQ(download(idx.dev), values(idx.host)) << "dtype " << static_cast<int>(dt);
  }
}

// V4-Flash indexer shapes (64 heads x 128 dims, up to 600 keys: five 128-key blocks, the last
// partial) with integer-valued BF16 inputs: the same top-512 as the reference, ties included, and
// a token's selection does not depend on the batch around it.
TEST_F(CudaKvOpsTest, IndexerAtV4ShapesMatchesAndIsBatchInvariant) {
  const int64_t Hi = 64, di = 128, K = 512;
  const int32_t blocks = 19;
  set_batch({{0, 0, 70, 1000, 0, 0}, {1, 70, 1, 2400, 0, 0}, {2, 71, 3, 5, 0, 0}}, blocks);
  const int64_t T = host_.n_tokens;
  Pair q = random(DType::kBF16, {T, Hi, di}, 1.0f, true, 2);
  Pair w = random(DType::kF32, {T, Hi}, 1.0f, true, 2);
  Pair keys = random(DType::kBF16, {3 * blocks * 32, di}, 1.0f, true, 1);
  Pair idx = make(DType::kI32, {T, K});
  cpu_.indexer_topk(q.host, w.host, keys.host, host_, 4, 32, 0.5f, idx.host);
  gpu_->indexer_topk(q.dev, w.dev, keys.dev, dev_, 4, 32, 0.5f, idx.dev);
  const std::vector<float> all = download(idx.dev);
  EXPECT_EQ(all, values(idx.host));
  set_batch({{1, 0, 1, 2400, 0, 0}}, blocks, {1});
  Pair one = make(DType::kI32, {1, K});
  gpu_->indexer_topk(q.dev.slice0(70, 71), w.dev.slice0(70, 71), keys.dev, dev_, 4, 32, 0.5f, one.dev);
  EXPECT_EQ(download(one.dev), std::vector<float>(all.begin() + 70 * K, all.begin() + 71 * K));
}

// Long rows with integer scores (many ties): decode tokens at 128K context (32,768 keys: the
// shared-memory top-k at its 1,024-thread capacity) and at ~20K (ranges per thread partly filled),
// then with a prefill-sized batch (>= 132 tokens: 256 threads), whose 32K-key rows exceed that
// block's capacity (the strided path) while the ~20K ones still fit. Both match the reference.
TEST_F(CudaKvOpsTest, IndexerTopkOfLongRowsMatches) {
  const int64_t Hi = 4, di = 32, K = 512;
  const int32_t blocks = 1024;  // 128K positions of 128 tokens per block, 32 keys each at ratio 4
  Pair keys = random(DType::kBF16, {3 * blocks * 32, di}, 1.0f, /*integers=*/true, 1);
  for (int32_t long_tokens : {0, 140}) {
    std::vector<ops::SeqSpan> seqs = {{0, 0, 1, 131071, 0, 0}, {1, 1, 2, 19998, 0, 0}};
    if (long_tokens > 0) seqs.push_back({2, 3, long_tokens, 130900, 0, 0});
    set_batch(seqs, blocks);
    const int64_t T = host_.n_tokens;
    Pair q = random(DType::kBF16, {T, Hi, di}, 1.0f, true, 2);
    Pair w = random(DType::kF32, {T, Hi}, 1.0f, true, 2);
    Pair idx = make(DType::kI32, {T, K});
    cpu_.indexer_topk(q.host, w.host, keys.host, host_, 4, 32, 0.5f, idx.host);
    gpu_->indexer_topk(q.dev, w.dev, keys.dev, dev_, 4, 32, 0.5f, idx.dev);
    EXPECT_EQ(download(idx.dev), values(idx.host)) << T << " tokens";
  }
}

TEST_F(CudaKvOpsTest, SparseAttentionWindowCompressedAndSinks) {
  const int64_t T = host_.n_tokens, H = 12, d = 128, W = 16;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int mode = 0; mode < 3; ++mode) {  // 0: window only, 1: HCA (all rows), 2: CSA (listed rows)
      // A ring with 5 spare positions: window row p at p % 21, the token sees 16.
      Pair q = random(dt, {T, H, d}, 0.3f), kv = random(dt, {T, d}), window = random(dt, {3, W + 5, d});
      Pair comp = random(dt, {9 * 32, d}), sinks = random(DType::kF32, {H});
      Pair idx = make(DType::kI32, {T, 5});
      for (int64_t t = 0; t < T; ++t) {
        const int32_t n_avail = (positions_[t] + 1) / 4;
        int32_t k = 0;
        for (int32_t g = 0; g < n_avail && k < 5; g += 3) set(idx.host, t * 5 + k++, static_cast<float>(g));
        for (; k < 5; ++k) set(idx.host, t * 5 + k, -1.0f);
      }
      upload(idx);
      ops::AttentionParams ap{W, mode == 0 ? 0 : 4, mode == 1, 32, 1.0f / std::sqrt(128.0f)};
      Pair out = make(dt, {T, H, d});
      const TensorView none;
      cpu_.sparse_attention(q.host, kv.host, window.host, mode ? comp.host : none, mode == 2 ? idx.host : none,
                            sinks.host, host_, ap, out.host);
      gpu_->sparse_attention(q.dev, kv.dev, window.dev, mode ? comp.dev : none, mode == 2 ? idx.dev : none, sinks.dev,
                             dev_, ap, out.dev);
      EXPECT_LE(rel_error(download(out.dev), values(out.host)), dt == DType::kF32 ? 1e-5f : 1e-2f) << "mode " << mode;
    }
  }
}

// V4-Flash shapes (64 and 20 heads, head_dim 512, window 128, up to 1,100 + 128 rows per token:
// the tensor-core kernel's many-tile, partial-tile and head-masking paths, with S kept in shared
// memory (<= 1,024 rows) and recomputed (the decode token's 1,228 rows in mode 1)) against the
// reference, and a token's output must not depend on the batch around it (bit for bit).
TEST_F(CudaKvOpsTest, SparseAttentionAtV4ShapesIsBatchInvariant) {
  const int64_t d = 512, W = 128, K = 512;
  const int32_t blocks = 35;  // 35 x 128 positions cover position 4400
  const std::vector<ops::SeqSpan> batch = {{0, 0, 70, 1000, 0, 0}, {1, 70, 1, 4400, 0, 0}, {2, 71, 3, 5, 0, 0}};
  for (int64_t H : {64, 20}) {
    for (int mode = 1; mode < 3; ++mode) {  // 1: all compressed rows (ratio 4), 2: K listed rows
      set_batch(batch, blocks);
      const int64_t T = host_.n_tokens;
      Pair q = random(DType::kBF16, {T, H, d}, 0.3f), kv = random(DType::kBF16, {T, d});
      // The window ring with 8 spare positions (speculative decoding): row p at p % 136.
      Pair window = random(DType::kBF16, {3, W + 8, d}), comp = random(DType::kBF16, {3 * blocks * 32, d});
      Pair sinks = random(DType::kF32, {H});
      Pair idx = selected_rows(T, K);
      const ops::AttentionParams ap{W, 4, mode == 1, 32, 1.0f / std::sqrt(static_cast<float>(d))};
      const TensorView none;
      Pair out = make(DType::kBF16, {T, H, d});
      cpu_.sparse_attention(q.host, kv.host, window.host, comp.host, mode == 2 ? idx.host : none, sinks.host, host_, ap,
                            out.host);
      gpu_->sparse_attention(q.dev, kv.dev, window.dev, comp.dev, mode == 2 ? idx.dev : none, sinks.dev, dev_, ap,
                             out.dev);
      const std::vector<float> full = download(out.dev);
      EXPECT_LE(rel_error(full, values(out.host)), 1e-2f) << "H " << H << " mode " << mode;

      // The decode token (batch row 70) alone in a batch of one, with its own block table.
      set_batch({{1, 0, 1, 4400, 0, 0}}, blocks, {1});
      Pair out1 = make(DType::kBF16, {1, H, d});
      const int64_t row = 70 * H * d;
      gpu_->sparse_attention(q.dev.slice0(70, 71), kv.dev.slice0(70, 71), window.dev, comp.dev,
                             mode == 2 ? idx.dev.slice0(70, 71) : none, sinks.dev, dev_, ap, out1.dev);
      const std::vector<float> alone = download(out1.dev);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), full.begin() + row)) << "H " << H << " mode " << mode;
    }
  }
}

// The output's RoPE de-rotation requested in the attention call (AttentionParams::out_rope: folded
// into the tensor-core kernel's epilogue for BF16, a rope() launch after the scalar kernel for F32)
// is bitwise the attention followed by rope(), at V4 shapes (64 heads x 512, 64 RoPE dims: the
// last warp's columns) and at a head_dim whose RoPE dims span two warps' columns (128, 96 dims).
TEST_F(CudaKvOpsTest, SparseAttentionOutputRopeIsBitwiseAttentionThenRope) {
  for (auto [d, n_rope, H] : std::vector<std::tuple<int64_t, int, int64_t>>{{512, 64, 64}, {128, 96, 20}}) {
    std::vector<float> freqs(static_cast<size_t>(n_rope / 2));
    for (int i = 0; i < n_rope / 2; ++i) freqs[i] = std::pow(10000.0f, -2.0f * i / n_rope);
    Pair f = make(DType::kF32, {n_rope / 2});
    std::copy(freqs.begin(), freqs.end(), f.host.as<float>());
    upload(f);
    const ops::RopeParams rope{f.dev, n_rope, /*inverse=*/true};
    const int64_t T = host_.n_tokens, W = 16;
    for (DType dt : {DType::kBF16, DType::kF32}) {
      Pair q = random(dt, {T, H, d}, 0.3f), kv = random(dt, {T, d}), window = random(dt, {3, W, d});
      Pair comp = random(dt, {9 * 32, d}), sinks = random(DType::kF32, {H});
      ops::AttentionParams ap{W, 4, true, 32, 1.0f / std::sqrt(static_cast<float>(d))};
      Pair separate = make(dt, {T, H, d}), folded = make(dt, {T, H, d});
      gpu_->sparse_attention(q.dev, kv.dev, window.dev, comp.dev, TensorView{}, sinks.dev, dev_, ap, separate.dev);
      gpu_->rope(separate.dev, dev_.positions, rope);
      ap.out_rope = rope;
      gpu_->sparse_attention(q.dev, kv.dev, window.dev, comp.dev, TensorView{}, sinks.dev, dev_, ap, folded.dev);
      const std::vector<float> a = download(folded.dev), b = download(separate.dev);
      EXPECT_EQ(a, b) << "d " << d << " dtype " << int(dt);
      int64_t rotated = 0;  // the de-rotation did something: the tail differs from no rotation
      Pair plain = make(dt, {T, H, d});
      ap.out_rope = {};
      gpu_->sparse_attention(q.dev, kv.dev, window.dev, comp.dev, TensorView{}, sinks.dev, dev_, ap, plain.dev);
      const std::vector<float> c = download(plain.dev);
      for (size_t i = 0; i < c.size(); ++i) rotated += c[i] != a[i];
      EXPECT_GT(rotated, T * H * n_rope / 4) << "d " << d << " dtype " << int(dt);
    }
  }
}

// The cluster kernel (sparse_attention_cluster.cuh: a (token, 16 heads) CTA's work spread over 2, 4
// or 8 CTAs) gives the one-CTA kernel's bits at every cluster size the head_dim allows, for decode
// tokens whose rows fill one partial tile (position 5), two tiles (the window), 3 to 12 tiles (HCA
// at positions 130 to 2500), 10 (CSA: the window and 512 listed rows), and more than its S array
// holds (HCA at 4400: CTA 0 alone); 64 heads and 20 (head masking) at head_dim 512 (2, 4 and 8
// CTAs), 20 at 256 (2 and 4; 8 falls back to one); and the tokens as one batch (the launcher's own
// choice of kernel) agree too, and with the reference.
TEST_F(CudaKvOpsTest, SparseAttentionClusterKernelIsBitwiseTheOneCtaKernel) {
  const int64_t W = 128, K = 512;
  const int32_t blocks = 35;
  const std::vector<int32_t> pos = {5, 200, 1000, 2500, 4400, 130};
  std::vector<ops::SeqSpan> batch;
  for (int32_t i = 0; i < static_cast<int32_t>(pos.size()); ++i) batch.push_back({i, i, 1, pos[i], 0, 0});
  set_batch(batch, blocks);
  const int64_t T = host_.n_tokens;
  for (auto [d, H] : std::vector<std::pair<int64_t, int64_t>>{{512, 64}, {512, 20}, {256, 20}}) {
    Pair q = random(DType::kBF16, {T, H, d}, 0.3f), kv = random(DType::kBF16, {T, d});
    Pair window = random(DType::kBF16, {T, W, d}), comp = random(DType::kBF16, {T * blocks * 32, d});
    Pair sinks = random(DType::kF32, {H});
    Pair idx = selected_rows(T, K);
    for (int mode = 0; mode < 3; ++mode) {  // 0: window only, 1: all compressed rows (HCA), 2: listed (CSA)
      const std::string what = "d " + std::to_string(d) + " H " + std::to_string(H) + " mode " + std::to_string(mode);
      const ops::AttentionParams ap{W, mode == 0 ? 0 : 4, mode == 1, 32, 1.0f / std::sqrt(static_cast<float>(d))};
      const TensorView none;
      Pair batched = make(DType::kBF16, {T, H, d});
      gpu_->sparse_attention(q.dev, kv.dev, window.dev, mode ? comp.dev : none, mode == 2 ? idx.dev : none,
                             sinks.dev, dev_, ap, batched.dev);
      cpu_.sparse_attention(q.host, kv.host, window.host, mode ? comp.host : none, mode == 2 ? idx.host : none,
                            sinks.host, host_, ap, batched.host);
      const std::vector<float> batch_out = download(batched.dev);
      EXPECT_LE(rel_error(batch_out, values(batched.host)), 1e-2f) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      for (int64_t t = 0; t < T; ++t) {  // each token alone (a decode-sized launch), every cluster size
        std::vector<float> one_cta;
        for (int cluster : {1, 2, 4, 8}) {
          Pair out = make(DType::kBF16, {1, H, d});
          kernels::AttentionLaunchParams p{
              static_cast<const char*>(q.dev.data) + t * H * d * 2, kv.dev.data, window.dev.data,
              mode ? comp.dev.data : nullptr, kernels::ActType::kBF16,
              mode == 2 ? static_cast<const int32_t*>(idx.dev.data) + t * K : nullptr,
              static_cast<const float*>(sinks.dev.data), static_cast<const int32_t*>(dev_.positions.data) + t,
              static_cast<const int32_t*>(dev_.token_seq.data) + t,
              static_cast<const kernels::SeqSpanDev*>(dev_.seqs.data),
              static_cast<const int32_t*>(dev_.block_tables.data), out.dev.data, 1, H, d, W, ap.ratio,
              ap.all_compressed, ap.rows_per_block, blocks, mode == 2 ? static_cast<int>(K) : 0, ap.softmax_scale,
              true};
          p.cluster = cluster;
          const bool fits = cluster > 1 && d % (64 * cluster) == 0;  // (cluster_attention_supports)
          EXPECT_EQ(kernels::attention_cluster_size(p), fits ? cluster : 1) << what;
          ASSERT_EQ(kernels::launch_sparse_attention(p, nullptr), cudaSuccess) << what;
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          const std::vector<float> got = download(out.dev);
          if (cluster == 1) {
            one_cta = got;
            EXPECT_TRUE(std::equal(got.begin(), got.end(), batch_out.begin() + t * H * d)) << what << " token " << t;
          } else {
            EXPECT_EQ(got, one_cta) << what << " token " << t << " cluster " << cluster;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::testing
