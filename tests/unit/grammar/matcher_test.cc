// Matcher operations: EOS and termination, rollback (speculative decoding), jump-forward strings,
// bitmask layout (width, ids past the vocabulary, special tokens), and a randomized check that
// the bitmask equals accept() along random walks through several grammars.
#include <gtest/gtest.h>

#include <random>

#include "grammar/ebnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "test_vocab.h"

namespace deepinfer::grammar {
namespace {

using testing::small_vocab;

std::shared_ptr<const CompiledGrammar> schema_grammar(const std::string& schema) {
  return CompiledGrammar::compile(json_schema_to_grammar(std::string_view(schema), {}).value(), small_vocab().vocab)
      .value();
}

std::shared_ptr<const CompiledGrammar> ebnf_grammar(const std::string& text) {
  return CompiledGrammar::compile(parse_ebnf(text, small_vocab().vocab.get()).value(), small_vocab().vocab).value();
}

bool allowed(Matcher& m, int32_t token) {
  std::vector<uint32_t> mask(static_cast<size_t>(m.n_words()));
  EXPECT_TRUE(m.fill_bitmask(mask).is_ok());
  return (mask[token >> 5] >> (token & 31)) & 1u;
}

TEST(MatcherTest, EosOnlyWhenTheGrammarCanEnd) {
  const auto& v = small_vocab();
  Matcher m(ebnf_grammar("root ::= \"ab\" \"c\"?\n"));
  EXPECT_FALSE(allowed(m, v.eos));
  EXPECT_FALSE(m.accept(v.eos));
  ASSERT_TRUE(m.accept(v.tokenize("ab")[0]));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_TRUE(allowed(m, v.eos));
  EXPECT_TRUE(allowed(m, v.tokenize("c")[0]));
  ASSERT_TRUE(m.accept(v.eos));
  EXPECT_TRUE(m.is_terminated());
  // After EOS nothing but EOS is in the mask, and nothing is accepted.
  std::vector<uint32_t> mask(static_cast<size_t>(m.n_words()));
  ASSERT_TRUE(m.fill_bitmask(mask).is_ok());
  int n_set = 0;
  for (uint32_t w : mask) n_set += __builtin_popcount(w);
  EXPECT_EQ(n_set, 1);
  EXPECT_TRUE(allowed(m, v.eos));
  EXPECT_FALSE(m.accept(v.tokenize("c")[0]));
  EXPECT_TRUE(m.accept(v.eos));
  EXPECT_TRUE(m.is_terminated());
}

TEST(MatcherTest, RollbackRestoresEarlierStates) {
  const auto& v = small_vocab();
  auto g = schema_grammar(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]})");
  Matcher m(g);
  const auto ids = v.tokenize(R"({"name":"abc","age":12})");
  std::vector<std::vector<uint32_t>> masks;
  for (int32_t id : ids) {
    masks.emplace_back(static_cast<size_t>(m.n_words()));
    ASSERT_TRUE(m.fill_bitmask(masks.back()).is_ok());
    ASSERT_TRUE(m.accept(id));
  }
  EXPECT_TRUE(m.can_terminate());
  // Speculative decoding: roll back 4 tokens, the masks are those seen before.
  ASSERT_TRUE(m.rollback(4).is_ok());
  EXPECT_EQ(m.n_accepted(), static_cast<int32_t>(ids.size()) - 4);
  std::vector<uint32_t> again(static_cast<size_t>(m.n_words()));
  ASSERT_TRUE(m.fill_bitmask(again).is_ok());
  EXPECT_EQ(again, masks[ids.size() - 4]);
  EXPECT_FALSE(m.can_terminate());
  // A draft that breaks the grammar is refused at its first bad token, state unchanged.
  EXPECT_FALSE(m.accept(v.tokenize("}")[0]));
  EXPECT_EQ(m.n_accepted(), static_cast<int32_t>(ids.size()) - 4);
  for (size_t i = ids.size() - 4; i < ids.size(); ++i) ASSERT_TRUE(m.accept(ids[i]));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_FALSE(m.rollback(static_cast<int32_t>(ids.size()) + 1).is_ok());
  ASSERT_TRUE(m.rollback(static_cast<int32_t>(ids.size())).is_ok());
  EXPECT_EQ(m.n_accepted(), 0);
}

