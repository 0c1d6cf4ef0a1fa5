// IncrementalDetokenizer on a byte-per-token synthetic vocabulary: multi-byte characters split
// across tokens, emoji, invalid bytes, and a randomized check that no delta is ever broken UTF-8
// and that the deltas add up to the lossy decoding of all bytes.
#include <gtest/gtest.h>

#include <random>

#include "deepinfer/tokenizer.h"
#include "synthetic_tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

using testing_tokenizer::make_tokenizer_json;
using testing_tokenizer::SyntheticSpec;
using testing_tokenizer::write_temp_file;

const std::string kFffd = "\xEF\xBF\xBD";

std::shared_ptr<const Tokenizer> byte_tokenizer() {
  SyntheticSpec spec;
  spec.merges = {{"\xE2", "\x82"}};  // id 256: the first two bytes of "€" in one token
  spec.added = {{300, "<s>"}};
  auto tok = Tokenizer::load(write_temp_file("tokenizer.json", make_tokenizer_json(spec).dump()));
  EXPECT_TRUE(tok.is_ok()) << tok.status().to_string();
  return *tok;
}

std::vector<std::string> stream(const std::shared_ptr<const Tokenizer>& tok,
                                const std::vector<int32_t>& ids, bool skip_special = false) {
  IncrementalDetokenizer detok(tok, skip_special);
  std::vector<std::string> deltas;
  for (int32_t id : ids) deltas.push_back(detok.push(id));
  deltas.push_back(detok.flush());
  return deltas;
}

std::vector<int32_t> byte_ids(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(TokenizerStreamTest, HoldsBackSplitCharacters) {
  auto tok = byte_tokenizer();
  // "é" = C3 A9, "😀" = F0 9F 98 80, split one byte per token.
  EXPECT_EQ(stream(tok, byte_ids("aé😀b")),
            (std::vector<std::string>{"a", "", "é", "", "", "", "😀", "b", ""}));
  // A token holding the first two bytes of "€", then its last byte.
  EXPECT_EQ(stream(tok, {256, 0xAC, '!'}), (std::vector<std::string>{"", "€", "!", ""}));
}

TEST(TokenizerStreamTest, InvalidBytesBecomeReplacementCharacters) {
  auto tok = byte_tokenizer();
  EXPECT_EQ(stream(tok, {0xFF, 'a'}), (std::vector<std::string>{kFffd, "a", ""}));
  EXPECT_EQ(stream(tok, {0x80}), (std::vector<std::string>{kFffd, ""}));
  // A started sequence broken by ASCII: replaced once the ASCII arrives.
  EXPECT_EQ(stream(tok, {256, 'A'}), (std::vector<std::string>{"", kFffd + "A", ""}));
  // Still incomplete at the end: flush() replaces it.
  EXPECT_EQ(stream(tok, {'x', 0xF0, 0x9F}), (std::vector<std::string>{"x", "", "", kFffd}));
}

TEST(TokenizerStreamTest, SkipsSpecialTokensWhenAsked) {
  auto tok = byte_tokenizer();
  EXPECT_EQ(stream(tok, {'a', 300, 'b'}), (std::vector<std::string>{"a", "<s>", "b", ""}));
  EXPECT_EQ(stream(tok, {'a', 300, 'b'}, true), (std::vector<std::string>{"a", "", "b", ""}));
}

TEST(TokenizerStreamTest, RandomBytesNeverYieldBrokenUtf8) {
  auto tok = byte_tokenizer();
  std::mt19937 rng(7);
  // Biased towards bytes that form (or almost form) multi-byte sequences.
  const std::vector<int32_t> pool = {'a',  ' ',  0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F,
                                     0x98, 0x80, 0xFF, 0xED, 0xA0, 0xC0, 256,  300};
  for (int round = 0; round < 2000; ++round) {
    std::vector<int32_t> ids(1 + rng() % 24);
    for (auto& id : ids) id = pool[rng() % pool.size()];
    std::string all;
    for (const std::string& delta : stream(tok, ids)) {
      ASSERT_TRUE(tokenizer::is_valid_utf8(delta)) << "round " << round;
      all += delta;
    }
    std::string raw;
    for (int32_t id : ids) raw += tok->token_bytes(id);
    std::string expected;
    tokenizer::append_utf8_lossy(expected, raw, /*keep_incomplete_tail=*/false);
    ASSERT_EQ(all, expected) << "round " << round;
  }
}

}  // namespace
}  // namespace deepinfer
