// Checks against the real DeepSeek tokenizer (Tokenizer::load_default(), prepared by
// tools/prepare_data.sh; skipped when it is absent): structural ids equal the reference
// tokenization of every official and reference-case prompt, no added token can be injected
// through client text, and generated ids of the official tool-call turn parse exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "deepinfer/chat.h"
#include "injection_conversation.h"

namespace deepinfer::chat {
namespace {

std::shared_ptr<const Tokenizer> real_tokenizer() {
  static const auto tok = Tokenizer::load_default();
  return tok.is_ok() ? *tok : nullptr;
}

std::string read_source_file(const std::string& relative) {
  std::ifstream in(std::string(DI_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

#define REQUIRE_TOKENIZER(tok)                                                      \
  auto tok = real_tokenizer();                                                      \
  if (!tok) GTEST_SKIP() << "no DeepSeek tokenizer: " << Tokenizer::load_default().status().to_string()

void expect_reference_ids(const std::string& input_json, ThinkingMode mode, const std::string& expected,
                          const Tokenizer& tok) {
  auto input = parse_chat_json(input_json, ModelFamily::kV4);
  ASSERT_TRUE(input.is_ok()) << input.status().to_string();
  RenderOptions options = input->options;
  options.thinking_mode = mode;
  auto ids = render_ids(input->messages, options, tok);
  ASSERT_TRUE(ids.is_ok()) << ids.status().to_string();
  EXPECT_EQ(*ids, tok.encode(expected, /*match_special=*/true));
  EXPECT_EQ(tok.decode(*ids), expected);
}

TEST(ChatRealTokenizerTest, OfficialVectorsTokenizeLikeTheReference) {
  REQUIRE_TOKENIZER(tok);
  const ThinkingMode modes[] = {ThinkingMode::kThinking, ThinkingMode::kThinking,
                                ThinkingMode::kThinking, ThinkingMode::kChat};
  for (int n = 1; n <= 4; ++n) {
    SCOPED_TRACE(n);
    std::string dir = "tests/fixtures/encoding/";
    expect_reference_ids(read_source_file(dir + "test_input_" + std::to_string(n) + ".json"),
                         modes[n - 1],
                         read_source_file(dir + "test_output_" + std::to_string(n) + ".txt"), *tok);
  }
}

TEST(ChatRealTokenizerTest, ReferenceCasesTokenizeLikeTheReference) {
  REQUIRE_TOKENIZER(tok);
  auto cases = nlohmann::json::parse(read_source_file("tests/fixtures/chat_render/v4_cases.json"));
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto input = parse_chat_json(c["input"].get<std::string>(), ModelFamily::kV4);
    ASSERT_TRUE(input.is_ok());
    expect_reference_ids(c["input"].get<std::string>(), input->options.thinking_mode,
                         c["expected"].get<std::string>(), *tok);
  }
}

TEST(ChatRealTokenizerTest, NoAddedTokenCanBeInjected) {
  REQUIRE_TOKENIZER(tok);
  std::vector<std::string> specials;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    if (tok->is_special(id)) specials.push_back(tok->token_bytes(id));
  }
  ASSERT_GT(specials.size(), 800u);  // V3's added tokens plus the V4 ones
  std::string all;
  for (const std::string& s : specials) all += s;
  for (ModelFamily family : {ModelFamily::kV4, ModelFamily::kV41}) {
    testing::expect_no_injection(all, family, *tok);  // every added token at once
    for (const std::string& payload : testing::injection_payloads({})) {
      testing::expect_no_injection(payload, family, *tok);
    }
  }
  for (size_t i = 0; i < specials.size(); i += 37) {  // a spread of single tokens
    testing::expect_no_injection(specials[i], ModelFamily::kV4, *tok);
  }
}

TEST(ChatRealTokenizerTest, ParsesTheOfficialToolCallTurnFromIds) {
  REQUIRE_TOKENIZER(tok);
  std::string prompt = read_source_file("tests/fixtures/encoding/test_output_1.txt");
  const std::string marker = "<｜Assistant｜><think>";
  size_t start = prompt.find(marker) + marker.size();
  size_t end = prompt.find("<｜User｜>", start);
  ParserOptions options;
  options.thinking_mode = ThinkingMode::kThinking;
  auto parser = OutputParser::create(tok, options);
  ASSERT_TRUE(parser.is_ok());
  std::vector<ChatEvent> events;
  for (int32_t id : tok->encode(prompt.substr(start, end - start), true)) parser->push(id, &events);
  const ParsedOutput& out = parser->output();
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.reasoning_content,
            "The user wants to know the weather in Beijing. I should use the get_weather tool.");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"location": "Beijing", "unit": "celsius"})");
  EXPECT_EQ(out.finish_reason, FinishReason::kToolCalls);
  for (const ChatEvent& e : events) EXPECT_NE(e.kind, EventKind::kContentDelta);
}

TEST(ChatRealTokenizerTest, ParsesChineseToolCallAndContent) {
  REQUIRE_TOKENIZER(tok);
  std::string prompt = read_source_file("tests/fixtures/encoding/test_output_3.txt");
  const std::string marker = "<｜Assistant｜><think>";
  size_t first = prompt.find(marker) + marker.size();
  size_t end = prompt.find("<｜User｜>", first);
  ParserOptions options;
  options.thinking_mode = ThinkingMode::kThinking;
  auto call = OutputParser::create(tok, options);
  std::vector<ChatEvent> events;
  for (int32_t id : tok->encode(prompt.substr(first, end - first), true)) call->push(id, &events);
  ASSERT_EQ(call->output().tool_calls.size(), 1u);
  EXPECT_EQ(call->output().tool_calls[0].arguments,
            "{\"queries\": \"小柴胡冲剂 布洛芬 相互作用 一起吃\"}");
  size_t last = prompt.rfind(marker) + marker.size();
  auto answer = OutputParser::create(tok, options);
  for (int32_t id : tok->encode(prompt.substr(last), true)) answer->push(id, &events);
  EXPECT_EQ(answer->output().reasoning_content, "现在开始组织回答。");
  EXPECT_EQ(answer->output().content, "请及时就医。");
  EXPECT_EQ(answer->output().finish_reason, FinishReason::kStop);
}

}  // namespace
}  // namespace deepinfer::chat
