// CUDA conformance of the sampling ops: argmax_rows, sample_rows, logprob_rows and token_rank_rows
// give the CPU reference's ids and ranks (whose rules are the host sampler's: argmax_rows_test) —
// exactly — and its logprobs within a float ulp or two, over vocabulary sizes with and without a
// tail, padded row strides, ties, NaN / +inf / all -inf rows and batches of 1 (the most slices)
// to 40.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "op_test_harness.h"

namespace deepinfer::testing {
namespace {

class CudaSampleOpsTest : public OpHarness {};

// Greedy sampling on the device: the same ids as the CPU op (whose rules are the host sampler's,
// argmax_rows_test), over vocabulary sizes with and without a 4-element tail, padded row strides
// (the scalar path), ties (integer logits: many equal maxima, across the slices a small batch's
// rows are split into), NaN, +inf and all -inf / NaN rows; and batch-1 rows (16 slices).
TEST_F(CudaSampleOpsTest, ArgmaxRowsIsTheCpuChoice) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const int64_t V : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{129280}}) {
    for (const int64_t pad : {int64_t{0}, int64_t{3}}) {
      const int64_t R = 9, ld = V + pad;
      Pair buf = random(DType::kF32, {R, ld}, 1.0f, /*integers=*/true, /*range=*/4);  // ties at the max
      float* h = buf.host.as<float>();
      std::uniform_int_distribution<int64_t> at(0, V - 1);
      for (int64_t i = 0; i < V; ++i) {
        h[1 * ld + i] = nan;                        // row 1: all NaN -> -1
        h[2 * ld + i] = -inf;                       // row 2: all -inf -> -1
        h[3 * ld + i] = i % 5 == 0 ? nan : h[3 * ld + i];  // row 3: NaN among values
      }
      h[4 * ld + at(rng_)] = inf;                   // row 4: +inf reads as FLT_MAX ...
      h[4 * ld + at(rng_)] = std::numeric_limits<float>::max();  // ... tied with FLT_MAX
      h[5 * ld + at(rng_)] = inf, h[5 * ld + at(rng_)] = inf;    // row 5: two +inf
      h[6 * ld + V - 1] = 100.0f;                   // row 6: the max at the last id (the tail)
      h[7 * ld + 0] = 100.0f;                       // row 7: at id 0
      h[8 * ld + at(rng_)] = nan, h[8 * ld + at(rng_)] = -inf;   // row 8: a stray NaN and -inf
      upload(buf);
      TensorView lh = buf.host, ld_dev = buf.dev;
      lh.shape[1] = ld_dev.shape[1] = V;            // [R, V] with row stride ld
      Pair ids = make(DType::kI32, {R});
      cpu_.argmax_rows(lh, ids.host);
      gpu_->argmax_rows(ld_dev, ids.dev);
      EXPECT_EQ(download(ids.dev), values(ids.host)) << "V " << V << ", row stride " << ld;
      EXPECT_EQ(ids.host.as<int32_t>()[1], -1);
      EXPECT_EQ(ids.host.as<int32_t>()[2], -1);
    }
  }
  for (int trial = 0; trial < 4; ++trial) {  // one row of the real vocabulary: the most slices
    Pair row = random(DType::kF32, {1, 129280}, 1.0f, /*integers=*/true, /*range=*/3 + trial);
    Pair ids = make(DType::kI32, {1});
    cpu_.argmax_rows(row.host, ids.host);
    gpu_->argmax_rows(row.dev, ids.dev);
    EXPECT_EQ(download(ids.dev), values(ids.host)) << "trial " << trial;
  }
}

