// StructuredOutput::after_reasoning on the tiny-v4f model (random weights, the real vocabulary with
// the </think> special): a thinking-mode prompt gets free reasoning, then `</think>`, then an
// answer that parses as JSON matching the schema; EOS never comes before `</think>` (even with a
// +100 bias); without after_reasoning the grammar constrains the output from its first token.
// The random model almost never samples </think> on its own, so a logit bias brings it within a
// few tokens; the bias does not touch the answer (the JSON grammar masks </think> off there).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "deepinfer/chat.h"
#include "deepinfer/engine.h"
#include "test_models.h"

namespace deepinfer {
namespace {

using Json = nlohmann::json;

// Bounded values only, so a random model's JSON always ends within the token budget.
const char* kSchema =
    R"({"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo", "Lima"]},
  "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"],
  "additionalProperties": false})";

EngineOptions tiny_options() {
  EngineOptions o;
  o.model = testing::synthetic_model_dir("tiny-v4f");
  o.kv_blocks = 32;
  o.max_num_seqs = 8;
  return o;
}

class EngineReasoningOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto e = Engine::open(tiny_options());
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    engine_ = std::move(e).value().release();
    tokenizer_ = engine_->tokenizer();
    const std::optional<int32_t> think_end = tokenizer_->token_to_id("</think>");
    ASSERT_TRUE(think_end.has_value());
    think_end_ = *think_end;
  }
  static void TearDownTestSuite() {
    delete engine_;
    tokenizer_.reset();
  }

  // A chat prompt in thinking mode (it ends with <think>), the JSON schema, biased towards
  // </think> and EOS.
  static Request request(uint64_t seed, bool after_reasoning, float think_end_bias = 10.0f) {
    chat::Message user;
    user.content = "Plan a trip. Answer as JSON.";
    const chat::RenderOptions render{.family = chat::ModelFamily::kV4, .thinking_mode = chat::ThinkingMode::kThinking};
    Result<std::vector<int32_t>> ids = chat::render_ids(std::span(&user, 1), render, *tokenizer_);
    EXPECT_TRUE(ids.is_ok()) << ids.status().to_string();
    Request r;
    r.prompt_ids = ids.is_ok() ? *ids : std::vector<int32_t>{};
    r.sampling.max_tokens = 120;
    r.sampling.seed = seed;
    r.sampling.temperature = 1.0f;
    r.sampling.skip_special_tokens = false;
    if (think_end_bias != 0.0f) r.sampling.logit_bias[think_end_] = think_end_bias;
    r.sampling.logit_bias[tokenizer_->eos_id()] = kMaxLogitBias;  // EOS wherever it is allowed
    r.structured_output = StructuredOutput{StructuredOutput::Kind::kJsonSchema, kSchema, after_reasoning};
    return r;
  }

  static chat::ParsedOutput parse(const std::vector<int32_t>& ids) {
    auto parser = chat::OutputParser::create(
        tokenizer_, chat::ParserOptions{.thinking_mode = chat::ThinkingMode::kThinking});
    EXPECT_TRUE(parser.is_ok()) << parser.status().to_string();
    std::vector<chat::ChatEvent> events;
    for (int32_t id : ids) parser->push(id, &events);
    if (!parser->is_done()) parser->finish(chat::FinishReason::kLength, &events);
    return parser->output();
  }

  static void expect_schema_valid(const std::string& text) {
    const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << text;
    ASSERT_EQ(j.size(), 2u) << text;
    const std::string city = j.at("city").get<std::string>();
    EXPECT_TRUE(city == "Paris" || city == "Oslo" || city == "Lima") << text;
    ASSERT_TRUE(j.at("days").is_number()) << text;
    const double days = j.at("days").get<double>();
    EXPECT_EQ(days, std::floor(days)) << text;
    EXPECT_GE(days, 1) << text;
    EXPECT_LE(days, 7) << text;
  }

  static inline Engine* engine_ = nullptr;
  static inline std::shared_ptr<const Tokenizer> tokenizer_;
  static inline int32_t think_end_ = -1;
};

