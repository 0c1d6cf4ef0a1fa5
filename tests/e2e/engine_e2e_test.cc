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

}  // namespace
}  // namespace deepinfer