// Temperature sampling on the device (Ops::sample_rows): the CPU op's ids (which are the host
// sampler's, argmax_rows_test) for greedy, temperature, top-k, top-p (also together) and min-p
// rows with random seeds and positions, over vocabulary sizes with padded strides, flat and peaked
// rows, ties, NaN / +inf / all -inf rows, batches of 1 (the most slices) to 40; and ids that move
// with the seed (rows are sampled, not argmax rows).
TEST_F(CudaSampleOpsTest, SampleRowsIsTheCpuChoice) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  int64_t compared = 0, not_argmax = 0;
  for (const int64_t V : {int64_t{7}, int64_t{1000}, int64_t{129280}}) {
    for (const int64_t R : {int64_t{1}, int64_t{9}, int64_t{40}}) {
      const int64_t ld = V + (R == 9 ? 3 : 0);
      Pair buf = random(DType::kF32, {R, ld}, 3.0f);
      float* h = buf.host.as<float>();
      for (int64_t r = 4; r < R; r += 3) {  // peaked rows: a few large logits (short top-p prefixes)
        for (int64_t i = 0; i < V; i += 97) h[r * ld + i] += 12.0f;
      }
      for (int64_t r = 5; r < R; r += 6) {  // ties: integer logits
        for (int64_t i = 0; i < V; ++i) h[r * ld + i] = std::round(h[r * ld + i]);
      }
      if (R > 1) {
        for (int64_t i = 0; i < V; ++i) {
          h[1 * ld + i] = i % 2 ? nan : -inf;                 // row 1: nothing finite -> -1
          h[2 * ld + i] = i % 7 == 0 ? nan : h[2 * ld + i];   // row 2: NaN among values
        }
        h[3 * ld + V / 2] = inf;                              // row 3: +inf reads as FLT_MAX
      }
      upload(buf);
      TensorView lh = buf.host, ld_dev = buf.dev;
      lh.shape[1] = ld_dev.shape[1] = V;  // [R, V] with row stride ld
      std::vector<ops::Ops::SampleRow> rows(static_cast<size_t>(R));
      std::uniform_real_distribution<float> unit(0.0f, 1.0f);
      for (int64_t r = 0; r < R; ++r) {
        const float t = r % 4 == 3 ? 0.0f : 0.2f + 1.5f * unit(rng_);
        const int32_t top_k = r % 5 == 1 ? 1 + static_cast<int32_t>(rng_() % 50) : 0;
        // Rows 6, 21, 36: top-k and top-p together (top-p's masses from the keys top-k cached).
        const float top_p = r % 5 == 2 || r % 7 == 0 || r % 15 == 6 ? 0.05f + 0.9f * unit(rng_) : 1.0f;
        rows[static_cast<size_t>(r)] = {t, r % 3 == 1 ? 0.2f * unit(rng_) : 0.0f, rng_(),
                                        static_cast<int64_t>(rng_() % 200000), top_k, top_p};
      }
      Pair ids = make(DType::kI32, {R}), argmax = make(DType::kI32, {R});
      cpu_.sample_rows(lh, rows, ids.host);
      cpu_.argmax_rows(lh, argmax.host);
      gpu_->sample_rows(ld_dev, rows, ids.dev);
      EXPECT_EQ(download(ids.dev), values(ids.host)) << "V " << V << ", rows " << R;
      if (R > 1) {
        EXPECT_EQ(ids.host.as<int32_t>()[1], -1);
      }
      for (int64_t r = 0; r < R; ++r) {  // the plain temperature rows of the unpeaked kind
        const ops::Ops::SampleRow& p = rows[static_cast<size_t>(r)];
        if (p.temperature == 0.0f || p.top_k > 0 || p.top_p < 1.0f || (r >= 4 && (r - 4) % 3 == 0) ||
            argmax.host.as<int32_t>()[r] < 0) {
          continue;
        }
        ++compared;
        not_argmax += ids.host.as<int32_t>()[r] != argmax.host.as<int32_t>()[r];
      }
    }
  }
  EXPECT_GT(not_argmax, compared / 3) << "of " << compared;
}

