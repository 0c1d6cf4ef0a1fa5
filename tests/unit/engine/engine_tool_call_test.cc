// StructuredOutput::Kind::kDsmlToolCalls on the tiny-v4f model (random weights, the real
// 129,280-token vocabulary with the ｜DSML｜ and </think> specials): a required or named tool call
// comes out of sampling as DSML that the chat output parser turns into a tool call whose JSON
// arguments match the tool's schema; each spec flag changes what the matcher accepts; bad specs
// are INVALID_ARGUMENT errors naming structured_output and the field.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "deepinfer/chat.h"
#include "deepinfer/engine.h"
#include "engine/structured_output.h"
#include "test_models.h"

namespace deepinfer {
namespace {

using Json = nlohmann::json;

const std::string kD = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";

// Bounded parameters only (enums, small integers, booleans, no extra keys): a random model's
// arguments then always end within the token budget.
const char* kWeather = R"({"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo", "Lima"]},
  "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"],
  "additionalProperties": false})";
const char* kClock = R"({"type": "object", "properties": {"utc": {"type": "boolean"}}, "required": ["utc"],
  "additionalProperties": false})";

std::string spec(const Json& flags, const std::vector<std::string>& names = {"get_weather", "get_time"}) {
  Json s = flags;
  s["tools"] = Json::array();
  for (const std::string& name : names) {
    s["tools"].push_back({{"name", name}, {"parameters", Json::parse(name == "get_time" ? kClock : kWeather)}});
  }
  return s.dump();
}

Request tool_request(const std::string& dsml_spec, uint64_t seed) {
  Request r;
  r.prompt = "You may call tools. What is the weather?";
  r.sampling.max_tokens = 160;
  r.sampling.seed = seed;
  r.sampling.temperature = 1.0f;
  r.structured_output = StructuredOutput{StructuredOutput::Kind::kDsmlToolCalls, dsml_spec};
  return r;
}

EngineOptions tiny_options() {
  EngineOptions o;
  o.model = testing::synthetic_model_dir("tiny-v4f");
  o.kv_blocks = 32;
  o.max_num_seqs = 8;
  return o;
}

chat::ParsedOutput parse(const std::shared_ptr<const Tokenizer>& tokenizer, const std::vector<int32_t>& ids) {
  auto parser = chat::OutputParser::create(tokenizer, chat::ParserOptions{});
  EXPECT_TRUE(parser.is_ok()) << parser.status().to_string();
  std::vector<chat::ChatEvent> events;
  for (int32_t id : ids) parser->push(id, &events);
  if (!parser->is_done()) parser->finish(chat::FinishReason::kLength, &events);
  return parser->output();
}

