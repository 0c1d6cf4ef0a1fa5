// The sampling ops on the CPU reference are the host sampler: Ops::argmax_rows is greedy sampling's
// choice (rows with ties, NaN, +inf and nothing finite), Ops::sample_rows the host sampler's token
// for greedy, temperature, top-k, top-p and min-p rows (seeds and positions), Ops::adjust_logits
// its steps 0-4 (bias, masks, min_tokens, penalties) bit for bit, Ops::logprob_rows its raw
// logprobs and top-n lists, and Ops::token_rank_rows a token's place in such a list. The CUDA ops
// are held to these by cuda_ops_sample_test; the engine samples every step with them unless a row
// asks for processed logprobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "sample/logits_processors.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"

namespace deepinfer::ops {
namespace {

using tensor::DType;
using tensor::TensorView;

TEST(ArgmaxRowsTest, IsTheHostSamplersGreedyChoice) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(7);
  cpu::CpuOps ops;
  for (const int64_t V : {int64_t{1}, int64_t{5}, int64_t{300}}) {
    const int64_t R = 40, ld = V + 2;  // padded rows
    TensorView buf = ops.alloc_persistent(DType::kF32, {R, ld});
    float* h = buf.as<float>();
    std::uniform_int_distribution<int> small(-3, 3), kind(0, 9);
    for (int64_t i = 0; i < R * ld; ++i) {
      const int k = kind(rng);  // mostly small integers (ties), some specials
      h[i] = k == 0 ? nan : k == 1 ? -kInf : k == 2 && i % 7 == 0 ? kInf
             : k == 3 && i % 5 == 0 ? std::numeric_limits<float>::max() : static_cast<float>(small(rng));
    }
    for (int64_t i = 0; i < V; ++i) h[0 * ld + i] = nan, h[1 * ld + i] = -kInf;  // nothing finite
    TensorView logits = buf;
    logits.shape[1] = V;  // [R, V], row stride ld
    TensorView ids = ops.alloc_persistent(DType::kI32, {R});
    ops.argmax_rows(logits, ids);

    auto sampler = sample::Sampler::create({.n_vocab = static_cast<int32_t>(V)});
    ASSERT_TRUE(sampler.is_ok());
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    ASSERT_TRUE(sample::is_plain_argmax(greedy, 0, false));
    sample::RowInput row;
    row.params = &greedy;
    for (int64_t r = 0; r < R; ++r) {
      std::vector<float> z(h + r * ld, h + r * ld + V);
      const sample::RowOutput out = sampler->sample_row(z, row);
      EXPECT_EQ(ids.as<int32_t>()[r], out.token) << "V " << V << ", row " << r;
      sample::sanitize_logits(z);
      EXPECT_EQ(ids.as<int32_t>()[r], sample::argmax_lowest_id(z)) << "V " << V << ", row " << r;
    }
    EXPECT_EQ(ids.as<int32_t>()[0], -1);
    EXPECT_EQ(ids.as<int32_t>()[1], -1);
  }
}

// Random rows (ties, NaN, +-inf, nothing finite) with random greedy / temperature / min-p
// parameters, seeds and positions: sample_rows gives Sampler::sample_row's token for each.
TEST(SampleRowsTest, IsTheHostSamplersChoice) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937_64 rng(11);
  cpu::CpuOps ops;
  int64_t sampled = 0, differs_from_argmax = 0;
  for (const int64_t V : {int64_t{1}, int64_t{7}, int64_t{1000}}) {
    const int64_t R = 60, ld = V + 3;  // padded rows
    TensorView buf = ops.alloc_persistent(DType::kF32, {R, ld});
    float* h = buf.as<float>();
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::uniform_int_distribution<int> kind(0, 39), small(-2, 2);
    for (int64_t i = 0; i < R * ld; ++i) {
      const int k = kind(rng);  // mostly continuous values, some ties and specials
      h[i] = k == 0 ? nan : k == 1 ? -kInf : k == 2 && i % 7 == 0 ? kInf : k < 8 ? static_cast<float>(small(rng))
                                                                              : normal(rng);
    }
    for (int64_t i = 0; i < V; ++i) h[0 * ld + i] = nan, h[1 * ld + i] = -kInf;  // nothing finite
    TensorView logits = buf;
    logits.shape[1] = V;  // [R, V], row stride ld
    std::vector<SamplingParams> params(static_cast<size_t>(R));
    std::vector<Ops::SampleRow> rows(static_cast<size_t>(R));
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    for (int64_t r = 0; r < R; ++r) {
      SamplingParams& p = params[static_cast<size_t>(r)];
      p.temperature = r % 5 == 0 ? 0.0f : (r % 5 == 1 ? 1.0f : 0.05f + 2.0f * unit(rng));
      p.min_p = r % 3 == 0 ? 0.0f : 0.3f * unit(rng);
      p.top_k = r % 4 == 1 ? 1 + static_cast<int32_t>(rng() % 20) : (r % 4 == 2 ? -1 : 0);
      p.top_p = r % 7 < 3 ? 0.05f + 0.9f * unit(rng) : 1.0f;
      ASSERT_TRUE(sample::is_device_sampleable(p));
      rows[static_cast<size_t>(r)] = {p.temperature, p.min_p, rng(), static_cast<int64_t>(rng() % 100000), p.top_k,
                                      p.top_p};
    }
    TensorView ids = ops.alloc_persistent(DType::kI32, {R});
    TensorView greedy_ids = ops.alloc_persistent(DType::kI32, {R});
    ops.sample_rows(logits, rows, ids);
    ops.argmax_rows(logits, greedy_ids);
    auto sampler = sample::Sampler::create({.n_vocab = static_cast<int32_t>(V)});
    ASSERT_TRUE(sampler.is_ok());
    for (int64_t r = 0; r < R; ++r) {
      sample::RowInput row;
      row.params = &params[static_cast<size_t>(r)];
      row.seed = rows[static_cast<size_t>(r)].seed;
      row.position = rows[static_cast<size_t>(r)].position;
      const std::vector<float> z(h + r * ld, h + r * ld + V);
      EXPECT_EQ(ids.as<int32_t>()[r], sampler->sample_row(z, row).token) << "V " << V << ", row " << r;
      if (params[static_cast<size_t>(r)].temperature > 0.0f) ++sampled;
      differs_from_argmax += ids.as<int32_t>()[r] != greedy_ids.as<int32_t>()[r];
    }
    EXPECT_EQ(ids.as<int32_t>()[0], -1);
    EXPECT_EQ(ids.as<int32_t>()[1], -1);
  }
  EXPECT_GT(sampled, 100);
  EXPECT_GT(differs_from_argmax, 30);  // the sampled rows are not argmax rows in disguise
}

