// Speculative decoding (EngineOptions::nextn_decode, mtp_varlen): the checkpoint's draft module
// proposes, each step verifies its drafts, rejected ones are rewound. Under the coupled rule
// (spec_verification = "coupled", set by every test here; rejection sampling, the default, is
// engine_spec_rejection_test.cc's) verification samples every row as a step without drafts would
// (noise keyed by position), so the outputs must be those of decoding without drafts, token for
// token and logprob for logprob, whatever is drafted — checked
// with the real drafters (V4's MTP block on the micro model: window 16, ratios 4 and 16, so
// drafts cross ring wraps and compression groups; V4.1's DSpark block on tiny-v41) and with an
// oracle that knows the tokens and corrupts one draft in turn, so that every acceptance count
// from none to all is rewound or kept. Integrity is checked after every step.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "engine/loaded_model.h"
#include "engine_test_util.h"
#include "model/kv_state.h"

namespace deepinfer {
namespace {

using testing::ids_request;
using testing::prompt_ids;

using testing::Outcome;

Outcome run(std::vector<Request> requests, const EngineOptions& o, engine::DebugOptions debug = {}) {
  return testing::generate_all(std::move(requests), o, std::move(debug));
}

// The coupled rule: the only one that promises sampled rows the very tokens of decoding without drafts.
EngineOptions coupled(EngineOptions o) {
  o.spec_verification = "coupled";
  return o;
}

void expect_same(const std::vector<GenerateOutput>& a, const std::vector<GenerateOutput>& b) {
  testing::expect_same_outputs(a, b);
}

// Greedy and sampled rows, logprobs, n = 2, penalties (their counts follow every accepted token),
// a stop id met mid-way, min_tokens, and a request sharing the first one's prompt (a prefix hit).
std::vector<Request> mixed_requests(int32_t vocab, std::optional<int32_t> stop_id) {
  std::vector<Request> v;
  v.push_back(ids_request(prompt_ids(21, 1, vocab), 40, std::nullopt, 0.0f));
  Request topp = ids_request(prompt_ids(40, 2, vocab), 30, 77, 0.8f);
  topp.sampling.top_p = 0.9f;
  topp.sampling.logprobs = 3;
  v.push_back(topp);
  Request topk = ids_request(prompt_ids(7, 3, vocab), 25, 78, 1.1f);
  topk.sampling.top_k = 20;
  topk.sampling.n = 2;
  v.push_back(topk);
  Request penalties = ids_request(prompt_ids(18, 5, vocab), 30, 80, 0.9f);
  penalties.sampling.repetition_penalty = 1.3f;
  penalties.sampling.presence_penalty = 0.5f;
  penalties.sampling.frequency_penalty = 0.3f;
  v.push_back(penalties);
  if (stop_id.has_value()) {
    Request stops = ids_request(prompt_ids(21, 1, vocab), 40, std::nullopt, 0.0f);
    stops.sampling.ignore_eos = false;
    stops.sampling.stop_token_ids = {*stop_id};
    v.push_back(stops);
  }
  Request min_tokens = ids_request(prompt_ids(33, 4, vocab), 12, 79, 0.7f);
  min_tokens.sampling.min_tokens = 6;
  min_tokens.sampling.ignore_eos = false;
  v.push_back(min_tokens);
  std::vector<int32_t> longer = prompt_ids(21, 1, vocab);
  const std::vector<int32_t> tail = prompt_ids(20, 6, vocab);
  longer.insert(longer.end(), tail.begin(), tail.end());
  v.push_back(ids_request(longer, 24, 81, 0.6f));
  return v;
}

// The greedy request's 9th token: its twin stops there, inside a step that verifies drafts.
int32_t stop_id_of(const EngineOptions& o, int32_t vocab) {
  const Outcome probe = run({ids_request(prompt_ids(21, 1, vocab), 40, std::nullopt, 0.0f)}, o);
  if (probe.outputs.empty() || probe.outputs[0].sequences.at(0).token_ids.size() < 9) return 0;
  return probe.outputs[0].sequences.at(0).token_ids[8];
}

// Drafts from the tokens decoding without drafts gives (by request id = submission order), the
// one at n_generated % (k + 1) replaced by a wrong token when it is among them: over a run, every
// acceptance count from 0 to k comes up. corrupt = false: every draft right.
engine::DebugOptions oracle(const std::vector<GenerateOutput>& reference, int32_t k, int32_t vocab, bool corrupt) {
  engine::DebugOptions d;
  d.on_drafts = [&reference, k, vocab, corrupt](RequestId id, int32_t sample, int32_t n_generated,
                                                std::vector<int32_t>* drafts) {
    const std::vector<int32_t>& ref = reference.at(static_cast<size_t>(id - 1)).sequences.at(static_cast<size_t>(sample)).token_ids;
    drafts->clear();
    for (int32_t j = 0; j < k && static_cast<size_t>(n_generated + j) < ref.size(); ++j) {
      int32_t t = ref[static_cast<size_t>(n_generated + j)];
      if (corrupt && j == n_generated % (k + 1)) t = (t + 1) % vocab;
      drafts->push_back(t);
    }
  };
  return d;
}

TEST(EngineSpecTest, MtpDraftsGiveTheTokensOfDecodingWithout) {
  EngineOptions base = coupled(testing::micro_options());
  const int32_t stop_id = stop_id_of(base, 512);
  const Outcome plain = run(mixed_requests(512, stop_id), base);
  ASSERT_EQ(plain.outputs.size(), 7u);
  EXPECT_EQ(plain.stats.n_draft_tokens, 0);
  EXPECT_EQ(plain.outputs[4].sequences.at(0).finish, FinishReason::kStop);
  for (int32_t k : {1, 3}) {
    EngineOptions o = base;
    o.nextn_decode = k;
    const Outcome spec = run(mixed_requests(512, stop_id), o);
    expect_same(spec.outputs, plain.outputs);
    // Verify rows sampled where the logits are (every row but the penalties', each as if the
    // drafts before it were accepted) or all by the host sampler, row after row: the same.
    EXPECT_GT(spec.stats.n_device_sampled_steps, 0);
    engine::DebugOptions host;
    host.host_sampling = true;
    const Outcome host_run = run(mixed_requests(512, stop_id), o, host);
    expect_same(host_run.outputs, plain.outputs);
    EXPECT_EQ(host_run.stats.n_device_sampled_steps, 0);
    EXPECT_GT(spec.stats.n_draft_rows, 0) << "k " << k;
    EXPECT_GE(spec.stats.n_draft_tokens, spec.stats.n_draft_rows) << "k " << k;
    EXPECT_LE(spec.stats.n_draft_tokens, k * spec.stats.n_draft_rows) << "k " << k;
  }
}

// The MTP's picks are drawn where its logits are (only ids and raw logprobs come back) unless the
// host samples everything: on the CPU backend both are the host sampler's picks, bit for bit —
// greedy and sampled requests, penalties, min_tokens' suppression (each request's adjusted row).
TEST(EngineSpecTest, MtpPicksWhereTheLogitsAreAreTheHostSamplersPicks) {
  EngineOptions o = coupled(testing::micro_options());
  o.nextn_decode = 3;
  using Key = std::tuple<RequestId, int32_t, int32_t>;  // request, sample, n_generated
  auto drafted = [&](const std::vector<Request>& requests, bool host_sampling) {
    std::map<Key, std::vector<int32_t>> proposed;
    engine::DebugOptions d;
    d.host_sampling = host_sampling;
    d.on_drafts = [&](RequestId id, int32_t sample, int32_t n_generated, std::vector<int32_t>* drafts) {
      proposed[Key{id, sample, n_generated}] = *drafts;
    };
    const Outcome out = run(requests, o, d);
    EXPECT_EQ(out.outputs.size(), requests.size());
    return proposed;
  };
  const std::vector<Request> mixed = mixed_requests(512, std::nullopt);
  const std::map<Key, std::vector<int32_t>> device = drafted(mixed, false);
  EXPECT_GT(device.size(), 30u);
  EXPECT_EQ(device, drafted(mixed, true));
  // Sequences near the end of their room chain fewer drafts than the others of their step.
  o.max_model_len = 44;
  const std::vector<Request> near_end = {ids_request(prompt_ids(30, 7), 100, 3, 0.8f),
                                         ids_request(prompt_ids(35, 8), 100, std::nullopt, 0.0f),
                                         ids_request(prompt_ids(20, 9), 100, 4, 1.0f)};
  const std::map<Key, std::vector<int32_t>> short_device = drafted(near_end, false);
  std::set<size_t> lengths;
  for (const auto& [key, drafts] : short_device) lengths.insert(drafts.size());
  EXPECT_GE(lengths.size(), 3u) << "draft lengths from 1 to 3";
  EXPECT_EQ(short_device, drafted(near_end, true));
}

TEST(EngineSpecTest, EveryAcceptanceCountIsRewoundOrKeptExactly) {
  EngineOptions base = coupled(testing::micro_options());
  const int32_t stop_id = stop_id_of(base, 512);
  const Outcome plain = run(mixed_requests(512, stop_id), base);
  for (int32_t k : {2, 4}) {
    EngineOptions o = base;
    o.nextn_decode = k;
    const Outcome corrupted = run(mixed_requests(512, stop_id), o, oracle(plain.outputs, k, 512, true));
    expect_same(corrupted.outputs, plain.outputs);
    EXPECT_GT(corrupted.stats.n_accepted_draft_tokens, 0) << "k " << k;
    EXPECT_LT(corrupted.stats.n_accepted_draft_tokens, corrupted.stats.n_draft_tokens) << "k " << k;
    // All right: every draft is taken, and the run needs far fewer steps.
    const Outcome right = run(mixed_requests(512, stop_id), o, oracle(plain.outputs, k, 512, false));
    expect_same(right.outputs, plain.outputs);
    EXPECT_EQ(right.stats.n_accepted_draft_tokens, right.stats.n_draft_tokens) << "k " << k;
    EXPECT_LT(right.stats.n_steps * 3, plain.stats.n_steps * 2) << "k " << k;
  }
}

// The MTP drafts of a fresh pass over the whole sequence: the target over positions 0 .. M - 2
// (its final hidden states), the MTP block over the same positions with the tokens after them,
// then k - 1 chained rows — one shot, no chunks, no rewinds.
std::vector<int32_t> fresh_mtp_drafts(engine::LoadedModel& lm, const std::vector<int32_t>& seq, int32_t k) {
  const loader::ModelConfig& c = lm.config;
  const int64_t hc = c.hc_mult, D = c.hidden_size;
  const auto n = static_cast<int32_t>(seq.size()) - 1;  // target rows
  model::KvState state(c, model::KvStateOptions{1, 16, 16, lm.model->act_dtype()}, lm.ops.get());
  state.reset_slot(0);
  auto batch = [&](int32_t first, std::vector<int32_t> ids) {
    model::ForwardBatch b;
    b.seqs.push_back(ops::SeqSpan{0, 0, static_cast<int32_t>(ids.size()), first, 0, 0});
    for (size_t i = 0; i < ids.size(); ++i) b.positions.push_back(first + static_cast<int32_t>(i));
    b.token_ids = std::move(ids);
    b.max_blocks = 16;
    for (int32_t i = 0; i < 16; ++i) b.block_tables.push_back(i);
    return b;
  };
  // Hidden rows kept on the host: the next call's workspace reuses the result's memory.
  auto host_rows = [](const tensor::TensorView& h, std::vector<uint8_t>* bytes) {
    bytes->resize(static_cast<size_t>(h.numel()) * tensor::dtype_size(h.dtype));
    std::memcpy(bytes->data(), h.data, bytes->size());
    return tensor::TensorView::contiguous(bytes->data(), h.dtype, {h.shape[0], h.shape[1], h.shape[2]});
  };
  model::ForwardBatch target = batch(0, std::vector<int32_t>(seq.begin(), seq.begin() + n));
  target.keep_hidden_all = true;
  auto t = lm.model->forward(target, state);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  if (!t.is_ok()) return {};
  std::vector<uint8_t> hidden, x;
  tensor::TensorView h = host_rows(t->hidden, &hidden);
  model::ForwardBatch mtp = batch(0, std::vector<int32_t>(seq.begin() + 1, seq.end()));
  std::vector<int32_t> drafts;
  for (int32_t j = 0; j < k; ++j) {
    mtp.logit_rows = {static_cast<int32_t>(mtp.token_ids.size()) - 1};
    mtp.keep_hidden = true;
    auto r = lm.model->mtp_forward(mtp, h, state);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (!r.is_ok()) return {};
    const float* row = r->logits.as<const float>();
    drafts.push_back(static_cast<int32_t>(std::max_element(row, row + c.vocab_size) - row));
    h = host_rows(r->hidden, &x).reshape({1, hc, D});
    mtp = batch(n + j, {drafts.back()});
  }
  return drafts;
}

TEST(EngineSpecTest, MtpDraftsAreThoseOfAFreshPassOverTheSequence) {
  EngineOptions o = coupled(testing::micro_options());
  o.nextn_decode = 3;
  o.max_prefill_chunk = 7;  // the prompt in chunks: the MTP ring follows each
  const std::vector<int32_t> prompt = prompt_ids(30, 9);
  std::vector<std::pair<int32_t, std::vector<int32_t>>> proposed;  // (n_generated, drafts)
  engine::DebugOptions d;
  d.on_drafts = [&](RequestId, int32_t, int32_t n_generated, std::vector<int32_t>* drafts) {
    proposed.emplace_back(n_generated, *drafts);
  };
  // Greedy: a sampled request's drafts are drawn with its own sampler (coupled drafts).
  const Outcome out = run({ids_request(prompt, 20, std::nullopt, 0.0f)}, o, d);
  ASSERT_EQ(out.outputs.size(), 1u);
  const std::vector<int32_t>& generated = out.outputs[0].sequences.at(0).token_ids;
  ASSERT_EQ(generated.size(), 20u);
  ASSERT_GE(proposed.size(), 5u);
  auto lm = engine::load_model(o.model, engine::LoadOptions{});
  ASSERT_TRUE(lm.is_ok()) << lm.status().to_string();
  for (const auto& [n_generated, drafts] : proposed) {
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), generated.begin(), generated.begin() + n_generated);
    EXPECT_EQ(drafts, fresh_mtp_drafts(**lm, seq, 3)) << "after " << n_generated << " tokens";
  }
}