// Top-p rows drawn first (DEEPINFER_SAMPLE_DRAW_FIRST, sample_filter.cuh): the CPU op's ids both
// where the draw over every min-p survivor stands (it survives the cut) and where it falls outside
// and the row is filtered and drawn again — flat rows with small top-p put most first draws
// outside, peaked rows most inside; the test counts both kinds among the top-p rows (from the CPU
// op's draw without the cut) so that each path is exercised, at batch 1 (the most slices) and 40,
// beside top-k rows (which filter first) and plain temperature rows in the same launches.
TEST_F(CudaSampleOpsTest, FilteredRowsDrawFirstAndFilterOnlyWhereTheDrawFallsOutside) {
  int64_t stood = 0, redrawn = 0;
  for (const int64_t V : {int64_t{1000}, int64_t{129280}}) {
    for (const int64_t R : {int64_t{1}, int64_t{40}}) {
      for (int trial = 0; trial < 4; ++trial) {
        Pair buf = random(DType::kF32, {R, V}, trial % 2 ? 8.0f : 1.0f);  // peaked-ish and flat rows
        upload(buf);
        std::vector<ops::Ops::SampleRow> rows(static_cast<size_t>(R)), open(static_cast<size_t>(R));
        std::uniform_real_distribution<float> unit(0.0f, 1.0f);
        for (int64_t r = 0; r < R; ++r) {
          const bool k = (r + trial) % 3 == 1, plain = (r + trial) % 3 == 2 && R > 1;
          const float top_p = k || plain ? 1.0f : 0.02f + 0.9f * unit(rng_);
          const int32_t top_k = k ? 1 + static_cast<int32_t>(rng_() % 200) : 0;
          const float min_p = r % 5 == 4 ? 0.05f * unit(rng_) : 0.0f;
          rows[static_cast<size_t>(r)] = {0.5f + unit(rng_), min_p, rng_(), static_cast<int64_t>(rng_() % 100000), top_k,
                                          top_p};
          open[static_cast<size_t>(r)] = rows[static_cast<size_t>(r)];
          open[static_cast<size_t>(r)].top_k = 0, open[static_cast<size_t>(r)].top_p = 1.0f;
        }
        Pair ids = make(DType::kI32, {R}), first = make(DType::kI32, {R});
        cpu_.sample_rows(buf.host, rows, ids.host);
        cpu_.sample_rows(buf.host, open, first.host);  // the draw without the cut
        gpu_->sample_rows(buf.dev, rows, ids.dev);
        EXPECT_EQ(download(ids.dev), values(ids.host)) << "V " << V << ", rows " << R << ", trial " << trial;
        for (int64_t r = 0; r < R; ++r) {
          if (rows[static_cast<size_t>(r)].top_p < 1.0f)
            (ids.host.as<int32_t>()[r] == first.host.as<int32_t>()[r] ? stood : redrawn)++;
        }
      }
    }
  }
  EXPECT_GT(stood, 20);
  EXPECT_GT(redrawn, 20);
}

// Rows [R, ld] (V columns) that stress a logits op: ties (integer logits) in every fifth row from
// row 4, and where there are such rows nothing finite in row 1 (NaN and -inf) and a +inf in row 3
// (read as FLT_MAX). Row 2 is each test's own.
void awkward_rows(float* h, int64_t R, int64_t V, int64_t ld) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t r = 4; r < R; r += 5) {
    for (int64_t i = 0; i < V; ++i) h[r * ld + i] = std::round(h[r * ld + i]);
  }
  for (int64_t i = 0; i < V && R > 1; ++i) h[1 * ld + i] = i % 2 ? nan : -inf;
  if (R > 3) h[3 * ld + V / 2] = inf;
}

