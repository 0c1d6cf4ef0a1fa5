// Prompt logprobs (SamplingParams::prompt_logprobs) against an independent computation: the
// Scorer's full forward over the prompt (one chunk, its own KV state), log_softmax in F64, ranks
// and top lists from a full sort. The engine runs the prompt in chunks (the step budget, and a
// chunk cap), beside other requests, with n > 1, after a prefix-cache warm-up (the request must
// not read the cached prefix), under preemption, with asynchronous scheduling and speculative
// decoding — the entries must be the same every time, and the sampled tokens those of the same
// request without prompt logprobs; V4.1 needs exact prefill for them. Integrity is checked after
// every step.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "deepinfer/model.h"
#include "engine_test_util.h"

namespace deepinfer {
namespace {

using testing::ids_request;
using testing::prompt_ids;

// Entries i = 1 .. n - 1 of the prompt's logprobs, from one forward over the whole prompt.
std::vector<TokenLogprobs> reference(const std::vector<int32_t>& prompt, int32_t n_top,
                                     const std::string& model = "micro") {
  ScorerOptions so;
  so.model = testing::synthetic_model_dir(model);
  auto scorer = Scorer::open(so);
  EXPECT_TRUE(scorer.is_ok()) << scorer.status().to_string();
  if (!scorer.is_ok()) return {};
  const auto n = static_cast<int64_t>(prompt.size());
  auto rows = (*scorer)->logits(prompt, n, 0);
  EXPECT_TRUE(rows.is_ok()) << rows.status().to_string();
  std::vector<TokenLogprobs> out;
  for (int64_t p = 0; p + 1 < n; ++p) {
    const std::vector<float>& z = (*rows)[static_cast<size_t>(p)];
    const double m = *std::max_element(z.begin(), z.end());
    double sum = 0.0;
    for (float v : z) sum += std::exp(static_cast<double>(v) - m);
    const double lse = m + std::log(sum);
    std::vector<int32_t> order(z.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] != z[b] ? z[a] > z[b] : a < b; });
    TokenLogprobs e;
    e.token = prompt[static_cast<size_t>(p + 1)];
    e.logprob = static_cast<float>(z[static_cast<size_t>(e.token)] - lse);
    e.rank = static_cast<int32_t>(std::find(order.begin(), order.end(), e.token) - order.begin()) + 1;
    for (int32_t j = 0; j < n_top; ++j) e.top.push_back({order[j], static_cast<float>(z[order[j]] - lse)});
    out.push_back(std::move(e));
  }
  return out;
}

void expect_matches(const std::vector<TokenLogprobs>& got, const std::vector<TokenLogprobs>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string at = what + ", prompt token " + std::to_string(i + 1);
    EXPECT_EQ(got[i].token, want[i].token) << at;
    EXPECT_NEAR(got[i].logprob, want[i].logprob, 1e-5) << at;
    EXPECT_EQ(got[i].rank, want[i].rank) << at;
    ASSERT_EQ(got[i].top.size(), want[i].top.size()) << at;
    for (size_t j = 0; j < got[i].top.size(); ++j) {
      EXPECT_EQ(got[i].top[j].token, want[i].top[j].token) << at << ", top " << j;
      EXPECT_NEAR(got[i].top[j].logprob, want[i].top[j].logprob, 1e-5) << at << ", top " << j;
    }
  }
}

Request with_prompt_logprobs(Request r, int32_t n) {
  r.sampling.prompt_logprobs = n;
  return r;
}

