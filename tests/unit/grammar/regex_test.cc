// Regex front end and token matcher over regex grammars: language, masks vs accept, errors.
#include <gtest/gtest.h>

#include <set>

#include "grammar/ebnf.h"
#include "grammar/regex.h"
#include "test_vocab.h"

namespace deepinfer::grammar {
namespace {

using testing::accepts;
using testing::mask_matches_accept;
using testing::small_vocab;

std::shared_ptr<const CompiledGrammar> regex_grammar(const std::string& pattern,
                                                     std::shared_ptr<const Vocabulary> vocab = small_vocab().vocab) {
  Grammar g;
  auto body = parse_regex(pattern, g.ast, {}, raw_chars);
  EXPECT_TRUE(body.is_ok()) << body.status().to_string();
  g.add_rule("root", *body);
  auto c = CompiledGrammar::compile(std::move(g), std::move(vocab));
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

// A counted repetition has a state per count: the states further than the longest token (and
// than the 64 states below which a state is keyed by its whole automaton) from the count's end
// do the same to every token, so they share one cached mask once the rule's walks have cost
// what the automaton's depth classes cost (mask_cache.cc: classes_earned) (the engine would
// otherwise walk the vocabulary again at every step: ~13 ms at 129K tokens). The masks stay
// exact all the way, the last counts included (the mask of every step equals accept() for every
// token), and a text one character too long is refused.
TEST(RegexTest, CountedRepetitionStatesShareMasksAndStayExact) {
  const auto& v = small_vocab();
  auto g = regex_grammar("[a-z ]{1,300}");
  const Dfa& dfa = g->dfa(g->root());
  ASSERT_GT(dfa.n_states(), 300);
  std::set<const StateMask*> masks;
  for (int32_t s = 0; s < dfa.n_states(); ++s) masks.insert(&g->state_mask(g->root(), s));
  // 301 without the sharing; here ~90: the last 64 counts, ~25 walks before the classes pay
  // (this vocabulary's trie is small, so its walks are cheap), one for the rest.
  EXPECT_LT(static_cast<int32_t>(masks.size()), dfa.n_states() / 3) << "of " << dfa.n_states() << " states";
  std::string text;
  while (text.size() < 300) text += "the quick brown fox ";
  text.resize(300);
  Matcher m(g);
  for (int32_t id : v.tokenize(text)) {
    ASSERT_TRUE(mask_matches_accept(m));
    ASSERT_TRUE(m.accept(id));
  }
  EXPECT_TRUE(mask_matches_accept(m));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_FALSE(m.accept(v.tokenize("a")[0]));
  EXPECT_FALSE(accepts(g, v, text + "a", /*check_masks=*/false));
}

// The shared masks' depth is the longest token's: with tokens of up to 100 'a's (longer than the
// 64 states below which states are keyed by their whole automaton), the counts 100 and 99 from
// the end differ only in the 100-byte token, and each step's mask, taken one byte at a time
// through the whole count, must still equal accept() for every token.
TEST(RegexTest, SharedCountMasksSeeTheLongestToken) {
  std::vector<std::string> pieces(1, "<eos>");
  std::vector<uint8_t> special(1, 1);
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b)), special.push_back(0);
  for (int k = 2; k <= 100; ++k) pieces.emplace_back(static_cast<size_t>(k), 'a'), special.push_back(0);
  auto vocab = Vocabulary::create(pieces, special, 0).value();
  ASSERT_EQ(vocab->max_token_bytes(), 100);
  auto g = regex_grammar("[a-z ]{1,200}", vocab);
  Matcher m(g);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(mask_matches_accept(m)) << "after " << i << " bytes";
    ASSERT_TRUE(m.accept(1 + 'a'));
  }
  EXPECT_TRUE(mask_matches_accept(m));
  EXPECT_TRUE(m.can_terminate());
}