// What is_device_sampleable admits: every row but those asking for processed logprobs (the
// distribution after steps 1-9, which only the host sampler materialises).
TEST(SampleRowsTest, DeviceSampleableRows) {
  SamplingParams p;  // temperature 1, nothing else
  EXPECT_TRUE(sample::is_device_sampleable(p));
  p.min_p = 0.1f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.1f;
  p.logit_bias[3] = 1.0f;
  p.min_tokens = 4;
  p.allowed_token_ids = {1, 2, 3};
  EXPECT_TRUE(sample::is_device_sampleable(p));
  p.logprobs = 5;  // raw logprobs are Ops::logprob_rows', processed ones the host's
  EXPECT_TRUE(sample::is_device_sampleable(p));
  p.logprobs_mode = LogprobsMode::kProcessed;
  EXPECT_FALSE(sample::is_device_sampleable(p));
  SamplingParams g;
  g.temperature = 0.0f;
  g.logprobs = 0;
  EXPECT_TRUE(sample::is_device_sampleable(g));
  EXPECT_FALSE(sample::is_plain_argmax(g, 0, false));  // ids alone no longer answer the row
}

// Ops::adjust_logits on the CPU is the host sampler's steps 0-4: for random rows (ties, NaN, +-inf)
// with random bias, allowed ids, grammar masks, min_tokens' stop ids (also where they are all that
// is finite) and penalties over a random history, its output equals Sampler::process_row of a
// greedy row (which stops after step 4) bit for bit; rows without adjustments are sanitised copies.
// Rows with a pending token (AdjustRow::pending: sampled by the step before, not in the entries —
// an output token already counted, a fresh one, a biased one, none) equal process_row over the
// history with that token appended.
TEST(AdjustLogitsTest, IsTheHostSamplersSteps0To4) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937_64 rng(9);
  cpu::CpuOps ops;
  const int64_t V = 300, R = 30, words = sample::bitmask_words(V);
  auto sampler = sample::Sampler::create({.n_vocab = static_cast<int32_t>(V), .eos_token_ids = {1, 7}});
  ASSERT_TRUE(sampler.is_ok());
  TensorView logits = ops.alloc_persistent(DType::kF32, {R, V});
  float* h = logits.as<float>();
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> kind(0, 29), small(-2, 2);
  for (int64_t i = 0; i < R * V; ++i) {
    const int k = kind(rng);
    h[i] = k == 0 ? nan : k == 1 ? -kInf : k == 2 && i % 7 == 0 ? kInf : k < 6 ? static_cast<float>(small(rng)) : normal(rng);
  }
  std::vector<SamplingParams> params(static_cast<size_t>(R));
  std::vector<sample::TokenHistory> histories;
  std::vector<std::vector<uint32_t>> grammar(static_cast<size_t>(R));
  std::vector<Ops::AdjustRow> rows(static_cast<size_t>(R));
  std::vector<Ops::AdjustEntry> entries;
  std::vector<int32_t> stops;
  std::vector<uint32_t> masks;
  std::vector<int32_t> pending_ids;  // the pending rows' tokens
  std::mt19937_64 pending_rng(10);   // its own stream: the rows' random inputs stay the same
  histories.reserve(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    SamplingParams& p = params[static_cast<size_t>(r)];
    p.temperature = 0.0f;
    std::vector<int32_t> prompt(20);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % V);
    histories.emplace_back(prompt);
    for (int i = 0; i < 15; ++i) histories.back().append(static_cast<int32_t>(rng() % 40));  // repeats
    // What the entries count; a pending row's history then gets the pending token (sampler's view).
    const sample::TokenHistory counted = histories.back();
    int32_t pending = -2;  // -2: not a pending row
    if (r % 4 == 0) {
      const int32_t choices[] = {static_cast<int32_t>(pending_rng() % 40), static_cast<int32_t>(250 + r), 5, -1};
      pending = choices[(r / 4) % 4];
      if (pending >= 0) histories.back().append(pending);
    }
    if (r % 3 == 1) p.repetition_penalty = r % 2 ? 1.3f : 0.8f;
    if (r % 4 == 1) p.frequency_penalty = 0.7f;
    if (r % 5 == 2) p.presence_penalty = -0.4f;
    if (r % 6 == 3) p.logit_bias = {{5, 3.0f}, {7, -100.0f}, {static_cast<int32_t>(rng() % V), 1.5f}};
    if (r % 7 == 4) p.allowed_token_ids = {1, 3, 5, 7, 9, 200, 299};
    if (r % 8 == 5) {
      grammar[static_cast<size_t>(r)].assign(static_cast<size_t>(words), 0u);
      for (int64_t t = 0; t < V; t += 1 + static_cast<int64_t>(rng() % 3)) grammar[static_cast<size_t>(r)][t >> 5] |= 1u << (t & 31);
    }
    if (r % 3 == 2) {
      p.min_tokens = 5;
      p.stop_token_ids = {7, 11};
      p.ignore_eos = r % 2 == 0;
    }
    if (r == 29) p.allowed_token_ids = {1, 7, 11};  // only stop ids stay finite: no suppression
    if (r == 29) p.min_tokens = 5;
    // The sparse inputs as the engine builds them.
    Ops::AdjustRow& a = rows[static_cast<size_t>(r)];
    a = {static_cast<int32_t>(entries.size()), 0, static_cast<int32_t>(stops.size()), 0, -1, p.repetition_penalty,
         p.presence_penalty, p.frequency_penalty};
    if (pending != -2) {
      a.pending = static_cast<int32_t>(pending_ids.size());
      pending_ids.push_back(pending);
      if (r % 8 == 0) p.frequency_penalty = 0.6f;  // every pending row with penalties of some kind
      p.repetition_penalty = 1.2f;
      if (pending == 5) p.logit_bias[5] = 2.5f;
      a.repetition = p.repetition_penalty;
      a.frequency = p.frequency_penalty;
    }
    std::map<int32_t, Ops::AdjustEntry> by_token;
    for (const auto& [id, b] : p.logit_bias) by_token[id].bias = b;
    for (int32_t id : counted.seen()) by_token[id].seen = 1;
    for (const sample::TokenCount& tc : counted.output_counts()) by_token[tc.token].output_count = tc.count;
    for (auto [id, e] : by_token) {
      if (p.logit_bias.count(id) == 0 && (p.repetition_penalty == 1.0f || !e.seen) &&
          ((p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) || e.output_count == 0)) {
        continue;  // an entry that changes nothing may be left out
      }
      e.token = id;
      entries.push_back(e);
    }
    a.entry_end = static_cast<int32_t>(entries.size());
    if (p.min_tokens > 0) {
      std::set<int32_t> ids(p.stop_token_ids.begin(), p.stop_token_ids.end());
      if (!p.ignore_eos) ids.insert({1, 7});
      stops.insert(stops.end(), ids.begin(), ids.end());
    }
    a.stop_end = static_cast<int32_t>(stops.size());
    if (!p.allowed_token_ids.empty() || !grammar[static_cast<size_t>(r)].empty()) {
      std::vector<uint32_t> m = grammar[static_cast<size_t>(r)].empty() ? std::vector<uint32_t>(words, ~0u) : grammar[static_cast<size_t>(r)];
      if (!p.allowed_token_ids.empty()) {
        std::vector<uint32_t> allowed(static_cast<size_t>(words), 0u);
        for (int32_t id : p.allowed_token_ids) allowed[static_cast<size_t>(id >> 5)] |= 1u << (id & 31);
        for (int64_t w = 0; w < words; ++w) m[static_cast<size_t>(w)] &= allowed[static_cast<size_t>(w)];
      }
      a.mask_row = static_cast<int32_t>(masks.size() / static_cast<size_t>(words));
      masks.insert(masks.end(), m.begin(), m.end());
    }
  }
  TensorView out = ops.alloc_persistent(DType::kF32, {R, V});
  TensorView d_pending = ops.upload(pending_ids.data(), DType::kI32, {static_cast<int64_t>(pending_ids.size())});
  ops.adjust_logits(logits, rows, entries, stops, masks, d_pending, out);
  int64_t changed = 0;
  for (int64_t r = 0; r < R; ++r) {
    sample::RowInput in;
    in.params = &params[static_cast<size_t>(r)];
    in.history = &histories[static_cast<size_t>(r)];
    in.n_generated = 3;
    in.token_bitmask = grammar[static_cast<size_t>(r)];
    std::vector<float> want(static_cast<size_t>(V)), raw(h + r * V, h + (r + 1) * V);
    sampler->process_row(raw, in, want);
    sample::sanitize_logits(raw);
    for (int64_t i = 0; i < V; ++i) {
      const float got = out.as<float>()[r * V + i];
      ASSERT_EQ(std::memcmp(&got, &want[static_cast<size_t>(i)], 4), 0) << "row " << r << ", id " << i << ": " << got << " vs " << want[static_cast<size_t>(i)];
      changed += got != raw[static_cast<size_t>(i)];
    }
  }
  EXPECT_GT(changed, 500);
  EXPECT_NE(out.as<float>()[29 * V + 7], -kInf);  // row 29: the stop ids are all that is finite
}

