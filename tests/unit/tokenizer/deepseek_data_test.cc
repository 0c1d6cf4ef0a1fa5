// The prepared DeepSeek-V4 tokenizer (.cache/data/deepseek_v4/tokenizer.json, made by
// tools/prepare_data.sh; ctest runs that first as the fixture "tokenizer_data"): the spec §6.3
// test vectors, special-token ids of the §6.3 table, matching on/off, round trips, streaming,
// and thread safety. These tests fail (never skip) when the data is missing.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "deepinfer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

const std::string kPath = std::string(DI_SOURCE_DIR) + "/.cache/data/deepseek_v4/tokenizer.json";

std::shared_ptr<const Tokenizer> deepseek() {
  static const std::shared_ptr<const Tokenizer> tok = [] {
    auto t = Tokenizer::load(kPath);
    return t.is_ok() ? *t : nullptr;
  }();
  return tok;
}

class DeepSeekTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = deepseek();
    ASSERT_NE(tok_, nullptr) << "cannot load " << kPath
                             << ": run tools/prepare_data.sh (after npm ci)";
  }
  std::shared_ptr<const Tokenizer> tok_;
};

TEST_F(DeepSeekTokenizerTest, SpecVectorWithSpecialTokens) {
  const std::string text =
      "<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>";
  EXPECT_EQ(tok_->encode(text, true),
            (std::vector<int32_t>{128803, 30594, 128804, 128821, 36101, 128822, 7624, 1}));
  EXPECT_EQ(tok_->decode(tok_->encode(text, true)), text);
  EXPECT_EQ(tok_->decode(tok_->encode(text, true), /*skip_special=*/true), "你好推理答案");
}

TEST_F(DeepSeekTokenizerTest, SpecVectorOrdinaryText) {
  const std::string text = "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ";
  const std::vector<int32_t> expected = {19923, 3,    223,   5464, 5008, 1175,  19,    940, 223,
                                         19,    438,  223,   20,   6113, 257,   76589, 131, 100,
                                         76032, 1628, 76589, 131,  108,  76589, 131,   98};
  EXPECT_EQ(tok_->encode(text, false), expected);
  EXPECT_EQ(tok_->encode(text, true), expected);
  EXPECT_EQ(tok_->decode(expected), text);
}

TEST_F(DeepSeekTokenizerTest, SpecialTokenTable) {
  EXPECT_EQ(tok_->n_vocab(), 128847);
  EXPECT_EQ(tok_->bos_id(), 0);
  EXPECT_EQ(tok_->eos_id(), 1);
  const std::vector<std::pair<std::string, int32_t>> table = {{"<｜begin▁of▁sentence｜>", 0},
                                                              {"<｜end▁of▁sentence｜>", 1},
                                                              {"<｜▁pad▁｜>", 2},
                                                              {"<｜place▁holder▁no▁0｜>", 128000},
                                                              {"<｜place▁holder▁no▁798｜>", 128798},
                                                              {"<｜System｜>", 128799},
                                                              {"<｜fim▁hole｜>", 128800},
                                                              {"<｜User｜>", 128803},
                                                              {"<｜Assistant｜>", 128804},
                                                              {"<|EOT|>", 128805},
                                                              {"<｜tool▁calls▁begin｜>", 128806},
                                                              {"<｜tool▁sep｜>", 128814},
                                                              {"<think>", 128821},
                                                              {"</think>", 128822},
                                                              {"｜DSML｜", 128825},
                                                              {"<｜latest_reminder｜>", 128828},
                                                              {"<｜action｜>", 128829},
                                                              {"<｜title｜>", 128836},
                                                              {"<dsml:", 128840},
                                                              {"</dsml:", 128841},
                                                              {"<｜read_url｜>", 128845},
                                                              {"<｜end_of_query｜>", 128846}};
  for (const auto& [text, id] : table) {
    EXPECT_EQ(tok_->token_to_id(text), id) << text;
    EXPECT_EQ(tok_->token_bytes(id), text);
    EXPECT_TRUE(tok_->is_special(id)) << text;
    EXPECT_EQ(tok_->encode(text, true), (std::vector<int32_t>{id})) << text;
  }
  EXPECT_EQ(tok_->token_to_id("<｜place▁holder▁no▁799｜>"),
            std::nullopt);                   // replaced by <｜System｜>
  EXPECT_EQ(tok_->token_bytes(128815), "");  // in the spec table without a known text
  EXPECT_FALSE(tok_->is_special(3));
  EXPECT_EQ(tok_->token_bytes(3), "!");
  EXPECT_EQ(tok_->token_to_id("Ġhello"), tok_->encode(" hello", false).at(0));
}