// The requests of most tests: a long prompt (chunked), a short one asking for no top entries, a
// one-token prompt (nothing to report), and a request without prompt logprobs beside them.
std::vector<Request> mixed_requests() {
  std::vector<Request> v;
  v.push_back(with_prompt_logprobs(ids_request(prompt_ids(150, 21), 6, 5, 0.8f), 5));
  v.push_back(with_prompt_logprobs(ids_request(prompt_ids(9, 22), 4, std::nullopt, 0.0f), 0));
  v.push_back(with_prompt_logprobs(ids_request({7}, 3, 6), 3));
  Request penalties = ids_request(prompt_ids(40, 23), 8, 7, 0.9f);  // the host sampler's rows
  penalties.sampling.repetition_penalty = 1.2f;
  penalties.sampling.prompt_logprobs = 20;
  v.push_back(penalties);
  v.push_back(ids_request(prompt_ids(30, 24), 8, 8, 0.7f));
  return v;
}

void expect_references(const std::vector<GenerateOutput>& outs, const std::vector<Request>& requests,
                       const std::string& what) {
  ASSERT_EQ(outs.size(), requests.size()) << what;
  for (size_t i = 0; i < outs.size(); ++i) {
    const SamplingParams& s = requests[i].sampling;
    if (!s.prompt_logprobs) {
      EXPECT_TRUE(outs[i].prompt_logprobs.empty()) << what << ", request " << i;
      continue;
    }
    expect_matches(outs[i].prompt_logprobs, reference(requests[i].prompt_ids, *s.prompt_logprobs),
                   what + ", request " + std::to_string(i));
  }
}

// The same requests without prompt logprobs: the sampled tokens must not change.
std::vector<Request> without_prompt_logprobs(std::vector<Request> v) {
  for (Request& r : v) r.sampling.prompt_logprobs.reset();
  return v;
}

TEST(EnginePromptLogprobsTest, ChunkedPromptsMatchAFullForward) {
  EngineOptions o = testing::micro_options();  // 64 tokens per step: the 150-token prompt in 3+ chunks
  const std::vector<Request> requests = mixed_requests();
  const testing::Outcome got = testing::generate_all(requests, o);
  expect_references(got.outputs, requests, "chunked");
  EXPECT_EQ(got.outputs.at(2).prompt_logprobs.size(), 0u) << "a one-token prompt has no entries";
  const testing::Outcome plain = testing::generate_all(without_prompt_logprobs(requests), o);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got.outputs[i].sequences.at(0).token_ids, plain.outputs.at(i).sequences.at(0).token_ids) << i;
  }
  // Smaller chunks (a cap per sequence, and the prompt-logits cap), the host sampler for every
  // row, and the synchronous loop: the same entries.
  o.max_prefill_chunk = 17;
  expect_references(testing::generate_all(requests, o).outputs, requests, "chunks of 17");
  engine::DebugOptions host;
  host.host_sampling = true;
  o.async_scheduling = false;
  expect_references(testing::generate_all(requests, o, host).outputs, requests, "host sampling, synchronous");
}

// n > 1: the prompt's logprobs come once, with sample 0's first tokens; the samples are those of
// the request without them.
TEST(EnginePromptLogprobsTest, ComeOnceWithSampleZeroForNSamples) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  Request r = with_prompt_logprobs(ids_request(prompt_ids(70, 31), 5, 9, 1.0f), 2);
  r.sampling.n = 3;
  testing::EventLog log;
  auto id = engine->submit(r, log.sink());
  ASSERT_TRUE(id.is_ok()) << id.status().to_string();
  ASSERT_TRUE(log.wait(3));
  int with_entries = 0;
  for (const TokenEvent& e : log.events[*id]) {
    if (e.prompt_logprobs.empty()) continue;
    ++with_entries;
    EXPECT_EQ(e.sample_index, 0);
    EXPECT_FALSE(e.token_ids.empty());
    expect_matches(e.prompt_logprobs, reference(r.prompt_ids, 2), "n = 3");
  }
  EXPECT_EQ(with_entries, 1);
  Request plain = r;
  plain.sampling.prompt_logprobs.reset();
  auto outs = engine->generate({plain});
  ASSERT_TRUE(outs.is_ok());
  for (int32_t s = 0; s < 3; ++s) EXPECT_EQ(log.tokens(*id, s), (*outs)[0].sequences.at(static_cast<size_t>(s)).token_ids) << s;
  testing::expect_all_free(*engine);
}

