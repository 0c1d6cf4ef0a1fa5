// End to end through the C++ Engine on the tiny demo model (tiny-v4f: real 129,280-token
// vocabulary, the real tokenizer): text prompts in, text out; greedy output equals the Scorer's
// argmax loop (an independent single-sequence path); the demo model resolves by name; batch
// composition does not change a seeded request.
#include <cstdlib>

#include "deepinfer/engine.h"
#include "deepinfer/model.h"
#include "e2e_util.h"
#include "engine/engine_debug.h"

namespace deepinfer {
namespace {

EngineOptions tiny_options() {
  EngineOptions o;
  o.model = testing::tiny_model_dir();
  o.kv_blocks = 32;
  o.max_num_seqs = 8;
  return o;
}

Request text_request(const std::string& prompt, int32_t max_tokens, std::optional<uint64_t> seed, float temperature) {
  Request r;
  r.prompt = prompt;
  r.sampling.max_tokens = max_tokens;
  r.sampling.seed = seed;
  r.sampling.temperature = temperature;
  r.sampling.ignore_eos = true;
  return r;
}

TEST(EngineE2eTest, GreedyTextGenerationEqualsScorerArgmax) {
  engine::DebugOptions debug;
  debug.check_integrity_every_step = true;
  auto engine = engine::open_engine(tiny_options(), debug);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  auto outs = (*engine)->generate({text_request("The capital of France is", 6, std::nullopt, 0.0f)});
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  const GenerateOutput& o = (*outs)[0];
  const auto tok = (*engine)->tokenizer();
  std::vector<int32_t> expect_prompt = {tok->bos_id()};
  const auto body = tok->encode("The capital of France is", true);
  expect_prompt.insert(expect_prompt.end(), body.begin(), body.end());
  EXPECT_EQ(o.prompt_ids, expect_prompt);
  ASSERT_EQ(o.sequences[0].token_ids.size(), 6u);
  EXPECT_EQ(o.sequences[0].text, tok->decode(o.sequences[0].token_ids, true));

  auto scorer = Scorer::open(ScorerOptions{testing::tiny_model_dir()});
  ASSERT_TRUE(scorer.is_ok()) << scorer.status().to_string();
  std::vector<int32_t> ids = o.prompt_ids;
  for (int i = 0; i < 6; ++i) {
    auto top = (*scorer)->top_next(ids, 1);
    ASSERT_TRUE(top.is_ok());
    EXPECT_EQ((*top)[0].id, o.sequences[0].token_ids[static_cast<size_t>(i)]) << "token " << i;
    ids.push_back((*top)[0].id);
  }
  const engine::DebugSnapshot d = engine::debug_snapshot(**engine);
  EXPECT_TRUE(d.integrity.is_ok()) << d.integrity.to_string();
  EXPECT_EQ(d.n_free_blocks, d.n_blocks);
}

TEST(EngineE2eTest, BatchOfTextPromptsIsBatchInvariant) {
  auto engine = Engine::open(tiny_options());
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const std::vector<std::string> prompts = {"Hello, my name is", "The future of AI is",
                                            "Once upon a time, in a land far away,", "1 2 3 4 5"};
  std::vector<Request> batch;
  for (size_t i = 0; i < prompts.size(); ++i) batch.push_back(text_request(prompts[i], 5, 10 + i, 0.8f));
  auto together = (*engine)->generate(batch);
  ASSERT_TRUE(together.is_ok()) << together.status().to_string();
  auto alone = (*engine)->generate({batch[2]});
  ASSERT_TRUE(alone.is_ok());
  EXPECT_EQ((*alone)[0].sequences[0].token_ids, (*together)[2].sequences[0].token_ids);
  for (const GenerateOutput& o : *together) {
    EXPECT_EQ(o.sequences[0].token_ids.size(), 5u);
    EXPECT_EQ(o.sequences[0].finish, FinishReason::kLength);
  }
  EXPECT_EQ((*engine)->model_family(), "deepseek_v4");
}

TEST(EngineE2eTest, DemoModelResolvesByName) {
  ::setenv("DEEPINFER_CACHE_DIR", testing::demo_cache_dir().c_str(), 1);
  EngineOptions o;  // model = "demo"
  o.kv_blocks = 8;
  auto engine = Engine::open(o);
  ::unsetenv("DEEPINFER_CACHE_DIR");
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  EXPECT_NE((*engine)->model_dir().find("demo-tiny-v4f-seed0"), std::string::npos);
  auto outs = (*engine)->generate({text_request("Hi", 3, 1, 1.0f)});
  ASSERT_TRUE(outs.is_ok());
  EXPECT_EQ((*outs)[0].sequences[0].token_ids.size(), 3u);
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

Request constrained(StructuredOutput::Kind kind, std::string spec, uint64_t seed) {
  Request r;
  r.prompt = "Answer:";
  r.sampling.max_tokens = 40;
  r.sampling.seed = seed;
  r.structured_output = StructuredOutput{kind, std::move(spec)};
  return r;
}

TEST(EngineE2eTest, StructuredOutputsConstrainTheText) {
  auto engine = Engine::open(tiny_options());
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const std::string schema =
      R"({"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}}, "required": ["color"],)"
      R"( "additionalProperties": false})";
  std::vector<Request> reqs;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    reqs.push_back(constrained(StructuredOutput::Kind::kRegex, "(yes|no|maybe)", seed));
    reqs.push_back(constrained(StructuredOutput::Kind::kJsonSchema, schema, seed));
  }
  auto outs = (*engine)->generate(reqs);
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  for (size_t i = 0; i < outs->size(); ++i) {
    const auto& s = (*outs)[i].sequences[0];
    EXPECT_EQ(s.finish, FinishReason::kStop) << i << ": " << s.text;
    if (i % 2 == 0) {
      EXPECT_TRUE(s.text == "yes" || s.text == "no" || s.text == "maybe") << s.text;
    } else {
      EXPECT_TRUE(s.text == R"({"color":"red"})" || s.text == R"({"color":"green"})" ||
                  s.text == R"({"color":"blue"})")
          << s.text;
    }
  }
  auto bad = (*engine)->submit(constrained(StructuredOutput::Kind::kJsonSchema, R"({"type": "object", "if": {}})", 1),
                               [](const TokenEvent&) {});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("structured_output"), std::string::npos) << bad.status().to_string();
}

