// Regex front end and token matcher over regex grammars: language, masks vs accept, errors.
#include <gtest/gtest.h>

#include "grammar/regex.h"
#include "test_vocab.h"

namespace deepinfer::grammar {
namespace {

using testing::accepts;
using testing::small_vocab;

std::shared_ptr<const CompiledGrammar> regex_grammar(const std::string& pattern) {
  Grammar g;
  auto body = parse_regex(pattern, g.ast, {}, raw_chars);
  EXPECT_TRUE(body.is_ok()) << body.status().to_string();
  g.add_rule("root", *body);
  auto c = CompiledGrammar::compile(std::move(g), small_vocab().vocab);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return *c;
}

Status regex_error(const std::string& pattern) {
  Ast ast;
  auto r = parse_regex(pattern, ast, {}, raw_chars);
  return r.is_ok() ? Status::ok() : r.status();
}

TEST(RegexTest, EmailLikePattern) {
  auto g = regex_grammar("[a-z]+@[a-z]+\\.com");
  const auto& v = small_vocab();
  EXPECT_TRUE(accepts(g, v, "abc@hello.com"));
  EXPECT_TRUE(accepts(g, v, "a@b.com"));
  EXPECT_FALSE(accepts(g, v, "abc@hello.co"));
  EXPECT_FALSE(accepts(g, v, "@hello.com"));
  EXPECT_FALSE(accepts(g, v, "ab1@hello.com"));
}

TEST(RegexTest, QuantifiersAndClasses) {
  auto g = regex_grammar("^\\d{2,3}(-[A-F\\d]{2})*x?$");
  const auto& v = small_vocab();
  EXPECT_TRUE(accepts(g, v, "12"));
  EXPECT_TRUE(accepts(g, v, "123-AF-0Bx"));
  EXPECT_FALSE(accepts(g, v, "1"));
  EXPECT_FALSE(accepts(g, v, "1234"));
  EXPECT_FALSE(accepts(g, v, "12-A"));
  EXPECT_FALSE(accepts(g, v, "12-ag"));
}

TEST(RegexTest, UnicodeAndDot) {
  auto g = regex_grammar("h.llo [^a-z]+");
  const auto& v = small_vocab();
  EXPECT_TRUE(accepts(g, v, "hello 中文"));
  EXPECT_TRUE(accepts(g, v, "hé" "llo é"));
  EXPECT_FALSE(accepts(g, v, "h\nllo X"));
  EXPECT_FALSE(accepts(g, v, "hello x"));
}

TEST(RegexTest, LazyQuantifiersAndAlternation) {
  auto g = regex_grammar("(?:ab|cd)+?|x{2,}?");
  const auto& v = small_vocab();
  EXPECT_TRUE(accepts(g, v, "abcdab"));
  EXPECT_TRUE(accepts(g, v, "xxx"));
  EXPECT_FALSE(accepts(g, v, "x"));
  EXPECT_FALSE(accepts(g, v, "abc"));
}

TEST(RegexTest, UnsupportedConstructsNameThemselves) {
  EXPECT_NE(regex_error("(a)\\1").message().find("backreference"), std::string::npos);
  EXPECT_NE(regex_error("a(?=b)").message().find("lookahead"), std::string::npos);
  EXPECT_NE(regex_error("(?<!a)b").message().find("lookbehind"), std::string::npos);
  EXPECT_NE(regex_error("\\bword").message().find("word boundary"), std::string::npos);
  EXPECT_NE(regex_error("\\p{L}").message().find("unicode property"), std::string::npos);
  EXPECT_NE(regex_error("a^b").message().find("anchor"), std::string::npos);
  EXPECT_NE(regex_error("(ab").message().find("missing ')'"), std::string::npos);
  EXPECT_TRUE(regex_error("[\\d-z]").is_ok());
}

}  // namespace
}  // namespace deepinfer::grammar