void expect_valid_arguments(const chat::ToolCall& call) {
  const Json args = Json::parse(call.arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.arguments;
  if (call.name == "get_weather") {
    ASSERT_EQ(args.size(), 2u) << call.arguments;
    const std::string city = args.at("city").get<std::string>();
    EXPECT_TRUE(city == "Paris" || city == "Oslo" || city == "Lima") << call.arguments;
    // JSON schema counts 6.0 as an integer, and so does the grammar (draft 6 and later).
    ASSERT_TRUE(args.at("days").is_number()) << call.arguments;
    const double days = args.at("days").get<double>();
    EXPECT_EQ(days, std::floor(days)) << call.arguments;
    EXPECT_GE(days, 1);
    EXPECT_LE(days, 7);
  } else {
    ASSERT_EQ(call.name, "get_time");
    ASSERT_EQ(args.size(), 1u) << call.arguments;
    EXPECT_TRUE(args.at("utc").is_boolean()) << call.arguments;
  }
}

TEST(EngineToolCallTest, RequiredAndNamedToolCallsComeOutParsedWithSchemaValidArguments) {
  auto engine = Engine::open(tiny_options());
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const Json required{{"required", true}, {"allow_content", false}, {"parallel_calls", false}};
  std::vector<Request> reqs;
  for (uint64_t seed = 1; seed <= 4; ++seed) reqs.push_back(tool_request(spec(required), seed));
  for (uint64_t seed = 1; seed <= 2; ++seed) reqs.push_back(tool_request(spec(required, {"get_time"}), seed));
  auto outs = (*engine)->generate(reqs);
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  const auto tokenizer = (*engine)->tokenizer();
  for (size_t i = 0; i < outs->size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const GenerateOutput::Sequence& s = (*outs)[i].sequences.at(0);
    EXPECT_EQ(s.finish, FinishReason::kStop) << s.text;
    ASSERT_FALSE(s.token_ids.empty());
    EXPECT_EQ(s.token_ids.back(), tokenizer->eos_id());
    const std::string markup = tokenizer->decode(s.token_ids, /*skip_special=*/false);
    EXPECT_TRUE(markup.starts_with("\n\n<" + kD + "tool_calls>\n<" + kD + "invoke name=\"")) << markup;
    const chat::ParsedOutput parsed = parse(tokenizer, s.token_ids);
    EXPECT_EQ(parsed.error, "");
    ASSERT_TRUE(parsed.finish_reason.has_value());
    EXPECT_EQ(*parsed.finish_reason, chat::FinishReason::kToolCalls) << markup;
    EXPECT_EQ(parsed.content, "");
    ASSERT_EQ(parsed.tool_calls.size(), 1u) << markup;
    if (i >= 4) {
      EXPECT_EQ(parsed.tool_calls[0].name, "get_time");  // the named-tool case
    }
    expect_valid_arguments(parsed.tool_calls[0]);
  }
}

TEST(EngineToolCallTest, UnconstrainedRandomModelDoesNotCallTools) {
  // The control for the test above: without the grammar the same requests produce no tool call,
  // so the calls there come from the constraint.
  auto engine = Engine::open(tiny_options());
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  Request r = tool_request(spec(Json::object()), 1);
  r.structured_output.reset();
  r.sampling.max_tokens = 40;
  auto outs = (*engine)->generate({r});
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  EXPECT_TRUE(parse((*engine)->tokenizer(), (*outs)[0].sequences[0].token_ids).tool_calls.empty());
}

class DsmlSpecTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = Tokenizer::load_default();
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    tokenizer_ = *t;
    auto c = engine::StructuredOutputCompiler::create(tokenizer_, 129280);
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    compiler_ = std::move(c).value().release();
  }
  static void TearDownTestSuite() { delete compiler_; }

  Result<std::shared_ptr<const engine::CompiledStructuredOutput>> compile(const std::string& s) {
    return compiler_->compile(StructuredOutput{StructuredOutput::Kind::kDsmlToolCalls, s});
  }
  // Whether the matcher accepts all of `text` (special tokens matched) followed by EOS.
  bool accepts(const std::string& dsml_spec, const std::string& text) {
    auto compiled = compile(dsml_spec);
    EXPECT_TRUE(compiled.is_ok()) << compiled.status().to_string();
    if (!compiled.is_ok()) return false;
    auto matcher = compiler_->make_matcher(*compiled);
    std::vector<int32_t> ids = tokenizer_->encode(text, true);
    ids.push_back(tokenizer_->eos_id());
    for (int32_t id : ids) {
      if (!matcher->accept(id)) return false;
    }
    return matcher->is_terminated();
  }

  static inline std::shared_ptr<const Tokenizer> tokenizer_;
  static inline engine::StructuredOutputCompiler* compiler_ = nullptr;
};

std::string invoke(const std::string& name, const std::string& params, const std::string& tag = "invoke") {
  return "<" + kD + tag + " name=\"" + name + "\">\n" + params + "\n</" + kD + tag + ">";
}
std::string param(const std::string& key, bool raw, const std::string& value, const std::string& tag = "parameter") {
  return "<" + kD + tag + " name=\"" + key + "\" string=\"" + (raw ? "true" : "false") + "\">" + value + "</" + kD +
         tag + ">";
}
std::string weather(const std::string& ptag = "parameter", const std::string& itag = "invoke") {
  return invoke("get_weather", param("city", true, "Oslo", ptag) + "\n" + param("days", false, "3", ptag), itag);
}
std::string clock() { return invoke("get_time", param("utc", false, "true")); }
std::string block(const std::string& invokes, const std::string& tag = "tool_calls") {
  return "\n\n<" + kD + tag + ">\n" + invokes + "\n</" + kD + tag + ">";
}

TEST_F(DsmlSpecTest, EachFlagChangesWhatIsAccepted) {
  const Json strict{{"required", true}, {"allow_content", false}, {"parallel_calls", false}};
  EXPECT_TRUE(accepts(spec(strict), block(weather())));
  EXPECT_TRUE(accepts(spec(strict), block(clock())));
  EXPECT_FALSE(accepts(spec(strict), "Sure." + block(weather())));          // allow_content false
  EXPECT_FALSE(accepts(spec(strict), block(weather() + "\n" + clock())));   // parallel_calls false
  EXPECT_FALSE(accepts(spec(strict), "No tools needed."));                   // required
  EXPECT_FALSE(accepts(spec(strict), ""));
  EXPECT_FALSE(accepts(spec(strict, {"get_time"}), block(weather())));       // named: the other tool
  EXPECT_FALSE(accepts(spec(strict), block(invoke("get_weather", param("city", true, "Rome") + "\n" +
                                                                    param("days", false, "3")))));
  EXPECT_FALSE(accepts(spec(strict), "reasoning</think>" + block(weather())));  // thinking false

  // Defaults: optional block, content allowed, parallel calls.
  EXPECT_TRUE(accepts(spec(Json::object()), "No tools needed."));
  EXPECT_TRUE(accepts(spec(Json::object()), "Sure." + block(weather() + "\n" + clock())));

  Json thinking = strict;
  thinking["thinking"] = true;
  EXPECT_TRUE(accepts(spec(thinking), "The user wants weather.</think>" + block(weather())));
  EXPECT_FALSE(accepts(spec(thinking), block(weather())));
  EXPECT_FALSE(accepts(spec(thinking), "The user wants weather.</think>Answer." + block(weather())));

  const std::string reversed =
      block(invoke("get_weather", param("days", false, "3") + "\n" + param("city", true, "Oslo")));
  EXPECT_TRUE(accepts(spec(strict), reversed));
  Json ordered = strict;
  ordered["any_order"] = false;
  EXPECT_FALSE(accepts(spec(ordered), reversed));
  EXPECT_TRUE(accepts(spec(ordered), block(weather())));

  Json v41 = strict;
  v41["v41_tags"] = true;
  EXPECT_TRUE(accepts(spec(v41), block(weather(" parameter", " invoke"), " calls")));
  EXPECT_FALSE(accepts(spec(v41), block(weather())));
  EXPECT_FALSE(accepts(spec(strict), block(weather(" parameter", " invoke"), " calls")));
}

