// Sampler: input checks, the order of operations, greedy ties, logprob modes, seeds and
// batch invariance (bitwise: the same row alone or anywhere in any batch gives the same result).
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "sample/logits_processors.h"
#include "sample/logprobs.h"

namespace deepinfer::sample {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

Sampler make_sampler(int32_t n_vocab, std::vector<int32_t> eos = {}) {
  auto s = Sampler::create({.n_vocab = n_vocab, .eos_token_ids = std::move(eos)});
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return std::move(s).value();
}

RowOutput sample_one(const Sampler& s, std::vector<float> logits, const RowInput& row) {
  return s.sample_row(logits, row);
}

TEST(SamplerTest, CreateRejectsBadConfig) {
  EXPECT_FALSE(Sampler::create({.n_vocab = 0}).is_ok());
  auto bad_eos = Sampler::create({.n_vocab = 10, .eos_token_ids = {10}});
  ASSERT_FALSE(bad_eos.is_ok());
  EXPECT_NE(bad_eos.status().message().find("eos token id 10"), std::string::npos);
}

TEST(SamplerTest, SampleChecksShapesAndRows) {
  Sampler s = make_sampler(4);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<float> data(8, 0.0f);
  std::vector<RowInput> rows(2, RowInput{.params = &greedy});
  std::vector<RowOutput> out(2);
  auto view = tensor::TensorView::contiguous(data.data(), tensor::DType::kF32, {2, 4});
  EXPECT_TRUE(s.sample(view, rows, out).is_ok());

  auto wrong_vocab = tensor::TensorView::contiguous(data.data(), tensor::DType::kF32, {4, 2});
  EXPECT_FALSE(s.sample(wrong_vocab, rows, out).is_ok());
  auto wrong_dtype = tensor::TensorView::contiguous(data.data(), tensor::DType::kBF16, {2, 4});
  EXPECT_FALSE(s.sample(wrong_dtype, rows, out).is_ok());
  std::vector<RowOutput> short_out(1);
  EXPECT_FALSE(s.sample(view, rows, short_out).is_ok());

  rows[1].params = nullptr;
  Status st = s.sample(view, rows, out);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("row 1"), std::string::npos) << st.message();

  SamplingParams penalized;
  penalized.presence_penalty = 1.0f;
  rows[1].params = &penalized;
  st = s.sample(view, rows, out);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("history"), std::string::npos) << st.message();

  std::vector<uint32_t> mask(2, ~0u);  // 4 tokens need 1 word
  rows[1] = RowInput{.params = &greedy, .token_bitmask = mask};
  st = s.sample(view, rows, out);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("bitmask has 2 words, expected 1"), std::string::npos);
}

TEST(SamplerTest, PaddedRowStrideIsHonoured) {
  Sampler s = make_sampler(3);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  // Two rows of 3 logits stored with a row stride of 5; the padding holds huge values.
  std::vector<float> data = {1, 3, 2, 99, 99, 4, 0, 5, 99, 99};
  tensor::TensorView view = tensor::TensorView::contiguous(data.data(), tensor::DType::kF32, {2, 3});
  view.stride[0] = 5;
  std::vector<RowInput> rows(2, RowInput{.params = &greedy});
  std::vector<RowOutput> out(2);
  ASSERT_TRUE(s.sample(view, rows, out).is_ok());
  EXPECT_EQ(out[0].token, 1);
  EXPECT_EQ(out[1].token, 2);
}

TEST(SamplerTest, GreedyTakesLowestIdOnTies) {
  Sampler s = make_sampler(5);
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(sample_one(s, {0, 7, 3, 7, 7}, {.params = &p}).token, 1);
  // Greedy ignores top-k/top-p/min-p (they all keep the argmax) and the seed.
  p.top_k = 1;
  p.top_p = 0.01f;
  p.min_p = 0.9f;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    EXPECT_EQ(sample_one(s, {7, 7, 3, 7, 7}, {.params = &p, .seed = seed}).token, 0);
  }
}

