// DSML tool-call grammar (DeepSeek V4 §6.5): exact markup with the ｜DSML｜ special token,
// per-tool parameter names, required parameters, raw vs JSON values, V4.1 tags, reasoning.
#include <gtest/gtest.h>

#include "grammar/dsml.h"
#include "test_vocab.h"

namespace deepinfer::grammar {
namespace {

using testing::small_vocab;

const std::string kD = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";

std::vector<DsmlTool> tools() {
  return {
      {"get_weather", Json::parse(R"({"type":"object","properties":{
          "city":{"type":"string","minLength":1},
          "days":{"type":"integer","minimum":1,"maximum":7},
          "unit":{"enum":["c","f"]}},"required":["city"],"additionalProperties":false})")},
      {"search", Json::parse(R"({"type":"object","properties":{
          "query":{"type":"string"},
          "filters":{"type":"object","properties":{"lang":{"type":"string"}},"additionalProperties":false}},
          "required":["query"]})")},
  };
}

std::shared_ptr<const CompiledGrammar> grammar(const DsmlOptions& o = {}) {
  auto g = dsml_tool_call_grammar(tools(), o, *small_vocab().vocab);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  auto c = CompiledGrammar::compile(std::move(*g), small_vocab().vocab);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return *c;
}

std::string param(const std::string& key, bool is_string, const std::string& value, const std::string& tag = "parameter") {
  return "<" + kD + tag + " name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") + "\">" + value + "</" +
         kD + tag + ">";
}

std::string invoke(const std::string& name, const std::vector<std::string>& params, const std::string& tag = "invoke") {
  std::string out = "<" + kD + tag + " name=\"" + name + "\">\n";
  for (size_t i = 0; i < params.size(); ++i) out += (i ? "\n" : "") + params[i];
  return out + "\n</" + kD + tag + ">";
}

std::string block(const std::vector<std::string>& invokes, const std::string& tag = "tool_calls") {
  std::string out = "\n\n<" + kD + tag + ">\n";
  for (size_t i = 0; i < invokes.size(); ++i) out += (i ? "\n" : "") + invokes[i];
  return out + "\n</" + kD + tag + ">";
}

bool ok(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  return testing::accepts(g, small_vocab(), text);
}

TEST(DsmlTest, AcceptsWellFormedCalls) {
  auto g = grammar();
  EXPECT_TRUE(ok(g, "Let me check." + block({invoke("get_weather", {param("city", true, "北京"), param("days", false, "3")})})));
  // Parameters in any order, several invokes, JSON values with Python separators.
  EXPECT_TRUE(ok(g, block({invoke("get_weather", {param("unit", true, "c"), param("city", true, "a \"b\" <c>")}),
                           invoke("search", {param("query", true, "x"), param("filters", false, R"({"lang": "en"})")})})));
  EXPECT_TRUE(ok(g, "plain answer without tools"));
}

TEST(DsmlTest, RejectsWhatTheToolsDoNotAllow) {
  auto g = grammar();
  EXPECT_FALSE(ok(g, block({invoke("get_weather", {param("days", false, "3")})})));              // city missing
  EXPECT_FALSE(ok(g, block({invoke("get_weather", {param("city", true, "x"), param("town", true, "y")})})));
  EXPECT_FALSE(ok(g, block({invoke("get_weather", {param("city", true, "x"), param("days", false, "9")})})));
  EXPECT_FALSE(ok(g, block({invoke("get_weather", {param("city", true, "x"), param("days", true, "3")})})));
  EXPECT_FALSE(ok(g, block({invoke("get_weather", {param("city", true, "x"), param("unit", true, "k")})})));
  EXPECT_FALSE(ok(g, block({invoke("get_weather", {param("city", true, "x"), param("city", true, "y")})})));
  EXPECT_FALSE(ok(g, block({invoke("get_weather", {param("city", true, "")})})));                // minLength
  EXPECT_FALSE(ok(g, block({invoke("delete_all", {})})));
  EXPECT_FALSE(ok(g, block({invoke("search", {param("query", true, "x"), param("filters", false, R"({"lang":"en"})")})})));
  EXPECT_FALSE(ok(g, block({invoke("search", {param("query", true, "x")})}) + "trailing"));
  // The markers must be the special token: the same text spelled in ordinary bytes is only
  // content text, which this grammar (a call required, no content) does not allow.
  DsmlOptions strict;
  strict.tool_choice = DsmlToolChoice::kRequired;
  strict.allow_content = false;
  g = grammar(strict);
  std::vector<int32_t> ids = small_vocab().tokenize(block({invoke("search", {param("query", true, "x")})}));
  const int32_t dsml = small_vocab().special(kD);
  std::vector<int32_t> spelled;
  for (int32_t id : ids) {
    if (id != dsml) { spelled.push_back(id); continue; }
    for (char c : kD) spelled.push_back(1 + static_cast<uint8_t>(c));
  }
  EXPECT_TRUE(testing::accepts_tokens(g, ids, true));
  EXPECT_FALSE(testing::accepts_tokens(g, spelled, true));
}

TEST(DsmlTest, RequiredChoiceThinkingAndV41Tags) {
  DsmlOptions o;
  o.tool_choice = DsmlToolChoice::kRequired;
  o.thinking = true;
  auto g = grammar(o);
  const std::string call = block({invoke("search", {param("query", true, "q")})});
  EXPECT_TRUE(ok(g, "thinking about it</think>" + call));
  EXPECT_FALSE(ok(g, "thinking</think>no tool call"));
  EXPECT_FALSE(ok(g, call));  // reasoning must be closed first
  DsmlOptions v41;
  v41.v41_tags = true;
  auto g41 = grammar(v41);
  EXPECT_TRUE(ok(g41, block({invoke("search", {param("query", true, "q", " parameter")}, " invoke")}, " calls")));
  EXPECT_FALSE(ok(g41, call));
}

TEST(DsmlTest, ErrorsNameTheTool) {
  DsmlOptions o;
  auto bad = dsml_tool_call_grammar({{"t", Json::parse(R"({"type":"object","properties":{"a":{"not":{}}}})")}}, o,
                                    *small_vocab().vocab);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("keyword 'not'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("tool 't'"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace deepinfer::grammar