// Raw logprobs on the device (Ops::logprob_rows): the CPU op's top-n ids exactly and its values
// within 2 float ulps (the F64 log-sum-exp is summed per fixed slice on the device), for n = 0,
// 5 and 20, rows with ties (integer logits), NaN, +inf, nothing finite and fewer finite entries
// than n, token -1; and a row's results do not depend on the batch it is in (the same bits alone).
TEST_F(CudaSampleOpsTest, LogprobRowsIsTheCpuResult) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto close = [](float got, float want) {
    if (std::isinf(want) || std::isinf(got)) return got == want;
    return std::fabs(got - want) <= 2.0f * std::numeric_limits<float>::epsilon() * std::max(1.0f, std::fabs(want));
  };
  int64_t entries = 0;
  for (const int64_t V : {int64_t{7}, int64_t{1000}, int64_t{129280}}) {
    for (const int64_t R : {int64_t{1}, int64_t{9}, int64_t{40}}) {
      for (const int64_t n : {int64_t{0}, int64_t{5}, int64_t{20}}) {
        const int64_t ld = V + (R == 9 ? 3 : 0);
        Pair buf = random(DType::kF32, {R, ld}, 3.0f);
        float* h = buf.host.as<float>();
        awkward_rows(h, R, V, ld);
        for (int64_t i = 0; i < V && R > 2; ++i) {  // row 2: 3 finite entries
          h[2 * ld + i] = i % 7 == 0 ? nan : (i > 3 ? -inf : h[2 * ld + i]);
        }
        upload(buf);
        TensorView lh = buf.host, ld_dev = buf.dev;
        lh.shape[1] = ld_dev.shape[1] = V;  // [R, V] with row stride ld
        Pair tokens = make(DType::kI32, {R});
        for (int64_t r = 0; r < R; ++r) tokens.host.as<int32_t>()[r] = r == 5 ? -1 : static_cast<int32_t>(rng_() % V);
        upload(tokens);
        Pair lp = make(DType::kF32, {R}), ids = make(DType::kI32, {R, n}), top = make(DType::kF32, {R, n});
        cpu_.logprob_rows(lh, tokens.host, lp.host, ids.host, top.host);
        gpu_->logprob_rows(ld_dev, tokens.dev, lp.dev, ids.dev, top.dev);
        const std::string at = "V " + std::to_string(V) + ", rows " + std::to_string(R) + ", n " + std::to_string(n);
        EXPECT_EQ(download(ids.dev), values(ids.host)) << at;
        const std::vector<float> got_lp = download(lp.dev), want_lp = values(lp.host);
        const std::vector<float> got_top = download(top.dev), want_top = values(top.host);
        for (size_t i = 0; i < got_lp.size(); ++i) EXPECT_TRUE(close(got_lp[i], want_lp[i])) << at << ", row " << i;
        for (size_t i = 0; i < got_top.size(); ++i) {
          EXPECT_TRUE(close(got_top[i], want_top[i])) << at << ", entry " << i << ": " << got_top[i] << " vs " << want_top[i];
          entries += std::isfinite(want_top[i]);
        }
        if (R == 1 || n == 0) continue;
        // Row 7 alone: the same bits as in the batch.
        Pair one = make(DType::kF32, {1, V});
        for (int64_t i = 0; i < V; ++i) one.host.as<float>()[i] = h[7 * ld + i];
        upload(one);
        Pair t1 = make(DType::kI32, {1}), lp1 = make(DType::kF32, {1}), ids1 = make(DType::kI32, {1, n}),
             top1 = make(DType::kF32, {1, n});
        t1.host.as<int32_t>()[0] = tokens.host.as<int32_t>()[7];
        upload(t1);
        gpu_->logprob_rows(one.dev, t1.dev, lp1.dev, ids1.dev, top1.dev);
        EXPECT_EQ(download(lp1.dev)[0], got_lp[7]) << at;
        const std::vector<float> alone = download(top1.dev);
        EXPECT_EQ(alone, std::vector<float>(got_top.begin() + 7 * n, got_top.begin() + 8 * n)) << at;
      }
    }
  }
  EXPECT_GT(entries, 2000);
}

// Token ranks on the device (Ops::token_rank_rows): the CPU op's counts exactly, over vocabulary
// sizes with padded strides, ties (integer logits), NaN / +inf / nothing finite, token -1, and
// tokens at the row's best and worst places.
TEST_F(CudaSampleOpsTest, TokenRankRowsIsTheCpuCount) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int64_t above_one = 0;
  for (const int64_t V : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{129280}}) {
    for (const int64_t R : {int64_t{1}, int64_t{9}, int64_t{40}}) {
      const int64_t ld = V + (R == 9 ? 3 : 0);
      Pair buf = random(DType::kF32, {R, ld}, 3.0f);
      float* h = buf.host.as<float>();
      awkward_rows(h, R, V, ld);
      for (int64_t i = 0; i < V && R > 2; ++i) {  // row 2: NaN among values
        h[2 * ld + i] = i % 7 == 0 ? nan : h[2 * ld + i];
      }
      upload(buf);
      TensorView lh = buf.host, ld_dev = buf.dev;
      lh.shape[1] = ld_dev.shape[1] = V;  // [R, V] with row stride ld
      Pair tokens = make(DType::kI32, {R});
      for (int64_t r = 0; r < R; ++r) {
        tokens.host.as<int32_t>()[r] = r == 5 ? -1 : r == 3 ? static_cast<int32_t>(V / 2) : static_cast<int32_t>(rng_() % V);
      }
      upload(tokens);
      Pair rank = make(DType::kI32, {R});
      cpu_.token_rank_rows(lh, tokens.host, rank.host);
      gpu_->token_rank_rows(ld_dev, tokens.dev, rank.dev);
      EXPECT_EQ(download(rank.dev), values(rank.host)) << "V " << V << ", rows " << R;
      for (float k : values(rank.host)) above_one += k > 1.0f;
      if (R > 3) {
        EXPECT_EQ(rank.host.as<int32_t>()[3], 1) << "V " << V;  // +inf: the best place
      }
    }
  }
  EXPECT_GT(above_one, 40);
}