TEST(EngineSpecTest, ConfidenceScheduledDraftsStopWhereTheSurvivalDoes) {
  EngineOptions base = coupled(testing::micro_options());
  const Outcome plain = run(mixed_requests(512, std::nullopt), base);
  EngineOptions o = base;
  o.mtp_varlen = true;  // nextn_decode 0: up to 5 MTP drafts, fewer where the estimate drops
  o.draft_min_survival = 0.05f;
  const Outcome varlen = run(mixed_requests(512, std::nullopt), o);
  expect_same(varlen.outputs, plain.outputs);
  EXPECT_LE(varlen.stats.n_draft_tokens, 5 * varlen.stats.n_draft_rows);
  // A survival threshold no draft of a random model reaches: nothing is drafted.
  o.draft_min_survival = 0.999f;
  const Outcome none = run(mixed_requests(512, std::nullopt), o);
  expect_same(none.outputs, plain.outputs);
  EXPECT_EQ(none.stats.n_draft_tokens, 0);
}

// Grammar rows: each verified row is masked by the matcher as the accepted tokens leave it, the
// first draft is drawn under the current mask; tiny-v4f for the real vocabulary.
TEST(EngineSpecTest, GrammarRowsVerifyUnderTheirMasks) {
  EngineOptions o = coupled(EngineOptions{});
  o.model = testing::synthetic_model_dir("tiny-v4f");
  o.kv_blocks = 32;
  o.max_num_seqs = 4;
  const std::vector<Request> requests = testing::sentence_requests({{11, 0.8f}, {12, 0.0f}});
  const Outcome plain = run(requests, o);
  ASSERT_EQ(plain.outputs.size(), 2u);
  o.nextn_decode = 3;
  const Outcome spec = run(requests, o);
  expect_same(spec.outputs, plain.outputs);
  EXPECT_GT(spec.stats.n_draft_rows, 0);
  const Outcome oracle_run = run(requests, o, oracle(plain.outputs, 3, 1000, true));
  expect_same(oracle_run.outputs, plain.outputs);
  EXPECT_GT(oracle_run.stats.n_accepted_draft_tokens, 0);
  // Drafts the grammar cannot take are cut before verification: every second draft a digit
  // (outside the regex), so no row verifies more than one.
  auto probe = testing::open_micro(o);
  ASSERT_NE(probe, nullptr);
  const Outcome cut_run = run(requests, o, testing::digit_second_drafts(*probe));
  expect_same(cut_run.outputs, plain.outputs);
  EXPECT_GT(cut_run.stats.n_draft_rows, 0);
  EXPECT_LE(cut_run.stats.n_draft_tokens, cut_run.stats.n_draft_rows);
}