// A warm prefix cache: the request computes its whole prompt (no cached tokens) and its entries
// are the cold ones; a request without prompt logprobs still takes the hit.
TEST(EnginePromptLogprobsTest, ReadNoCachedPrefix) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = prompt_ids(100, 41);
  ASSERT_TRUE(engine->generate({ids_request(prompt, 2, 1)}).is_ok());
  auto outs = engine->generate({with_prompt_logprobs(ids_request(prompt, 4, 2), 0)});
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  EXPECT_EQ((*outs)[0].n_cached_tokens, 0);
  const std::vector<TokenLogprobs> want = reference(prompt, 0);
  expect_matches((*outs)[0].prompt_logprobs, want, "after a warm-up");
  for (const TokenLogprobs& e : (*outs)[0].prompt_logprobs) EXPECT_TRUE(e.top.empty());
  auto hit = engine->generate({ids_request(prompt, 4, 2)});
  ASSERT_TRUE(hit.is_ok());
  EXPECT_GT((*hit)[0].n_cached_tokens, 0) << "the prefix was there to take";
  EXPECT_EQ((*hit)[0].sequences[0].token_ids, (*outs)[0].sequences[0].token_ids);
  testing::expect_all_free(*engine);
}

// Preempted and recomputed mid-prompt or after it, drafted by the MTP block: the same entries.
TEST(EnginePromptLogprobsTest, SurvivePreemptionAndSpeculativeDecoding) {
  std::vector<Request> requests;
  for (int i = 0; i < 3; ++i) {
    requests.push_back(with_prompt_logprobs(ids_request(prompt_ids(40 + i, 950 + i), 24, 70 + i), 1 + i));
  }
  EngineOptions tight = testing::micro_options();
  tight.kv_blocks = 8;  // 3 x 4 blocks needed at the end: someone is preempted
  const testing::Outcome preempted = testing::generate_all(requests, tight);
  EXPECT_GT(preempted.stats.n_preemptions, 0);
  expect_references(preempted.outputs, requests, "preempted");
  EngineOptions spec = testing::micro_options();
  spec.nextn_decode = 3;
  const testing::Outcome drafted = testing::generate_all(requests, spec);
  EXPECT_GT(drafted.stats.n_draft_rows, 0);
  expect_references(drafted.outputs, requests, "speculative decoding");
  testing::expect_same_outputs(preempted.outputs,
                               testing::generate_all(without_prompt_logprobs(requests), tight).outputs);
  testing::expect_same_outputs(drafted.outputs, testing::generate_all(without_prompt_logprobs(requests), spec).outputs);
}

// V4.1: compact prefill runs the decoder on a prompt's tail only, so prompt logprobs are refused
// naming the option; with exact prefill they match the full forward (the Scorer's is exact).
TEST(EnginePromptLogprobsTest, V41NeedsExactPrefill) {
  EngineOptions o = testing::micro_options();
  o.model = testing::synthetic_model_dir("tiny-v41");
  o.block_tokens = 32;
  const Request r = with_prompt_logprobs(ids_request(prompt_ids(200, 51), 3, 4), 3);
  {
    auto compact = testing::open_micro(o);
    ASSERT_NE(compact, nullptr);
    auto id = compact->submit(r, [](const TokenEvent&) {});
    ASSERT_FALSE(id.is_ok());
    EXPECT_EQ(id.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(id.status().message().find("yoco_prefill_mode"), std::string::npos) << id.status().to_string();
  }
  o.yoco_prefill_mode = "none";
  const testing::Outcome exact = testing::generate_all({r}, o);
  ASSERT_EQ(exact.outputs.size(), 1u);
  expect_matches(exact.outputs[0].prompt_logprobs, reference(r.prompt_ids, 3, "tiny-v41"), "V4.1, exact prefill");
}

}  // namespace
}  // namespace deepinfer