// Steps 0-4 on the device (Ops::adjust_logits): the CPU op's rows bit for bit (whose values are
// the host sampler's, argmax_rows_test) for rows with bias, masks, stop ids (suppressed, and kept
// where they are all that is finite), repetition / frequency / presence penalties and none, and a
// pending token (one of the row's entries, a token without one, none), at the real vocabulary with
// a padded row stride.
TEST_F(CudaSampleOpsTest, AdjustLogitsIsTheCpuResult) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const int64_t V : {int64_t{1000}, int64_t{129280}}) {
    const int64_t R = 12, ld = V + 5, words = (V + 31) / 32;
    Pair buf = random(DType::kF32, {R, ld}, 3.0f);
    float* h = buf.host.as<float>();
    for (int64_t i = 0; i < V; i += 11) h[2 * ld + i] = nan, h[3 * ld + i + 1] = inf, h[4 * ld + i + 2] = -inf;
    upload(buf);
    TensorView lh = buf.host, ld_dev = buf.dev;
    lh.shape[1] = ld_dev.shape[1] = V;
    std::vector<ops::Ops::AdjustRow> rows(static_cast<size_t>(R));
    std::vector<ops::Ops::AdjustEntry> entries;
    std::vector<int32_t> stops;
    std::vector<uint32_t> masks;
    std::vector<int32_t> pending;  // the pending rows' tokens
    for (int64_t r = 0; r < R; ++r) {
      ops::Ops::AdjustRow& a = rows[static_cast<size_t>(r)];
      if (r == 0) continue;  // identity: a sanitised copy
      if (r % 3 == 2) {  // an entry's token (k = 5), a token without an entry, none
        a.pending = static_cast<int32_t>(pending.size());
        pending.push_back(r == 2 ? static_cast<int32_t>((5 * 97 + r * 13) % V) : r == 5 ? static_cast<int32_t>(V - 1) : -1);
      }
      a.entry_begin = static_cast<int32_t>(entries.size());
      for (int32_t k = 0; k < 300; ++k) {  // distinct tokens
        const auto t = static_cast<int32_t>((k * 97 + r * 13) % V);
        entries.push_back({t, k % 3 == 0 ? 0.5f * static_cast<float>(k % 7) - 1.0f : 0.0f, k % 4, k % 2});
      }
      a.entry_end = static_cast<int32_t>(entries.size());
      a.repetition = r % 3 == 0 ? 1.0f : (r % 2 ? 1.25f : 0.85f);
      a.frequency = r % 4 == 1 ? 0.3f : 0.0f;
      a.presence = r % 5 == 2 ? -0.7f : 0.1f;
      if (r % 3 == 1 || r == 11) {
        a.stop_begin = static_cast<int32_t>(stops.size());
        for (const int32_t id : {1, 5, 9}) stops.push_back(id);
        a.stop_end = static_cast<int32_t>(stops.size());
      }
      if (r % 4 == 2 || r == 11) {
        a.mask_row = static_cast<int32_t>(masks.size() / static_cast<size_t>(words));
        std::vector<uint32_t> m(static_cast<size_t>(words));
        for (auto& w : m) w = r == 11 ? 0u : static_cast<uint32_t>(rng_());
        if (r == 11) m[0] = (1u << 1) | (1u << 5) | (1u << 9);  // only the stop ids stay finite
        masks.insert(masks.end(), m.begin(), m.end());
      }
    }
    Pair out = make(DType::kF32, {R, V});
    Pair ids = make(DType::kI32, {static_cast<int64_t>(pending.size())});
    std::copy(pending.begin(), pending.end(), ids.host.as<int32_t>());
    upload(ids);
    cpu_.adjust_logits(lh, rows, entries, stops, masks, ids.host, out.host);
    gpu_->adjust_logits(ld_dev, rows, entries, stops, masks, ids.dev, out.dev);
    const std::vector<float> got = download(out.dev), want = values(out.host);
    ASSERT_EQ(got.size(), want.size());
    int64_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) mismatches += std::memcmp(&got[i], &want[i], 4) != 0;
    EXPECT_EQ(mismatches, 0) << "V " << V;
    EXPECT_NE(want[static_cast<size_t>(11 * V + 5)], -inf);  // row 11 kept its stop ids
    EXPECT_EQ(want[static_cast<size_t>(1 * V + 5)], -inf);   // row 1 suppressed them
  }
}

}  // namespace
}  // namespace deepinfer::testing
