// EBNF front ends: GBNF (recursive JSON grammar, repetition, token terminals), left recursion
// rewrite and errors, Lark-style subset.
#include <gtest/gtest.h>

#include "grammar/ebnf.h"
#include "test_vocab.h"

namespace deepinfer::grammar {
namespace {

using testing::accepts;
using testing::small_vocab;

Result<std::shared_ptr<const CompiledGrammar>> compile_ebnf(const std::string& text) {
  DI_ASSIGN_OR_RETURN(Grammar g, parse_ebnf(text, small_vocab().vocab.get()));
  return CompiledGrammar::compile(std::move(g), small_vocab().vocab);
}

std::shared_ptr<const CompiledGrammar> must(const std::string& text) {
  auto r = compile_ebnf(text);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : nullptr;
}

constexpr const char* kJsonGbnf = R"GBNF(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
# comment line
ws ::= | " " | "\n" [ \t]{0,20}
)GBNF";

TEST(EbnfTest, RecursiveJsonGrammar) {
  auto g = must(kJsonGbnf);
  const auto& v = small_vocab();
  EXPECT_TRUE(accepts(g, v, R"({"name": "abc", "age": 12})"));
  EXPECT_TRUE(accepts(g, v, R"({"a":[1,2,{"b":[true,false,null]}],"c":"\n\u00e9中文"})"));
  EXPECT_TRUE(accepts(g, v, "{\n  \"x\": -0.5e+1}"));
  EXPECT_FALSE(accepts(g, v, R"({"a":})"));
  EXPECT_FALSE(accepts(g, v, R"({"a":1,})"));
  EXPECT_FALSE(accepts(g, v, R"([1,2])"));
  EXPECT_FALSE(accepts(g, v, R"({"a":"x)"));
}

TEST(EbnfTest, DirectLeftRecursionIsRewritten) {
  auto g = must(R"G(
root ::= expr
expr ::= expr "+" term | expr "-" term | term
term ::= term "*" factor | factor
factor ::= [0-9]+ | "(" expr ")"
)G");
  const auto& v = small_vocab();
  EXPECT_TRUE(accepts(g, v, "1+2*3-(4-5)*12"));
  EXPECT_TRUE(accepts(g, v, "((7))"));
  EXPECT_FALSE(accepts(g, v, "1+"));
  EXPECT_FALSE(accepts(g, v, "(1+2"));
}

TEST(EbnfTest, IndirectLeftRecursionIsAnError) {
  auto r = compile_ebnf("root ::= a\na ::= b \"x\" | \"y\"\nb ::= a \"z\"\n");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("left recursion"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("a -> b -> a"), std::string::npos) << r.status().message();
}

TEST(EbnfTest, RepetitionBoundsAndEmptyAlternative) {
  auto g = must("root ::= \"a\"{2,3} \"b\"{,2} (\"c\" | )\n");
  const auto& v = small_vocab();
  EXPECT_TRUE(accepts(g, v, "aa"));
  EXPECT_TRUE(accepts(g, v, "aaabbc"));
  EXPECT_FALSE(accepts(g, v, "a"));
  EXPECT_FALSE(accepts(g, v, "aaaa"));
  EXPECT_FALSE(accepts(g, v, "aabbb"));
}

// GBNF allows blanks between an element and its repetition operator (llama.cpp skips spaces after
// each element): `"a" *`, `x {2}`, `( ... ) ?`.
TEST(EbnfTest, BlanksBeforeRepetitionOperators) {
  auto g = must("root ::= \"a\" {2} \"b\" * (\"c\" | \"d\") ? x +\nx ::= \"x\"\n");
  const auto& v = small_vocab();
  EXPECT_TRUE(accepts(g, v, "aax"));
  EXPECT_TRUE(accepts(g, v, "aabbbdxx"));
  EXPECT_FALSE(accepts(g, v, "ax"));
  EXPECT_FALSE(accepts(g, v, "aacdx"));
  EXPECT_FALSE(accepts(g, v, "aab"));
}

TEST(EbnfTest, SpecialTokenTerminals) {
  const auto& v = small_vocab();
  const int32_t think_end = v.special("</think>");
  auto g = must("root ::= <think> [^<]* <[" + std::to_string(think_end) + "]> \"ok\"\n");
  auto ids = v.tokenize("<think>hello world</think>ok");
  EXPECT_TRUE(testing::accepts_tokens(g, ids, true));
  // The same text as ordinary bytes is not the special token.
  std::vector<int32_t> bytes_only;
  for (char c : std::string("<think>")) bytes_only.push_back(1 + static_cast<uint8_t>(c));
  EXPECT_FALSE(testing::accepts_tokens(g, bytes_only, false));
}

TEST(EbnfTest, ErrorsNameTheProblem) {
  auto undefined = compile_ebnf("root ::= foo\n");
  ASSERT_FALSE(undefined.is_ok());
  EXPECT_NE(undefined.status().message().find("'foo'"), std::string::npos);
  auto no_root = compile_ebnf("main ::= \"x\"\n");
  ASSERT_FALSE(no_root.is_ok());
  EXPECT_NE(no_root.status().message().find("'root'"), std::string::npos);
  auto bad = compile_ebnf("root ::= \"x\" )\n");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos) << bad.status().message();
  auto empty = compile_ebnf("root ::= [^\\x00-\\U0010FFFF]\n");
  EXPECT_FALSE(empty.is_ok());
}

TEST(EbnfTest, LarkSubset) {
  auto g = must(R"(
// a Lark-style grammar
start: greeting (", " NAME)+ "!"?
greeting: "hello"i | "hi"
NAME: /[A-Z][a-z]+/ ~ 1..2
)");
  const auto& v = small_vocab();
  EXPECT_TRUE(accepts(g, v, "HeLLo, Bob!"));
  EXPECT_TRUE(accepts(g, v, "hi, AnnBob, Cy"));
  EXPECT_FALSE(accepts(g, v, "hi"));
  EXPECT_FALSE(accepts(g, v, "hey, Bob"));
  auto dir = compile_ebnf("start: \"a\"\n%ignore \" \"\n");
  ASSERT_FALSE(dir.is_ok());
  EXPECT_NE(dir.status().message().find("%ignore"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::grammar