// is_plain_argmax: the rows the engine samples on the model's device (the raw logits' argmax,
// nothing else read). Every step that can change a greedy row's logits, or a logprob request,
// takes a row off that path; top-k/top-p/min-p and the seed do not (greedy ignores them).
TEST(SamplerTest, PlainArgmaxRowsAreGreedyRowsWithoutProcessors) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 3, p.top_p = 0.5f, p.min_p = 0.1f, p.seed = 4;
  EXPECT_TRUE(is_plain_argmax(p, 0, false));
  EXPECT_FALSE(is_plain_argmax(p, 0, /*has_mask=*/true));
  auto without = [&](auto change) {
    SamplingParams q = p;
    change(q);
    return !is_plain_argmax(q, 5, false);
  };
  EXPECT_TRUE(without([](SamplingParams& q) { q.temperature = 0.7f; }));
  EXPECT_TRUE(without([](SamplingParams& q) { q.logprobs = 0; }));
  EXPECT_TRUE(without([](SamplingParams& q) { q.logit_bias[3] = 1.0f; }));
  EXPECT_TRUE(without([](SamplingParams& q) { q.allowed_token_ids = {1, 2}; }));
  EXPECT_TRUE(without([](SamplingParams& q) { q.repetition_penalty = 1.1f; }));
  EXPECT_TRUE(without([](SamplingParams& q) { q.presence_penalty = 0.5f; }));
  EXPECT_TRUE(without([](SamplingParams& q) { q.frequency_penalty = 0.5f; }));
  EXPECT_TRUE(without([](SamplingParams& q) { q.min_tokens = 6; }));   // EOS still suppressed at 5
  EXPECT_FALSE(without([](SamplingParams& q) { q.min_tokens = 5; }));  // no longer
}

TEST(SamplerTest, BiasIsAppliedBeforeRepetitionPenalty) {
  // Token 0: logit 1, bias -2 -> -1, then repetition 2 -> -2 (the other order: 0.5 - 2 = -1.5).
  // Token 1: logit -1.8 (not seen). Greedy picks 1 only if bias came first.
  Sampler s = make_sampler(2);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{0, -2.0f}};
  p.repetition_penalty = 2.0f;
  TokenHistory h(std::vector<int32_t>{0});
  RowOutput out = sample_one(s, {1.0f, -1.8f}, {.params = &p, .history = &h});
  EXPECT_EQ(out.token, 1);
  p.logprobs_mode = LogprobsMode::kProcessed;
  p.logprobs = 2;
  out = sample_one(s, {1.0f, -1.8f}, {.params = &p, .history = &h});
  ASSERT_EQ(out.top_logprobs.size(), 2u);
  // Processed greedy logprobs are log_softmax of {-2, -1.8}.
  const double lse = std::log(std::exp(-2.0) + std::exp(-1.8));
  EXPECT_NEAR(out.top_logprobs[0].logprob, -1.8 - lse, 1e-6);
  EXPECT_NEAR(out.top_logprobs[1].logprob, -2.0 - lse, 1e-6);
}

TEST(SamplerTest, MinTokensSuppressesEosAndStopIds) {
  Sampler s = make_sampler(4, /*eos=*/{3});
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {2};
  const std::vector<float> logits = {0.0f, 1.0f, 5.0f, 9.0f};
  EXPECT_EQ(sample_one(s, logits, {.params = &p, .n_generated = 0}).token, 1);
  EXPECT_EQ(sample_one(s, logits, {.params = &p, .n_generated = 1}).token, 1);
  EXPECT_EQ(sample_one(s, logits, {.params = &p, .n_generated = 2}).token, 3);
  p.ignore_eos = true;  // EOS is not a stop token any more, so it is not suppressed either
  EXPECT_EQ(sample_one(s, logits, {.params = &p, .n_generated = 0}).token, 3);
  // A grammar that only allows EOS wins over min_tokens.
  p.ignore_eos = false;
  const std::vector<uint32_t> only_eos = {1u << 3};
  EXPECT_EQ(sample_one(s, logits, {.params = &p, .n_generated = 0, .token_bitmask = only_eos}).token, 3);
}