// Random rows (ties, NaN, +-inf, nothing finite, fewer finite entries than asked for) with random
// tokens: logprob_rows gives the host sampler's raw-mode logprob and top-n list (Sampler::sample_row
// with logprobs = n on a row whose token it was told), for n = 0, 1, 20 and rows shorter than n.
TEST(LogprobRowsTest, IsTheHostSamplersRawLogprobs) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937_64 rng(5);
  cpu::CpuOps ops;
  int64_t checked_top = 0;
  for (const int64_t V : {int64_t{3}, int64_t{50}, int64_t{2000}}) {
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{20}}) {
      const int64_t R = 24, ld = V + 1;  // padded rows
      TensorView buf = ops.alloc_persistent(DType::kF32, {R, ld});
      float* h = buf.as<float>();
      std::normal_distribution<float> normal(0.0f, 4.0f);
      std::uniform_int_distribution<int> kind(0, 29), small(-2, 2);
      for (int64_t i = 0; i < R * ld; ++i) {
        const int k = kind(rng);
        h[i] = k == 0 ? nan : k == 1 ? -kInf : k == 2 && i % 7 == 0 ? kInf : k < 8 ? static_cast<float>(small(rng))
                                                                                : normal(rng);
      }
      for (int64_t i = 0; i < V; ++i) h[0 * ld + i] = nan, h[1 * ld + i] = -kInf;  // nothing finite
      for (int64_t i = 2; i < V; ++i) h[2 * ld + i] = -kInf;                         // two finite entries
      TensorView logits = buf;
      logits.shape[1] = V;  // [R, V], row stride ld
      TensorView tokens = ops.alloc_persistent(DType::kI32, {R});
      for (int64_t r = 0; r < R; ++r) tokens.as<int32_t>()[r] = r == 3 ? -1 : static_cast<int32_t>(rng() % V);
      TensorView lp = ops.alloc_persistent(DType::kF32, {R});
      TensorView top_ids = ops.alloc_persistent(DType::kI32, {R, n});
      TensorView top_lp = ops.alloc_persistent(DType::kF32, {R, n});
      ops.logprob_rows(logits, tokens, lp, top_ids, top_lp);
      for (int64_t r = 0; r < R; ++r) {
        std::vector<float> raw(h + r * ld, h + r * ld + V);
        sample::sanitize_logits(raw);
        const int32_t token = tokens.as<int32_t>()[r];
        const sample::LogprobResult want = sample::compute_logprobs(raw, std::max(token, 0),
                                                                     static_cast<int32_t>(std::min(n, V)));
        const std::string at = "V " + std::to_string(V) + ", n " + std::to_string(n) + ", row " + std::to_string(r);
        if (token < 0) {
          EXPECT_EQ(lp.as<float>()[r], -kInf) << at;
        } else {
          EXPECT_EQ(lp.as<float>()[r], want.logprob) << at;
        }
        for (int64_t j = 0; j < n; ++j) {
          const bool have = j < static_cast<int64_t>(want.top.size());
          EXPECT_EQ(top_ids.as<int32_t>()[r * n + j], have ? want.top[static_cast<size_t>(j)].token : -1) << at;
          EXPECT_EQ(top_lp.as<float>()[r * n + j], have ? want.top[static_cast<size_t>(j)].logprob : -kInf) << at;
          checked_top += have;
        }
      }
      // The row with two finite entries lists them first, then -inf entries by id.
      if (n == 20 && V == 2000) {
        EXPECT_TRUE(std::isfinite(top_lp.as<float>()[2 * n]) && std::isfinite(top_lp.as<float>()[2 * n + 1]));
        EXPECT_EQ(top_lp.as<float>()[2 * n + 2], -kInf);
        EXPECT_EQ(top_ids.as<int32_t>()[2 * n + 2], 2);
      }
    }
  }
  EXPECT_GT(checked_top, 1000);
}

