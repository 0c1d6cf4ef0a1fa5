// Added/special tokens on a synthetic tokenizer: longest-first matching, match_special on/off,
// lstrip/rstrip, is_special, skip_special decoding, token_to_id, BOS/EOS from tokenizer_config.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "deepinfer/tokenizer.h"
#include "synthetic_tokenizer.h"

namespace deepinfer {
namespace {

using testing_tokenizer::AddedToken;
using testing_tokenizer::make_tokenizer_json;
using testing_tokenizer::SyntheticSpec;
using testing_tokenizer::write_temp_file;

constexpr int32_t kUser = 300, kUserEnd = 301, kThink = 302, kStrip = 303, kPlain = 304;

SyntheticSpec spec_with_added() {
  SyntheticSpec spec;
  spec.merges = {{"<", "|"}};  // id 256
  spec.added = {{kUser, "<|U|>"},
                {kUserEnd, "<|U|><|E|>"},
                {kThink, "<think>"},
                {kStrip, "<s>", true, /*lstrip=*/true, /*rstrip=*/true},
                {kPlain, "｜DSML｜", /*special=*/false}};
  return spec;
}

std::shared_ptr<const Tokenizer> load_added() {
  auto tok = Tokenizer::load(
      write_temp_file("tokenizer.json", make_tokenizer_json(spec_with_added()).dump()));
  EXPECT_TRUE(tok.is_ok()) << tok.status().to_string();
  return *tok;
}

TEST(TokenizerAddedTokensTest, LongestMatchWinsAtTheSamePosition) {
  auto tok = load_added();
  EXPECT_EQ(tok->encode("<|U|><|E|>", true), (std::vector<int32_t>{kUserEnd}));
  EXPECT_EQ(tok->encode("<|U|><|X|>", true), (std::vector<int32_t>{kUser, 256, 'X', '|', '>'}));
  EXPECT_EQ(tok->encode("a<think>b<|U|>", true), (std::vector<int32_t>{'a', kThink, 'b', kUser}));
}

TEST(TokenizerAddedTokensTest, MatchingOffTreatsTokensAsText) {
  auto tok = load_added();
  const auto ids = tok->encode("<|U|>", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{256, 'U', '|', '>'}));
  for (int32_t id : tok->encode("<think>｜DSML｜<s>", false)) EXPECT_LT(id, 300);
  // Non-special entries of added_tokens are control tokens too (matched only when asked).
  EXPECT_EQ(tok->encode("x｜DSML｜", true), (std::vector<int32_t>{'x', kPlain}));
}

TEST(TokenizerAddedTokensTest, StripFlagsSwallowNeighbouringWhitespace) {
  auto tok = load_added();
  EXPECT_EQ(tok->encode("a \t<s>\n b", true), (std::vector<int32_t>{'a', kStrip, 'b'}));
  EXPECT_EQ(tok->encode("a\u3000<s>", true), (std::vector<int32_t>{'a', kStrip}));
  // Without matching, the whitespace stays.
  EXPECT_EQ(tok->encode("a <s>", false).size(), 5u);
}

TEST(TokenizerAddedTokensTest, SpecialFlagsAndLookup) {
  auto tok = load_added();
  EXPECT_TRUE(tok->is_special(kUser));
  EXPECT_TRUE(tok->is_special(kPlain));  // every added token counts, whatever its flag
  EXPECT_FALSE(tok->is_special('a'));
  EXPECT_FALSE(tok->is_special(256));
  EXPECT_FALSE(tok->is_special(-1));
  EXPECT_FALSE(tok->is_special(1 << 20));
  EXPECT_EQ(tok->token_to_id("<|U|>"), kUser);
  EXPECT_EQ(tok->token_to_id("<|"), 256);
  EXPECT_EQ(tok->token_to_id("Ġ"), ' ');  // vocabulary pieces are looked up in byte-level form
  EXPECT_EQ(tok->token_to_id("<nope>"), std::nullopt);
  EXPECT_EQ(tok->token_bytes(kThink), "<think>");
  EXPECT_EQ(tok->token_bytes(' '), " ");
  EXPECT_EQ(tok->token_bytes(299), "");  // unassigned id inside the range
  EXPECT_EQ(tok->token_bytes(-5), "");
  EXPECT_EQ(tok->n_vocab(), 305);
}

TEST(TokenizerAddedTokensTest, DecodeKeepsOrSkipsSpecials) {
  auto tok = load_added();
  const std::vector<int32_t> ids = {kUser, 'h', 'i', kThink, 299, '!'};
  EXPECT_EQ(tok->decode(ids), "<|U|>hi<think>!");
  EXPECT_EQ(tok->decode(ids, /*skip_special=*/true), "hi!");
}

TEST(TokenizerAddedTokensTest, BosEosComeFromTokenizerConfig) {
  const std::string path =
      write_temp_file("tokenizer.json", make_tokenizer_json(spec_with_added()).dump());
  const auto dir = std::filesystem::path(path).parent_path();
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token": {"content": "<|U|>"}, "eos_token": "<think>"})";
  auto tok = Tokenizer::load(path);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->bos_id(), kUser);
  EXPECT_EQ((*tok)->eos_id(), kThink);
  std::ofstream(dir / "tokenizer_config.json") << "{broken";
  auto bad = Tokenizer::load(path);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("tokenizer_config.json"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