TEST(SamplerTest, EmptySupportGivesNoToken) {
  Sampler s = make_sampler(3);
  SamplingParams p;
  const std::vector<uint32_t> none = {0u};
  RowOutput out = sample_one(s, {1, 2, 3}, {.params = &p, .token_bitmask = none});
  EXPECT_EQ(out.token, kNoToken);
  EXPECT_EQ(out.logprob, -kInf);
  p.temperature = 0.0f;
  EXPECT_EQ(sample_one(s, {NAN, NAN, NAN}, {.params = &p}).token, kNoToken);
}

TEST(SamplerTest, RawAndProcessedLogprobs) {
  Sampler s = make_sampler(4);
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 2;
  p.logprobs = 3;
  p.allowed_token_ids = {0, 1, 3};
  const std::vector<float> logits = {1.0f, 2.0f, 4.0f, 0.0f};
  RowOutput raw = sample_one(s, logits, {.params = &p, .seed = 11});
  // Raw: log_softmax of the model logits, untouched by the mask, temperature and top-k.
  const double raw_lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(4.0) + 1.0);
  ASSERT_EQ(raw.top_logprobs.size(), 3u);
  EXPECT_EQ(raw.top_logprobs[0].token, 2);
  EXPECT_EQ(raw.top_logprobs[1].token, 1);
  EXPECT_EQ(raw.top_logprobs[2].token, 0);
  EXPECT_NEAR(raw.top_logprobs[0].logprob, 4.0 - raw_lse, 1e-6);
  EXPECT_NEAR(raw.logprob, logits[raw.token] - raw_lse, 1e-6);
  // The sampled token's rank among the raw logits {1, 2, 4, 0}: 2 -> 1, 1 -> 2, 0 -> 3, 3 -> 4.
  EXPECT_EQ(raw.rank, std::vector<int32_t>({3, 2, 1, 4})[static_cast<size_t>(raw.token)]);

  p.logprobs_mode = LogprobsMode::kProcessed;
  RowOutput proc = sample_one(s, logits, {.params = &p, .seed = 11});
  EXPECT_EQ(proc.token, raw.token);  // the mode never changes the sampled token
  // Processed: mask leaves {0: 1, 1: 2, 3: 0}; T = 0.5 -> {-2, 0, -4}; top-2 keeps {0, 1}.
  const double proc_lse = std::log(std::exp(-2.0) + 1.0);
  ASSERT_EQ(proc.top_logprobs.size(), 3u);
  EXPECT_EQ(proc.top_logprobs[0], (TokenLogprob{1, static_cast<float>(0.0 - proc_lse)}));
  EXPECT_EQ(proc.top_logprobs[1], (TokenLogprob{0, static_cast<float>(-2.0 - proc_lse)}));
  EXPECT_EQ(proc.top_logprobs[2], (TokenLogprob{2, -kInf}));  // -inf ties: lower id first
  EXPECT_TRUE(proc.token == 0 || proc.token == 1);
  EXPECT_EQ(proc.rank, proc.token == 1 ? 1 : 2);  // in the processed distribution
  p.logprobs.reset();
  EXPECT_EQ(sample_one(s, logits, {.params = &p, .seed = 11}).rank, 0);  // not asked: not computed
}

TEST(SamplerTest, TopLogprobsSortTiesByLowerId) {
  Sampler s = make_sampler(6);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 4;
  RowOutput out = sample_one(s, {2, 5, 5, 1, 5, 2}, {.params = &p});
  ASSERT_EQ(out.top_logprobs.size(), 4u);
  EXPECT_EQ(out.top_logprobs[0].token, 1);
  EXPECT_EQ(out.top_logprobs[1].token, 2);
  EXPECT_EQ(out.top_logprobs[2].token, 4);
  EXPECT_EQ(out.top_logprobs[3].token, 0);
  EXPECT_EQ(out.top_logprobs[0].logprob, out.top_logprobs[2].logprob);
  EXPECT_EQ(out.token, 1);
  EXPECT_EQ(out.rank, 1);  // a tie at the top goes to the lower id, as in the list
  p.logprobs = 0;
  EXPECT_TRUE(sample_one(s, {2, 5, 5, 1, 5, 2}, {.params = &p}).top_logprobs.empty());
}

