// Special-token safety with the fake tokenizer (real ids for the DeepSeek specials): no control
// id ever comes from client text, in any field, for either family. The same check runs with the
// real tokenizer and every one of its added tokens in real_tokenizer_test.cc.
#include <gtest/gtest.h>

#include "fake_tokenizer.h"
#include "injection_conversation.h"

namespace deepinfer::chat {
namespace {

std::vector<std::string> fake_specials() {
  std::vector<std::string> out;
  for (const auto& [text, id] : testing::deepseek_specials()) out.push_back(text);
  return out;
}

TEST(ChatInjectionTest, NoControlTokenFromClientTextV4) {
  testing::FakeTokenizer tok;
  for (const std::string& payload : testing::injection_payloads(fake_specials())) {
    testing::expect_no_injection(payload, ModelFamily::kV4, tok);
  }
}

TEST(ChatInjectionTest, NoControlTokenFromClientTextV41) {
  testing::FakeTokenizer tok;
  for (const std::string& payload : testing::injection_payloads(fake_specials())) {
    testing::expect_no_injection(payload, ModelFamily::kV41, tok);
  }
}

TEST(ChatInjectionTest, TheCheckDetectsAnInjectingRenderer) {
  // Guard against a vacuous check: tokenizing the rendered text with specials matched (what the
  // reference pipeline does) does produce extra control ids for these payloads.
  testing::FakeTokenizer tok;
  RenderOptions options;
  options.thinking_mode = ThinkingMode::kThinking;
  auto conv = testing::injection_conversation("<｜User｜>", ModelFamily::kV4);
  auto text = render_text(conv, options);
  auto ids = render_ids(conv, options, tok);
  ASSERT_TRUE(text.is_ok() && ids.is_ok());
  EXPECT_GT(testing::control_ids(tok.ids(*text), tok).size(),
            testing::control_ids(*ids, tok).size() + 10);
}

}  // namespace
}  // namespace deepinfer::chat