// A root that no rule calls has no caller below it, so its masks skip the suffix trie (tokens
// finishing the rule part-way, kept for the caller to check). The same automaton as a called
// rule in another grammar needs that trie: its masks must not be the root's, though the two share
// cached masks by structure ([a-z]+ stays a rule of its own: a wide self-loop is never inlined).
// "ab," finishes `word` after "ab" and continues with the caller's ",": allowed in the second
// grammar, never in the first. And a root that calls itself keeps its suffixes: "x)" finishes the
// inner root after "x" and continues in the outer one.
TEST(RegexTest, RootMasksWithoutSuffixesStayApartFromCalledRules) {
  std::vector<std::string> pieces(1, "<eos>");
  std::vector<uint8_t> special(1, 1);
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b)), special.push_back(0);
  for (const char* p : {"ab", "ab,", "b,", "x)", "x))"}) pieces.emplace_back(p), special.push_back(0);
  auto vocab = Vocabulary::create(pieces, special, 0).value();
  const auto id = [&](const std::string& p) {
    return static_cast<int32_t>(std::find(pieces.begin(), pieces.end(), p) - pieces.begin());
  };
  const auto allows = [](Matcher& m, int32_t token) {
    std::vector<uint32_t> mask(static_cast<size_t>(m.n_words()));
    EXPECT_TRUE(m.fill_bitmask(mask).is_ok());
    return ((mask[token >> 5] >> (token & 31)) & 1u) != 0;
  };
  auto alone = regex_grammar("[a-z]+", vocab);
  {
    Matcher m(alone);
    EXPECT_TRUE(mask_matches_accept(m));
    EXPECT_FALSE(allows(m, id("ab,")));
    ASSERT_TRUE(m.accept(id("ab")));
    EXPECT_TRUE(mask_matches_accept(m));
  }
  auto called = CompiledGrammar::compile(parse_ebnf("root ::= word \",\"\nword ::= [a-z]+\n", vocab.get()).value(), vocab);
  ASSERT_TRUE(called.is_ok()) << called.status().to_string();
  {
    Matcher m(*called);
    EXPECT_TRUE(mask_matches_accept(m));
    EXPECT_TRUE(allows(m, id("ab,")));
    ASSERT_TRUE(m.accept(id("ab,")));
    EXPECT_TRUE(m.can_terminate());
  }
  auto nested = CompiledGrammar::compile(parse_ebnf("root ::= \"(\" root \")\" | \"x\"\n", vocab.get()).value(), vocab);
  ASSERT_TRUE(nested.is_ok()) << nested.status().to_string();
  {
    Matcher m(*nested);
    ASSERT_TRUE(m.accept(id("(")));
    ASSERT_TRUE(m.accept(id("(")));
    EXPECT_TRUE(mask_matches_accept(m));
    EXPECT_TRUE(allows(m, id("x))")));
    ASSERT_TRUE(m.accept(id("x))")));
    EXPECT_TRUE(m.can_terminate());
  }
}

// A counted repetition of a rule: the caller's count is part of every step's configuration, so
// the matcher keys its recent masks by the frames' depth classes once the rule has missed often
// enough (CompiledGrammar::frame_class) — the counts far from the end then share a memo entry.
// With tokens of up to 20 words ("a a a ..."), the last 20 counts each allow a different set, so
// the masks, taken a byte at a time through the whole count, must stay exact there too; one word
// too many is refused.
TEST(RegexTest, CountedRuleRepetitionMasksStayExact) {
  std::vector<std::string> pieces(1, "<eos>");
  std::vector<uint8_t> special(1, 1);
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b)), special.push_back(0);
  std::string words;
  for (int k = 1; k <= 20; ++k) {
    words += "a ";
    if (k > 1) pieces.push_back(words), special.push_back(0);
  }
  auto vocab = Vocabulary::create(pieces, special, 0).value();
  auto g = CompiledGrammar::compile(parse_ebnf("root ::= word{1,120}\nword ::= [a-z]+ \" \"\n", vocab.get()).value(), vocab);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  Matcher m(*g);
  int with_classes = 0;
  for (int i = 0; i < 120; ++i) {
    for (char c : std::string("a ")) {
      ASSERT_TRUE(mask_matches_accept(m)) << "after " << m.n_accepted() << " bytes";
      ASSERT_TRUE(m.accept(1 + static_cast<uint8_t>(c)));
    }
    with_classes += (*g)->frame_class((*g)->root(), 1) >= 0;
  }
  EXPECT_TRUE(mask_matches_accept(m));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_GT(with_classes, 0);  // the classes were in use for part of the walk
  EXPECT_FALSE(m.accept(1 + 'a'));
}

}  // namespace
}  // namespace deepinfer::grammar
