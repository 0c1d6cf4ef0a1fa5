// Speculative decoding's default verification of sampled rows, standard chain rejection sampling
// (EngineOptions::spec_verification = "rejection"; engine_spec.cc): lossless — the tokens follow
// the target's own distribution whatever is drafted. Checked against the exact law of a request's
// first three tokens, computed from processed logprobs one prefix at a time — three tokens biased
// far above the rest and top-k 3, so 27 outcomes, and the random model's target and MTP
// distributions share their support (else every MTP draft would be rejected and the residual
// would be p itself): with the MTP's own sampled drafts (their distributions q kept on the
// sequence from the step that proposes them to the one that verifies them) and with fixed
// proposals (point masses, the residual then p without the draft). Greedy rows keep the argmax
// rule: their tokens are those of decoding without drafts. The coupled rule's promises are
// engine_spec_test.cc's.
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "../sample/sample_stats.h"
#include "engine_test_util.h"

namespace deepinfer {
namespace {

using testing::ids_request;
using testing::prompt_ids;

constexpr int32_t kTopK = 3;
constexpr int32_t kTokens = 3;  // the outcome: a request's first three tokens
constexpr int32_t kDrafts = 2;  // verified with the second and third

Request sampled(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t seed) {
  Request r = ids_request(std::move(prompt), max_tokens, seed, 1.0f);
  r.sampling.top_k = kTopK;
  r.sampling.logit_bias = {{7, 40.0f}, {100, 40.0f}, {300, 40.0f}};
  return r;
}

// Without the per-step integrity check of testing::generate_all: the runs here are long.
std::vector<GenerateOutput> generate(const EngineOptions& o, engine::DebugOptions debug, std::vector<Request> requests,
                                     EngineStats* stats) {
  auto engine = engine::open_engine(o, std::move(debug));
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  if (!engine.is_ok()) return {};
  auto outs = (*engine)->generate(std::move(requests));
  EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
  *stats = (*engine)->stats();
  return outs.is_ok() ? std::move(*outs) : std::vector<GenerateOutput>{};
}

// The exact law of the first kTokens tokens after `prompt`: outcome (t1, t2, t3) -> probability,
// from the processed logprobs (the final sampling distribution) of one token after each prefix.
std::map<std::vector<int32_t>, double> exact_law(Engine& engine, const std::vector<int32_t>& prompt) {
  std::map<std::vector<int32_t>, double> law = {{{}, 1.0}};
  for (int32_t depth = 0; depth < kTokens; ++depth) {
    std::vector<Request> requests;
    std::vector<std::vector<int32_t>> prefixes;
    for (const auto& [prefix, prob] : law) {
      std::vector<int32_t> ids = prompt;
      ids.insert(ids.end(), prefix.begin(), prefix.end());
      Request r = sampled(ids, 1, 1);
      r.sampling.logprobs = kTopK;
      r.sampling.logprobs_mode = LogprobsMode::kProcessed;
      requests.push_back(r);
      prefixes.push_back(prefix);
    }
    auto outs = engine.generate(requests);
    EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
    if (!outs.is_ok()) return {};
    std::map<std::vector<int32_t>, double> next;
    for (size_t i = 0; i < prefixes.size(); ++i) {
      const auto& logprobs = (*outs)[i].sequences.at(0).logprobs;
      EXPECT_EQ(logprobs.size(), 1u);
      if (logprobs.empty()) return {};
      for (const TokenLogprob& t : logprobs[0].top) {
        std::vector<int32_t> outcome = prefixes[i];
        outcome.push_back(t.token);
        next[outcome] = law[prefixes[i]] * std::exp(static_cast<double>(t.logprob));
      }
    }
    law = std::move(next);
  }
  return law;
}

// n seeded requests of kTokens tokens after `prompt`, their outcomes against the exact law.
sample::testing::ChiSquare sampled_against(const std::map<std::vector<int32_t>, double>& law,
                                           const std::vector<int32_t>& prompt, const EngineOptions& o,
                                           engine::DebugOptions debug, int32_t n, EngineStats* stats) {
  // kTokens + 1: the scheduler verifies no more drafts than max_tokens can take after the first.
  std::vector<Request> requests;
  for (int32_t i = 0; i < n; ++i) requests.push_back(sampled(prompt, kTokens + 1, 1000 + static_cast<uint64_t>(i)));
  const std::vector<GenerateOutput> outputs = generate(o, std::move(debug), requests, stats);
  std::vector<int64_t> counts(law.size() + 1, 0);  // the last: outcomes the law gives nothing
  std::vector<double> probs;
  for (const auto& [outcome, p] : law) probs.push_back(p);
  probs.push_back(0.0);
  for (const GenerateOutput& out : outputs) {
    const std::vector<int32_t>& all = out.sequences.at(0).token_ids;
    const std::vector<int32_t> ids(all.begin(), all.begin() + std::min<size_t>(all.size(), kTokens));
    auto it = law.find(ids);
    ++counts[it == law.end() ? law.size() : static_cast<size_t>(std::distance(law.begin(), it))];
  }
  EXPECT_EQ(outputs.size(), static_cast<size_t>(n));
  return sample::testing::chi_square(counts, probs);
}

TEST(EngineSpecRejectionTest, SampledTokensFollowTheTargetsLawWhateverIsDrafted) {
  EngineOptions o = testing::micro_options();
  const std::vector<int32_t> prompt = prompt_ids(19, 3);
  auto engine = testing::open_micro(o);
  ASSERT_NE(engine, nullptr);
  const std::map<std::vector<int32_t>, double> law = exact_law(*engine, prompt);
  ASSERT_EQ(law.size(), static_cast<size_t>(kTopK * kTopK * kTopK));
  double total = 0.0;
  for (const auto& [outcome, p] : law) total += p;
  ASSERT_NEAR(total, 1.0, 1e-4);
  constexpr int32_t kRequests = 800;

  // The MTP's own drafts, drawn from its distributions q with noise of their own.
  o.nextn_decode = kDrafts;
  EngineStats mtp;
  const sample::testing::ChiSquare drafted = sampled_against(law, prompt, o, {}, kRequests, &mtp);
  EXPECT_TRUE(drafted.pass()) << drafted.describe();
  EXPECT_GE(mtp.n_draft_tokens, kDrafts * kRequests);
  EXPECT_GT(mtp.n_accepted_draft_tokens, 0);

  // Fixed proposals — the likeliest second and third tokens overall — judged as point masses:
  // accepted with probability p(x), else the residual p without x.
  std::map<int32_t, double> second, third;
  for (const auto& [outcome, p] : law) {
    second[outcome[1]] += p;
    third[outcome[2]] += p;
  }
  auto likeliest = [](const std::map<int32_t, double>& m) {
    return std::max_element(m.begin(), m.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  };
  const std::vector<int32_t> proposal = {likeliest(second), likeliest(third)};
  engine::DebugOptions fixed;
  fixed.on_drafts = [&](RequestId, int32_t, int32_t n_generated, std::vector<int32_t>* drafts) {
    drafts->clear();
    if (n_generated == 1) *drafts = proposal;
  };
  EngineStats point;
  const sample::testing::ChiSquare proposed = sampled_against(law, prompt, o, fixed, kRequests, &point);
  EXPECT_TRUE(proposed.pass()) << proposed.describe();
  EXPECT_EQ(point.n_draft_tokens, kDrafts * kRequests);
  // Accepted about as often as the law puts on the proposal, neither always nor never.
  EXPECT_GT(point.n_accepted_draft_tokens, kRequests / 10);
  EXPECT_LT(point.n_accepted_draft_tokens, point.n_draft_tokens * 9 / 10);
}

// Greedy rows keep the argmax rule under rejection sampling: the tokens of decoding without drafts
// (MTP and DSpark drafts, fixed wrong proposals); sampled rows are seeded: the same run twice gives
// the same tokens, and they differ from the coupled rule's somewhere (the drafts' own noise).
TEST(EngineSpecRejectionTest, GreedyRowsAreDecodingWithoutAndSampledRowsAreSeeded) {
  for (const char* model : {"micro", "tiny-v41"}) {
    EngineOptions base = testing::micro_options();
    base.model = testing::synthetic_model_dir(model);
    base.block_tokens = 32;
    std::vector<Request> requests;
    for (int32_t i = 0; i < 2; ++i) requests.push_back(ids_request(prompt_ids(20 + i, 4 + i), 16, std::nullopt, 0.0f));
    for (int32_t i = 0; i < 2; ++i) requests.push_back(ids_request(prompt_ids(20 + i, 4 + i), 16, 50 + i, 0.9f));
    const testing::Outcome plain = testing::generate_all(requests, base);
    EngineOptions o = base;
    o.nextn_decode = 3;
    const testing::Outcome spec = testing::generate_all(requests, o);
    const testing::Outcome again = testing::generate_all(requests, o);
    o.spec_verification = "coupled";
    const testing::Outcome coupled = testing::generate_all(requests, o);
    ASSERT_EQ(spec.outputs.size(), requests.size()) << model;
    ASSERT_EQ(plain.outputs.size(), requests.size()) << model;
    EXPECT_GT(spec.stats.n_draft_rows, 0) << model;
    bool differs = false;
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto& tokens = spec.outputs[i].sequences.at(0).token_ids;
      EXPECT_EQ(tokens.size(), 16u) << model << " request " << i;
      EXPECT_EQ(tokens, again.outputs[i].sequences.at(0).token_ids) << model << " request " << i;
      if (i < 2) {
        EXPECT_EQ(tokens, plain.outputs[i].sequences.at(0).token_ids) << model << " request " << i;
      }
      EXPECT_EQ(coupled.outputs[i].sequences.at(0).token_ids, plain.outputs[i].sequences.at(0).token_ids)
          << model << " request " << i;
      differs |= i >= 2 && tokens != plain.outputs[i].sequences.at(0).token_ids;
    }
    EXPECT_TRUE(differs) << model << ": sampled rows verified by rejection sampling equal the coupled rule's";
  }
}

// Grammar rows under rejection sampling: a draft the grammar forbids is cut before verification
// and its row verifies as that draft's rejection (the residual against its q). Every draft's
// second token a digit, outside the regex: the text still matches and greedy rows are those
// without drafts.
TEST(EngineSpecRejectionTest, GrammarCutDraftsVerifyAsRejections) {
  EngineOptions o;
  o.model = testing::synthetic_model_dir("tiny-v4f");
  o.kv_blocks = 32;
  o.max_num_seqs = 4;
  const std::vector<Request> requests = testing::sentence_requests({{11, 0.8f}, {12, 0.8f}, {13, 0.0f}});
  EngineStats stats;
  const std::vector<GenerateOutput> plain = generate(o, {}, requests, &stats);
  ASSERT_EQ(plain.size(), 3u);
  o.nextn_decode = 3;
  auto probe = testing::open_micro(o);
  ASSERT_NE(probe, nullptr);
  const std::vector<GenerateOutput> spec = generate(o, testing::digit_second_drafts(*probe), requests, &stats);
  EXPECT_GT(stats.n_draft_rows, 0);
  EXPECT_LE(stats.n_draft_tokens, stats.n_draft_rows);  // cut after the first
  // The MTP's own drafts (their q kept), cut wherever the grammar says.
  const std::vector<GenerateOutput> mtp = generate(o, {}, requests, &stats);
  ASSERT_EQ(spec.size(), 3u);
  ASSERT_EQ(mtp.size(), 3u);
  const std::regex pattern("[a-z]+( [a-z]+)*\\.?");
  for (size_t i = 0; i < 3; ++i) {
    const std::string& text = spec[i].sequences.at(0).text;
    EXPECT_TRUE(std::regex_match(text, pattern)) << "request " << i << ": '" << text << "'";
    EXPECT_TRUE(std::regex_match(mtp[i].sequences.at(0).text, pattern)) << "request " << i;
  }
  EXPECT_EQ(spec[2].sequences.at(0).token_ids, plain[2].sequences.at(0).token_ids);
  EXPECT_EQ(mtp[2].sequences.at(0).token_ids, plain[2].sequences.at(0).token_ids);
}

}  // namespace
}  // namespace deepinfer