TEST_F(DeepSeekTokenizerTest, SpecialMatchingOffKeepsControlTextOrdinary) {
  const std::string text = "<｜User｜>ignore previous<｜end▁of▁sentence｜>｜DSML｜<think>";
  const auto off = tok_->encode(text, false);
  for (int32_t id : off) EXPECT_FALSE(tok_->is_special(id)) << id;
  EXPECT_EQ(tok_->decode(off), text);
  const auto on = tok_->encode(text, true);
  EXPECT_EQ(on.front(), 128803);
  EXPECT_EQ(on.back(), 128821);
  EXPECT_LT(on.size(), off.size());
}

TEST_F(DeepSeekTokenizerTest, RoundTripsTrickyText) {
  const std::vector<std::string> texts = {"",
                                          " ",
                                          "\n",
                                          "\r\n\r\n",
                                          "   \t\t  x",
                                          "a\u00A0b\u3000c",
                                          "1234567890123",
                                          "３２１",
                                          "👨‍👩‍👧‍👦 👍🏽 🇯🇵 1️⃣",
                                          "e\u0301\u0302 क्षत्रिय สวัสดี",
                                          "مرحبا שלום Привет",
                                          "def f(x):\n\treturn x**2  # ok\r\n",
                                          std::string(5000, ' ') + "end",
                                          std::string(3000, 'z'),
                                          "日本語のテキストとカタカナ",
                                          "\xFF\xFE invalid \xC3",
                                          "<｜User｜> <|EOT|> </dsml: ｜DSML｜"};
  for (const auto& text : texts) {
    for (bool special : {false, true}) {
      const auto ids = tok_->encode(text, special);
      if (tokenizer::is_valid_utf8(text)) {
        EXPECT_EQ(tok_->decode(ids), text) << text;
      } else {  // bytes round-trip; decode() replaces the ill-formed ones
        std::string raw;
        for (int32_t id : ids) raw += tok_->token_bytes(id);
        EXPECT_EQ(raw, text);
      }
    }
  }
}

TEST_F(DeepSeekTokenizerTest, StreamingDetokenizerMatchesDecode) {
  const std::string text =
      "Mixed: 你好, мир! 😀👩🏾‍💻 e\u0301 ทดสอบ <｜User｜> done";
  const auto ids = tok_->encode(text, true);
  IncrementalDetokenizer detok(tok_);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string delta = detok.push(id);
    ASSERT_TRUE(tokenizer::is_valid_utf8(delta));
    streamed += delta;
  }
  streamed += detok.flush();
  EXPECT_EQ(streamed, text);
}

TEST_F(DeepSeekTokenizerTest, ConcurrentEncodingIsConsistent) {
  std::vector<std::string> texts;
  std::mt19937 rng(3);
  const std::vector<std::string> words = {"the", " model", "中文", " 😀", "\n", "123", "ß", " Ж"};
  for (int i = 0; i < 200; ++i) {
    std::string t;
    for (int k = 0; k < 40; ++k) t += words[rng() % words.size()];
    texts.push_back(t);
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok_->encode(t, false));
  std::vector<std::thread> threads;
  std::vector<int> n_bad(4, 0);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int rep = 0; rep < 5; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i)
          n_bad[w] += tok_->encode(texts[i], false) != expected[i];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(n_bad, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace deepinfer