TEST(EngineSpecTest, DsparkDraftsGiveTheTokensOfDecodingWithout) {
  EngineOptions base = coupled(testing::micro_options());
  base.model = testing::synthetic_model_dir("tiny-v41");
  base.block_tokens = 32;
  const int32_t stop_id = stop_id_of(base, 512);
  const Outcome plain = run(mixed_requests(512, stop_id), base);
  ASSERT_EQ(plain.outputs.size(), 7u);
  EngineOptions o = base;
  o.nextn_decode = 3;
  const Outcome spec = run(mixed_requests(512, stop_id), o);
  expect_same(spec.outputs, plain.outputs);
  EXPECT_GT(spec.stats.n_draft_rows, 0);
  o.nextn_decode = 5;  // the whole block
  const Outcome corrupted = run(mixed_requests(512, stop_id), o, oracle(plain.outputs, 5, 512, true));
  expect_same(corrupted.outputs, plain.outputs);
  EXPECT_GT(corrupted.stats.n_accepted_draft_tokens, 0);
  EXPECT_LT(corrupted.stats.n_accepted_draft_tokens, corrupted.stats.n_draft_tokens);
}

// Sequences that run to the end of what they may hold: drafts stop where the room does, and
// V4.1's DSpark block is cut at the model's last position (tiny-v41 has 4,096).
TEST(EngineSpecTest, DraftsStayInsideTheSequencesRoom) {
  EngineOptions o = coupled(testing::micro_options());
  o.max_model_len = 44;
  std::vector<Request> micro = {ids_request(prompt_ids(30, 7), 100, 3, 0.8f),
                                ids_request(prompt_ids(35, 8), 100, std::nullopt, 0.0f)};
  const Outcome plain = run(micro, o);
  o.nextn_decode = 3;
  const Outcome spec = run(micro, o, oracle(plain.outputs, 3, 512, false));
  expect_same(spec.outputs, plain.outputs);
  ASSERT_EQ(spec.outputs.size(), 2u);
  EXPECT_EQ(spec.outputs[0].sequences.at(0).finish, FinishReason::kLength);
  EXPECT_EQ(spec.outputs[0].sequences.at(0).token_ids.size(), 14u);

  EngineOptions v41 = coupled(testing::micro_options());
  v41.model = testing::synthetic_model_dir("tiny-v41");
  v41.block_tokens = 32;
  v41.kv_blocks = 136;
  v41.max_num_batched_tokens = 4096;
  const std::vector<Request> longest = {ids_request(prompt_ids(4085, 9), 100, std::nullopt, 0.0f)};
  const Outcome plain41 = run(longest, v41);
  ASSERT_EQ(plain41.outputs.size(), 1u);
  EXPECT_EQ(plain41.outputs[0].sequences.at(0).token_ids.size(), 11u);  // to position 4,095
  v41.nextn_decode = 5;
  const Outcome spec41 = run(longest, v41);
  expect_same(spec41.outputs, plain41.outputs);
  EXPECT_GT(spec41.stats.n_draft_rows, 0);
}

TEST(EngineSpecTest, BadSpeculativeOptionsAreNamed) {
  EngineOptions o = coupled(testing::micro_options());
  o.nextn_decode = 2;
  o.draft_min_survival = 1.5f;
  auto e = engine::open_engine(o, {});
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("draft_min_survival"), std::string::npos) << e.status().to_string();
  EngineOptions v41 = coupled(testing::micro_options());
  v41.model = testing::synthetic_model_dir("tiny-v41");
  v41.block_tokens = 32;
  v41.nextn_decode = 9;
  e = engine::open_engine(v41, {});
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("DSpark block of 5"), std::string::npos) << e.status().to_string();
}

}  // namespace
}  // namespace deepinfer