// Rows with every logit processor: grammars (a regex, a JSON schema), penalties, bias, allowed ids,
// min_tokens with stop ids; greedy and seeded.
std::vector<Request> logit_processor_requests() {
  const std::string schema =
      R"({"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}}, "required": ["n", "ok"],)"
      R"( "additionalProperties": false})";
  std::vector<Request> reqs;
  reqs.push_back(constrained(StructuredOutput::Kind::kRegex, "(yes|no|maybe)", 1));
  reqs.push_back(constrained(StructuredOutput::Kind::kJsonSchema, schema, 2));
  Request pen = text_request("The capital of France is", 12, 3, 0.9f);
  pen.sampling.repetition_penalty = 1.4f;
  pen.sampling.frequency_penalty = 0.6f;
  pen.sampling.presence_penalty = 0.4f;
  reqs.push_back(pen);
  Request greedy_pen = text_request("One two three", 12, std::nullopt, 0.0f);
  greedy_pen.sampling.repetition_penalty = 1.3f;
  greedy_pen.sampling.logit_bias = {{11, 4.0f}, {1010, 6.0f}};
  reqs.push_back(greedy_pen);
  Request allowed = text_request("Pick:", 6, 5, 1.0f);
  allowed.sampling.allowed_token_ids = {11, 12, 13, 1010, 2020, 3030};
  reqs.push_back(allowed);
  Request min = text_request("Hello", 8, 6, 1.0f);
  min.sampling.ignore_eos = false;
  min.sampling.min_tokens = 6;
  min.sampling.stop_token_ids = {13};
  min.sampling.top_k = 20;
  reqs.push_back(min);
  return reqs;
}