TEST(SamplerTest, PromptLogprobsHelper) {
  // compute_logprobs is what the engine calls per prompt position (raw logits, next token).
  const std::vector<float> logits = {0.0f, 1.0f, 1.0f, -kInf};
  const LogprobResult r = compute_logprobs(logits, /*token=*/0, /*n_top=*/2);
  const double lse = std::log(1.0 + 2.0 * std::exp(1.0));
  EXPECT_EQ(r.logprob, static_cast<float>(0.0 - lse));
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0], (TokenLogprob{1, static_cast<float>(1.0 - lse)}));
  EXPECT_EQ(r.top[1], (TokenLogprob{2, static_cast<float>(1.0 - lse)}));
  EXPECT_EQ(compute_logprobs(logits, 3, 0).logprob, -kInf);
}

TEST(SamplerTest, SamplingProbsAreTheFinalDistribution) {
  Sampler s = make_sampler(4);
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 2;
  std::vector<float> probs(4);
  ASSERT_TRUE(s.sampling_probs(std::vector<float>{1.0f, 2.0f, 0.0f, 2.0f}, {.params = &p}, probs));
  // T = 0.5 -> z = {-2, 0, -4, 0}; top-2 keeps ids 1 and 3 (equal): 0.5 each.
  EXPECT_EQ(probs, (std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f}));
  p.temperature = 0.0f;
  ASSERT_TRUE(s.sampling_probs(std::vector<float>{1.0f, 2.0f, 0.0f, 2.0f}, {.params = &p}, probs));
  EXPECT_EQ(probs, (std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f}));  // greedy: point mass
  const std::vector<uint32_t> none = {0u};
  EXPECT_FALSE(s.sampling_probs(std::vector<float>{1, 2, 3, 4}, {.params = &p, .token_bitmask = none},
                                probs));
}

std::vector<float> random_logits(std::mt19937_64& rng, int32_t n_vocab) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> l(n_vocab);
  for (float& v : l) v = normal(rng);
  return l;
}

TEST(SamplerTest, SeedReproducesAndPositionAndSeedChangeTheNoise) {
  Sampler s = make_sampler(1000);
  std::mt19937_64 rng(1);
  const std::vector<float> logits = random_logits(rng, 1000);
  SamplingParams p;
  p.temperature = 1.5f;
  std::set<int32_t> by_seed, by_position;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const int32_t t = sample_one(s, logits, {.params = &p, .position = 5, .seed = seed}).token;
    EXPECT_EQ(t, sample_one(s, logits, {.params = &p, .position = 5, .seed = seed}).token);
    by_seed.insert(t);
  }
  for (int64_t pos = 0; pos < 50; ++pos) {
    by_position.insert(sample_one(s, logits, {.params = &p, .position = pos, .seed = 9}).token);
  }
  // At T = 1.5 over 1000 tokens the top token has < 5% mass: 50 draws must spread out.
  EXPECT_GT(by_seed.size(), 20u);
  EXPECT_GT(by_position.size(), 20u);
}

TEST(SamplerTest, SequenceSeedsOfOneRequestDiffer) {
  EXPECT_EQ(derive_sequence_seed(42, 0), 42u);  // sample 0 equals an n = 1 request
  std::set<uint64_t> seeds;
  for (int32_t i = 0; i < 128; ++i) seeds.insert(resolve_sequence_seed(42, 0, 0, i));
  for (int32_t i = 0; i < 128; ++i) seeds.insert(resolve_sequence_seed(43, 0, 0, i));
  EXPECT_EQ(seeds.size(), 256u);
  // Unseeded requests: engine seed x request id.
  EXPECT_EQ(resolve_sequence_seed(std::nullopt, 7, 100, 0), unseeded_request_seed(7, 100));
  EXPECT_NE(unseeded_request_seed(7, 100), unseeded_request_seed(7, 101));
  EXPECT_NE(unseeded_request_seed(7, 100), unseeded_request_seed(8, 100));
}

// A row with random parameters, history and mask, for batch-invariance tests.
struct RandomRow {
  SamplingParams params;
  TokenHistory history;
  std::vector<uint32_t> mask;
  std::vector<float> logits;
  RowInput input;
};