TEST_F(DsmlSpecTest, BadSpecsNameStructuredOutputAndTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "JSON object"},
      {R"([1])", "JSON object"},
      {R"({"required": true})", "'tools'"},
      {R"({"tools": []})", "'tools'"},
      {R"({"tools": [{"parameters": {}}]})", "'tools[0].name'"},
      {R"({"tools": [{"name": 3}]})", "'tools[0].name'"},
      {R"({"tools": [{"name": "f", "parameters": "x"}]})", "'tools[0].parameters'"},
      {R"({"tools": [{"name": "f", "description": "x"}]})", "'tools[0].description'"},
      {R"({"tools": [{"name": "f"}], "required": "yes"})", "'required'"},
      {R"({"tools": [{"name": "f"}], "requierd": true})", "'requierd'"},
      {R"({"tools": [{"name": "f", "parameters": {"anyOf": [{}]}}]})", "tool 'f'"},
  };
  for (const auto& [text, field] : cases) {
    auto r = compile(text);
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text << ": " << r.status().to_string();
    EXPECT_NE(r.status().message().find("structured_output"), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find(field), std::string::npos) << text << ": " << r.status().to_string();
  }
  EXPECT_TRUE(compile(R"({"tools": [{"name": "f"}]})").is_ok());  // parameters default to {}
}

TEST(EngineToolCallSubmitTest, BadSpecIsRejectedAtSubmit) {
  auto engine = Engine::open(tiny_options());
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  auto r = (*engine)->submit(tool_request(R"({"tools": [{"name": "f"}], "parallel_calls": 1})", 1),
                             [](const TokenEvent&) {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("structured_output"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("'parallel_calls'"), std::string::npos) << r.status().to_string();
}

// Requests asking for the same structured output share one compiled grammar (its state masks are
// built once, not per request); a different spec or kind compiles its own, and a bad spec fails
// every time it is asked for (errors are not cached).
TEST_F(DsmlSpecTest, EqualSpecsShareOneCompiledGrammar) {
  using K = StructuredOutput::Kind;
  auto a = compiler_->compile(StructuredOutput{K::kRegex, "[a-z ]{1,40}"});
  auto b = compiler_->compile(StructuredOutput{K::kRegex, "[a-z ]{1,40}"});
  auto c = compiler_->compile(StructuredOutput{K::kRegex, "[a-z ]{1,41}"});
  // The same text as a regex (it matches itself literally) and as a grammar: two kinds, two entries.
  auto d = compiler_->compile(StructuredOutput{K::kEbnf, R"(root ::= "a")"});
  auto e = compiler_->compile(StructuredOutput{K::kRegex, R"(root ::= "a")"});
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok()) << a.status().to_string();
  ASSERT_TRUE(d.is_ok() && e.is_ok()) << d.status().to_string() << " " << e.status().to_string();
  EXPECT_EQ(a->get(), b->get());
  EXPECT_NE(a->get(), c->get());
  EXPECT_NE(d->get(), e->get());
  for (int i = 0; i < 2; ++i) {
    auto bad = compiler_->compile(StructuredOutput{K::kRegex, "[a-z"});
    ASSERT_FALSE(bad.is_ok());
    EXPECT_NE(bad.status().message().find("structured_output"), std::string::npos) << bad.status().to_string();
  }
  // Two matchers of the shared grammar keep their own state.
  auto m1 = compiler_->make_matcher(*a);
  auto m2 = compiler_->make_matcher(*a);
  const std::vector<int32_t> ids = tokenizer_->encode("abc", false);
  for (int32_t id : ids) ASSERT_TRUE(m1->accept(id));
  std::vector<uint32_t> w1((129280 + 31) / 32), w2(w1.size());
  ASSERT_TRUE(m1->fill_bitmask(w1).is_ok());
  ASSERT_TRUE(m2->fill_bitmask(w2).is_ok());
  const int32_t eos = tokenizer_->eos_id();
  EXPECT_TRUE((w1[eos >> 5] >> (eos & 31)) & 1u);   // "abc" may end
  EXPECT_FALSE((w2[eos >> 5] >> (eos & 31)) & 1u);  // nothing read yet: it may not
}

}  // namespace
}  // namespace deepinfer