// Rows with the host sampler's steps 1-4 — a regex and a JSON schema (grammar masks), penalties
// over the prompt and output, logit bias, allowed ids, min_tokens with stop ids — are sampled where
// the logits are (Ops::adjust_logits before Ops::sample_rows / argmax_rows): the same tokens and
// text as every step sampled on the host (DebugOptions::host_sampling), greedy and seeded.
TEST(EngineE2eTest, LogitProcessorsOnTheDeviceEqualTheHostSampler) {
  auto run = [&](bool host_sampling, EngineStats* stats) {
    engine::DebugOptions debug;
    debug.host_sampling = host_sampling;
    auto engine = engine::open_engine(tiny_options(), debug);
    EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
    std::vector<GenerateOutput> outs;
    if (!engine.is_ok()) return outs;
    auto r = (*engine)->generate(logit_processor_requests());
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (r.is_ok()) outs = *r;
    *stats = (*engine)->stats();
    return outs;
  };
  EngineStats device, host;
  const auto on_device = run(false, &device), on_host = run(true, &host);
  ASSERT_EQ(on_device.size(), 6u);
  ASSERT_EQ(on_host.size(), 6u);
  EXPECT_EQ(device.n_device_sampled_steps, device.n_steps);
  EXPECT_EQ(host.n_device_sampled_steps, 0);
  for (size_t i = 0; i < 6; ++i) {
    const auto &d = on_device[i].sequences.at(0), &h = on_host[i].sequences.at(0);
    EXPECT_EQ(d.token_ids, h.token_ids) << "request " << i;
    EXPECT_EQ(d.text, h.text) << "request " << i;
    EXPECT_EQ(d.finish, h.finish) << "request " << i;
  }
  const auto& pick = on_device[4].sequences.at(0).token_ids;
  for (int32_t t : pick) EXPECT_TRUE(t == 11 || t == 12 || t == 13 || t == 1010 || t == 2020 || t == 3030) << t;
  EXPECT_GE(on_device[5].sequences.at(0).token_ids.size(), 6u);  // no stop before min_tokens
  const std::string& regex_text = on_device[0].sequences.at(0).text;
  EXPECT_TRUE(regex_text == "yes" || regex_text == "no" || regex_text == "maybe") << regex_text;
}

// Asynchronous scheduling with every logit processor: step n + 1's forward is queued before step
// n's tokens are back; its penalty rows count step n's token on the device, and a grammar row's
// sampling waits until the host has taken that token in (its mask follows it). The outputs equal
// the synchronous loop's, and a batch of grammar rows alone has its steps planned ahead too.
TEST(EngineE2eTest, AsynchronousSchedulingWithLogitProcessorsEqualsTheSynchronousLoop) {
  auto run = [&](bool async, const std::vector<Request>& requests, EngineStats* stats) {
    EngineOptions o = tiny_options();
    o.async_scheduling = async;
    auto engine = engine::open_engine(o, {});
    EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
    std::vector<GenerateOutput> outs;
    if (!engine.is_ok()) return outs;
    auto r = (*engine)->generate(requests);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (r.is_ok()) outs = *r;
    *stats = (*engine)->stats();
    return outs;
  };
  const std::string ebnf = R"G(root ::= "(" digits ")" | "[" digits "]"
digits ::= [0-9] | [0-9] digits)G";
  std::vector<Request> grammars;
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    grammars.push_back(constrained(StructuredOutput::Kind::kJsonSchema, logit_processor_requests()[1].structured_output->spec, seed));
    grammars.push_back(constrained(StructuredOutput::Kind::kEbnf, ebnf, seed + 10));
  }
  for (const std::vector<Request>& requests : {logit_processor_requests(), grammars}) {
    EngineStats sync_stats, async_stats;
    const auto sync_out = run(false, requests, &sync_stats), async_out = run(true, requests, &async_stats);
    ASSERT_EQ(sync_out.size(), requests.size());
    ASSERT_EQ(async_out.size(), requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto &a = async_out[i].sequences.at(0), &s = sync_out[i].sequences.at(0);
      EXPECT_EQ(a.token_ids, s.token_ids) << "request " << i;
      EXPECT_EQ(a.text, s.text) << "request " << i;
      EXPECT_EQ(a.finish, s.finish) << "request " << i;
    }
    EXPECT_EQ(sync_stats.n_steps_ahead, 0);
    // All but the first step and the odd one (measured: every step but the first; none for the
    // grammar batch before a grammar row's sampling could wait for the tokens).
    EXPECT_GT(async_stats.n_steps, 5);
    EXPECT_GE(async_stats.n_steps_ahead, async_stats.n_steps - 3) << "of " << async_stats.n_steps;
  }
}

}  // namespace
}  // namespace deepinfer