RandomRow make_random_row(std::mt19937_64& rng, int32_t n_vocab) {
  RandomRow r;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  r.params.temperature = unit(rng) < 0.2f ? 0.0f : 0.3f + 1.5f * unit(rng);
  r.params.top_k = unit(rng) < 0.5f ? static_cast<int32_t>(rng() % 100) : -1;
  r.params.top_p = unit(rng) < 0.5f ? 0.2f + 0.8f * unit(rng) : 1.0f;
  r.params.min_p = unit(rng) < 0.3f ? 0.2f * unit(rng) : 0.0f;
  r.params.repetition_penalty = 1.0f + 0.5f * unit(rng);
  r.params.presence_penalty = unit(rng);
  r.params.frequency_penalty = unit(rng) - 0.5f;
  r.params.logit_bias = {{static_cast<int32_t>(rng() % n_vocab), 5.0f}};
  r.params.logprobs = static_cast<int32_t>(rng() % 21);
  r.params.logprobs_mode = rng() % 2 ? LogprobsMode::kRaw : LogprobsMode::kProcessed;
  std::vector<int32_t> prompt(20);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % n_vocab);
  r.history = TokenHistory(prompt);
  for (int i = 0; i < 10; ++i) r.history.append(static_cast<int32_t>(rng() % n_vocab));
  if (rng() % 2) {
    r.mask.resize(bitmask_words(n_vocab));
    for (auto& w : r.mask) w = static_cast<uint32_t>(rng()) | static_cast<uint32_t>(rng());
  }
  r.logits = random_logits(rng, n_vocab);
  return r;
}

void bind(RandomRow& r, int64_t position, uint64_t seed) {
  r.input = {.params = &r.params, .history = &r.history, .n_generated = 10,
             .position = position, .seed = seed, .token_bitmask = r.mask};
}

void expect_same(const RowOutput& a, const RowOutput& b) {
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(std::bit_cast<uint32_t>(a.logprob), std::bit_cast<uint32_t>(b.logprob));
  ASSERT_EQ(a.top_logprobs.size(), b.top_logprobs.size());
  for (size_t i = 0; i < a.top_logprobs.size(); ++i) {
    EXPECT_EQ(a.top_logprobs[i].token, b.top_logprobs[i].token);
    EXPECT_EQ(std::bit_cast<uint32_t>(a.top_logprobs[i].logprob),
              std::bit_cast<uint32_t>(b.top_logprobs[i].logprob));
  }
}

TEST(SamplerTest, BatchInvariantBitwise) {
  constexpr int32_t kVocab = 512;
  Sampler s = make_sampler(kVocab, {kVocab - 1});
  std::mt19937_64 rng(2024);
  int n_checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    RandomRow target = make_random_row(rng, kVocab);
    bind(target, 100 + trial, 1000 + trial);
    // Alone, as a batch of one.
    std::vector<RowOutput> alone(1);
    auto alone_view = tensor::TensorView::contiguous(target.logits.data(), tensor::DType::kF32,
                                                     {1, kVocab});
    ASSERT_TRUE(s.sample(alone_view, std::span(&target.input, 1), alone).is_ok());
    for (int batch : {2, 7, 33}) {
      std::vector<RandomRow> others(batch - 1);
      for (auto& o : others) {
        o = make_random_row(rng, kVocab);
        bind(o, static_cast<int64_t>(rng() % 1000), rng());
      }
      const size_t slot = rng() % batch;
      std::vector<float> data;
      std::vector<RowInput> inputs;
      for (int i = 0, j = 0; i < batch; ++i) {
        const RandomRow& r = static_cast<size_t>(i) == slot ? target : others[j++];
        data.insert(data.end(), r.logits.begin(), r.logits.end());
        inputs.push_back(r.input);
      }
      std::vector<RowOutput> out(batch);
      auto view = tensor::TensorView::contiguous(data.data(), tensor::DType::kF32,
                                                 {batch, kVocab});
      ASSERT_TRUE(s.sample(view, inputs, out).is_ok());
      expect_same(alone[0], out[slot]);
      ++n_checked;
    }
  }
  EXPECT_EQ(n_checked, 120);
}

}  // namespace
}  // namespace deepinfer::sample
