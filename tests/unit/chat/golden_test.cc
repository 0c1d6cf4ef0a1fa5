// The four official DeepSeek-V4 encoder vectors (tests/fixtures/encoding), driven the way the
// official test drives them: render_text must match byte for byte, and the structural ids must
// equal the reference tokenization of that text (specials matched) and decode back to it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "deepinfer/chat.h"
#include "fake_tokenizer.h"

namespace deepinfer::chat {
namespace {

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(DI_SOURCE_DIR) + "/tests/fixtures/encoding/" + name,
                   std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct GoldenCase {
  int number;
  ThinkingMode mode;
};

class ChatGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(ChatGoldenTest, RendersExactTextAndIds) {
  const GoldenCase& c = GetParam();
  std::string input = read_fixture("test_input_" + std::to_string(c.number) + ".json");
  std::string expected = read_fixture("test_output_" + std::to_string(c.number) + ".txt");
  auto parsed = parse_chat_json(input, ModelFamily::kV4);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  RenderOptions options;
  options.thinking_mode = c.mode;
  auto text = render_text(parsed->messages, options);
  ASSERT_TRUE(text.is_ok()) << text.status().to_string();
  EXPECT_EQ(*text, expected);

  testing::FakeTokenizer tokenizer({"\n\n", "<tool_result>", "name=\"", "parameter", "invoke"});
  auto ids = render_ids(parsed->messages, options, tokenizer);
  ASSERT_TRUE(ids.is_ok()) << ids.status().to_string();
  EXPECT_EQ(*ids, tokenizer.ids(expected));
  EXPECT_EQ(tokenizer.decode(*ids), expected);
}

INSTANTIATE_TEST_SUITE_P(Official, ChatGoldenTest,
                         ::testing::Values(GoldenCase{1, ThinkingMode::kThinking},
                                           GoldenCase{2, ThinkingMode::kThinking},
                                           GoldenCase{3, ThinkingMode::kThinking},
                                           GoldenCase{4, ThinkingMode::kChat}),
                         [](const auto& info) { return "case" + std::to_string(info.param.number); });

}  // namespace
}  // namespace deepinfer::chat