TEST_F(EngineReasoningOutputTest, ReasoningIsFreeAndTheAnswerAfterThinkEndMatchesTheSchema) {
  std::vector<Request> reqs;
  for (uint64_t seed = 1; seed <= 4; ++seed) reqs.push_back(request(seed, /*after_reasoning=*/true));
  auto outs = engine_->generate(reqs);
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  int n_with_reasoning = 0;
  for (size_t i = 0; i < outs->size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const GenerateOutput::Sequence& s = (*outs)[i].sequences.at(0);
    const std::string markup = tokenizer_->decode(s.token_ids);
    EXPECT_EQ(s.finish, FinishReason::kStop) << markup;
    ASSERT_FALSE(s.token_ids.empty());
    EXPECT_EQ(s.token_ids.back(), tokenizer_->eos_id()) << markup;
    const auto end = std::find(s.token_ids.begin(), s.token_ids.end(), think_end_);
    ASSERT_NE(end, s.token_ids.end()) << markup;
    // EOS (biased +100) never before </think>: it comes only once, at the very end.
    EXPECT_EQ(std::count(s.token_ids.begin(), s.token_ids.end(), tokenizer_->eos_id()), 1) << markup;
    if (end != s.token_ids.begin()) ++n_with_reasoning;
    // The answer alone (after </think>, before EOS) is the schema's JSON.
    const std::vector<int32_t> answer(end + 1, s.token_ids.end() - 1);
    expect_schema_valid(tokenizer_->decode(answer));
    // As a chat client sees it: the JSON is the content, not the reasoning.
    const chat::ParsedOutput parsed = parse(s.token_ids);
    EXPECT_EQ(parsed.error, "");
    expect_schema_valid(parsed.content);
    EXPECT_EQ(parsed.reasoning_content, tokenizer_->decode(std::vector<int32_t>(s.token_ids.begin(), end)));
  }
  EXPECT_GE(n_with_reasoning, 3);  // the reasoning really was sampled freely, not skipped
}

TEST_F(EngineReasoningOutputTest, EosIsMaskedUntilThinkEndSoTheBudgetEndsTheReasoning) {
  // No </think> bias: the reasoning runs to max_tokens; EOS, biased +100, is never sampled.
  Request r = request(7, /*after_reasoning=*/true, /*think_end_bias=*/0.0f);
  r.sampling.max_tokens = 24;
  auto outs = engine_->generate({r});
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  const GenerateOutput::Sequence& s = (*outs)[0].sequences.at(0);
  EXPECT_EQ(s.finish, FinishReason::kLength);
  ASSERT_EQ(s.token_ids.size(), 24u);
  EXPECT_EQ(std::count(s.token_ids.begin(), s.token_ids.end(), tokenizer_->eos_id()), 0);
  EXPECT_EQ(std::count(s.token_ids.begin(), s.token_ids.end(), think_end_), 0);
}

TEST_F(EngineReasoningOutputTest, WithoutAfterReasoningTheGrammarStartsAtTheFirstToken) {
  // The old behaviour (and the bug in thinking mode): the JSON is all the model writes, so a chat
  // parser in thinking mode files it under reasoning and the content is empty.
  auto outs = engine_->generate({request(1, /*after_reasoning=*/false), request(2, false)});
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  for (const GenerateOutput& out : *outs) {
    const GenerateOutput::Sequence& s = out.sequences.at(0);
    const std::string markup = tokenizer_->decode(s.token_ids);
    EXPECT_EQ(s.finish, FinishReason::kStop) << markup;
    ASSERT_FALSE(s.token_ids.empty());
    EXPECT_EQ(s.token_ids.back(), tokenizer_->eos_id());
    EXPECT_EQ(std::count(s.token_ids.begin(), s.token_ids.end(), think_end_), 0) << markup;
    expect_schema_valid(tokenizer_->decode(std::vector<int32_t>(s.token_ids.begin(), s.token_ids.end() - 1)));
    const chat::ParsedOutput parsed = parse(s.token_ids);
    EXPECT_EQ(parsed.content, "") << markup;
    expect_schema_valid(parsed.reasoning_content);
  }
}

TEST_F(EngineReasoningOutputTest, AfterReasoningWithDsmlToolCallsIsRejectedAtSubmit) {
  Request r = request(1, /*after_reasoning=*/true);
  r.structured_output = StructuredOutput{StructuredOutput::Kind::kDsmlToolCalls, R"({"tools": [{"name": "f"}]})", true};
  auto id = engine_->submit(r, [](const TokenEvent&) {});
  ASSERT_FALSE(id.is_ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(id.status().message().find("structured_output.after_reasoning"), std::string::npos)
      << id.status().to_string();
  EXPECT_NE(id.status().message().find("\"thinking\""), std::string::npos) << id.status().to_string();
}

}  // namespace
}  // namespace deepinfer