TEST(MatcherTest, JumpForwardStrings) {
  const auto& v = small_vocab();
  auto g = schema_grammar(R"({"type":"object","properties":{"name":{"type":"string"},"kind":{"const":"fixed"}},
                              "required":["name","kind"],"additionalProperties":false})");
  Matcher m(g);
  EXPECT_EQ(m.find_jump_forward_string(), "{\"name\":\"");
  ASSERT_TRUE(m.accept_bytes("{\"name\":\"x"));
  EXPECT_EQ(m.find_jump_forward_string(), "");  // free text: no forced byte
  ASSERT_TRUE(m.accept_bytes("\""));
  EXPECT_EQ(m.find_jump_forward_string(), ",\"kind\":\"fixed\"}");
  ASSERT_TRUE(m.accept_bytes(",\"kind\":\"fixed\"}"));
  EXPECT_EQ(m.find_jump_forward_string(), "");  // may end here
  EXPECT_TRUE(m.accept(v.eos));
}

TEST(MatcherTest, BitmaskLayoutAndSpecialTokens) {
  const auto& v = small_vocab();
  Matcher m(ebnf_grammar("root ::= [^x]*\n"));
  const int32_t n = v.vocab->n_tokens();
  std::vector<uint32_t> mask(static_cast<size_t>(m.n_words()) + 3, 0xFFFFFFFFu);
  ASSERT_TRUE(m.fill_bitmask(mask).is_ok());
  const int32_t n_pieces = static_cast<int32_t>(v.pieces.size());
  for (int32_t t = n_pieces; t < static_cast<int32_t>(mask.size()) * 32; ++t) {
    ASSERT_FALSE((mask[t >> 5] >> (t & 31)) & 1u) << "id " << t << " past the tokenizer's vocabulary (n_tokens " << n << ")";
  }
  EXPECT_FALSE(allowed(m, v.special("<think>")));  // specials only where the grammar names them
  EXPECT_TRUE(allowed(m, v.tokenize("a")[0]));
  EXPECT_FALSE(allowed(m, v.tokenize("x")[0]));
  std::vector<uint32_t> small(static_cast<size_t>(m.n_words()) - 1);
  EXPECT_FALSE(m.fill_bitmask(small).is_ok());
}

TEST(MatcherTest, MaskEqualsAcceptOnRandomWalks) {
  const auto& v = small_vocab();
  const std::vector<std::shared_ptr<const CompiledGrammar>> grammars = {
      schema_grammar(R"({"type":"object","properties":{"a":{"type":"string","maxLength":5},
          "b":{"type":"array","items":{"type":"number","minimum":0}},"c":{"enum":["ab","abc",1]}},"required":["a"]})"),
      schema_grammar(R"({"anyOf":[{"type":"string","pattern":"^[a-c]+$"},{"type":"integer","multipleOf":3}]})"),
      ebnf_grammar("root ::= (\"ab\" | \"abc\" | [0-9]+ | \"\\n\" | x)+\nx ::= \"(\" root? \")\"\n"),
  };
  std::mt19937 rng(7);
  for (const auto& g : grammars) {
    for (int walk = 0; walk < 30; ++walk) {
      Matcher m(g);
      for (int step = 0; step < 25; ++step) {
        ASSERT_TRUE(testing::mask_matches_accept(m));
        std::vector<uint32_t> mask(static_cast<size_t>(m.n_words()));
        ASSERT_TRUE(m.fill_bitmask(mask).is_ok());
        std::vector<int32_t> options;
        for (int32_t t = 0; t < v.vocab->n_tokens(); ++t) if ((mask[t >> 5] >> (t & 31)) & 1u) options.push_back(t);
        if (options.empty() || m.is_terminated()) break;
        ASSERT_TRUE(m.accept(options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)]));
        if (step % 7 == 6) {
          ASSERT_TRUE(m.rollback(1).is_ok());  // exercise rollback mid-walk
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::grammar