// token_rank_rows: the token's place in a full sort of the sanitised row (value descending, lower
// id first among equals) — on rows with ties, NaN, +-inf and nothing finite — and, where the token
// is in logprob_rows' top-n list, exactly its index there plus one; 0 for token -1.
TEST(TokenRankRowsTest, IsThePlaceInTheSortedRow) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937_64 rng(11);
  cpu::CpuOps ops;
  int64_t in_top = 0, ranks_above_one = 0;
  for (const int64_t V : {int64_t{1}, int64_t{7}, int64_t{3000}}) {
    const int64_t R = 30, ld = V + 3, n = 20;  // padded rows
    TensorView buf = ops.alloc_persistent(DType::kF32, {R, ld});
    float* h = buf.as<float>();
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::uniform_int_distribution<int> kind(0, 19), small(-2, 2);
    for (int64_t i = 0; i < R * ld; ++i) {
      const int k = kind(rng);
      h[i] = k == 0 ? nan : k == 1 ? -kInf : k == 2 && i % 7 == 0 ? kInf : k < 9 ? static_cast<float>(small(rng))
                                                                              : normal(rng);
    }
    for (int64_t i = 0; i < V; ++i) h[0 * ld + i] = nan;  // nothing finite
    TensorView logits = buf;
    logits.shape[1] = V;  // [R, V], row stride ld
    TensorView tokens = ops.alloc_persistent(DType::kI32, {R});
    for (int64_t r = 0; r < R; ++r) tokens.as<int32_t>()[r] = r == 4 ? -1 : static_cast<int32_t>(rng() % V);
    TensorView rank = ops.alloc_persistent(DType::kI32, {R});
    TensorView lp = ops.alloc_persistent(DType::kF32, {R});
    TensorView top_ids = ops.alloc_persistent(DType::kI32, {R, n});
    TensorView top_lp = ops.alloc_persistent(DType::kF32, {R, n});
    ops.token_rank_rows(logits, tokens, rank);
    ops.logprob_rows(logits, tokens, lp, top_ids, top_lp);
    for (int64_t r = 0; r < R; ++r) {
      const int32_t token = tokens.as<int32_t>()[r];
      const std::string at = "V " + std::to_string(V) + ", row " + std::to_string(r);
      if (token < 0) {
        EXPECT_EQ(rank.as<int32_t>()[r], 0) << at;
        continue;
      }
      std::vector<float> raw(h + r * ld, h + r * ld + V);
      sample::sanitize_logits(raw);
      std::vector<int32_t> order(static_cast<size_t>(V));
      for (int32_t i = 0; i < static_cast<int32_t>(V); ++i) order[static_cast<size_t>(i)] = i;
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return raw[a] != raw[b] ? raw[a] > raw[b] : a < b; });
      const auto place = std::find(order.begin(), order.end(), token) - order.begin();
      EXPECT_EQ(rank.as<int32_t>()[r], place + 1) << at;
      ranks_above_one += place > 0;
      for (int64_t j = 0; j < std::min(n, V); ++j) {
        if (top_ids.as<int32_t>()[r * n + j] != token) continue;
        EXPECT_EQ(rank.as<int32_t>()[r], j + 1) << at;
        ++in_top;
      }
    }
  }
  EXPECT_GT(in_top, 10);
  EXPECT_GT(ranks_above_one, 30);
}

}  // namespace
}  // namespace deepinfer::ops
