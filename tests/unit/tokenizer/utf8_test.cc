// UTF-8 helpers behind decode() and the streaming detokenizer: maximal-subpart replacement and
// the held-back incomplete tail.
#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

std::string lossy(std::string_view s, bool keep_tail = false) {
  std::string out;
  append_utf8_lossy(out, s, keep_tail);
  return out;
}

const std::string kFffd = "\xEF\xBF\xBD";

TEST(TokenizerUtf8Test, ValidTextIsUnchanged) {
  const std::string text = "aé€😀中\n";
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(lossy(text), text);
}

TEST(TokenizerUtf8Test, MaximalSubpartsBecomeOneReplacementEach) {
  EXPECT_EQ(lossy("a\xFF"
                  "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(lossy("\x80\x80"), kFffd + kFffd);  // lone continuation bytes
  EXPECT_EQ(lossy("\xE2\x82"
                  "A"),
            kFffd + "A");  // truncated € then ASCII
  EXPECT_EQ(lossy("\xF0\x9F\x98"
                  "\xE2\x82\xAC"),
            kFffd + "€");                                               // truncated emoji then €
  EXPECT_EQ(lossy("\xC0\xAF"), kFffd + kFffd);                          // overlong '/'
  EXPECT_EQ(lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // surrogate U+D800
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));
}

TEST(TokenizerUtf8Test, IncompleteTail) {
  EXPECT_EQ(incomplete_tail_length(""), 0u);
  EXPECT_EQ(incomplete_tail_length("abc"), 0u);
  EXPECT_EQ(incomplete_tail_length("a\xE2"), 1u);
  EXPECT_EQ(incomplete_tail_length("a\xE2\x82"), 2u);
  EXPECT_EQ(incomplete_tail_length("a\xE2\x82\xAC"), 0u);
  EXPECT_EQ(incomplete_tail_length("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_tail_length("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_tail_length("\xE2\x28"), 0u);  // broken, not incomplete
  EXPECT_EQ(incomplete_tail_length("\x80"), 0u);
  EXPECT_EQ(incomplete_tail_length("\xED\xA0"), 0u);  // would be a surrogate
  EXPECT_EQ(lossy("ab\xE2\x82", /*keep_tail=*/true), "ab\xE2\x82");
  EXPECT_EQ(lossy("\xFF"
                  "ab\xE2\x82",
                  /*keep_tail=*/true),
            kFffd + "ab\xE2\x82");
  EXPECT_EQ(lossy("ab\xE2\x82"), "ab" + kFffd);
}

TEST(TokenizerByteLevelTest, GptTwoAlphabet) {
  EXPECT_EQ(byte_to_code_point(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_to_code_point('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_to_code_point('A'), static_cast<uint32_t>('A'));
  EXPECT_EQ(byte_to_code_point(0xAD), 0x143u);  // the last shifted byte
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  ASSERT_TRUE(byte_level_to_bytes(bytes_to_byte_level(all), &back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(byte_level_to_bytes("中", &back));  // not in the alphabet
  EXPECT_FALSE(byte_level_to_bytes("\xFF", &back));
}

}  // namespace
}  // namespace deepinfer::tokenizer
