// The grammar engine on the real DeepSeek vocabulary (Tokenizer::load_default(), 129,280-id
// bitmask): the Tokenizer adapter, bitmask = accept() for every id at representative states,
// the JSON-Schema-Test-Suite through the real BPE with per-token mask checks, and DSML with the
// real special tokens. Needs the prepared data (ctest fixture tokenizer_data): fails without it.
#include <gtest/gtest.h>

#include "deepinfer/tokenizer.h"
#include "grammar/dsml.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"
#include "suite_runner.h"
#include "test_vocab.h"

namespace deepinfer::grammar {
namespace {

constexpr int32_t kModelVocab = 129'280;

struct Real {
  std::shared_ptr<const Tokenizer> tok;
  std::shared_ptr<const Vocabulary> vocab;
};

const Real* real() {
  static const Real r = [] {
    Real out;
    auto tok = Tokenizer::load_default();
    if (!tok.is_ok()) return out;
    out.tok = *tok;
    out.vocab = Vocabulary::from_tokenizer(**tok, kModelVocab).value();
    return out;
  }();
  return r.tok ? &r : nullptr;
}

#define REQUIRE_TOKENIZER()                                                         \
  const Real* r = real();                                                           \
  ASSERT_NE(r, nullptr) << "no prepared tokenizer: run tools/prepare_data.sh"

std::shared_ptr<const CompiledGrammar> schema(const Real& r, const std::string& text) {
  return CompiledGrammar::compile(json_schema_to_grammar(std::string_view(text), {}).value(), r.vocab).value();
}

TEST(RealTokenizerTest, VocabularyAdapter) {
  REQUIRE_TOKENIZER();
  EXPECT_EQ(r->vocab->n_tokens(), kModelVocab);
  EXPECT_EQ(r->vocab->n_words(), 4040);
  EXPECT_EQ(r->vocab->eos_id(), r->tok->eos_id());
  EXPECT_EQ(r->vocab->find_special("\xef\xbd\x9c" "DSML" "\xef\xbd\x9c"), 128825);
  EXPECT_EQ(r->vocab->find_special("</think>"), 128822);
  EXPECT_TRUE(r->vocab->token_bytes(kModelVocab - 1).empty());
}

TEST(RealTokenizerTest, BitmaskEqualsAcceptForEveryId) {
  REQUIRE_TOKENIZER();
  auto g = schema(*r, R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},
      "n":{"type":"integer","minimum":0}},"required":["name","n"],"additionalProperties":false})");
  Matcher m(g);
  // States: start, inside a string, inside a number, before the closing brace.
  for (const std::string& prefix : {std::string(), std::string("{\"name\":\"Bob "), std::string("\",\"n\":12")}) {
    ASSERT_TRUE(m.accept_bytes(prefix));
    ASSERT_TRUE(testing::mask_matches_accept(m));
  }
  std::vector<uint32_t> mask(static_cast<size_t>(m.n_words()));
  ASSERT_TRUE(m.fill_bitmask(mask).is_ok());
  for (int32_t t = r->tok->n_vocab(); t < kModelVocab; ++t) ASSERT_FALSE((mask[t >> 5] >> (t & 31)) & 1u) << t;
}

TEST(RealTokenizerTest, JsonSchemaSuiteThroughTheRealTokenizer) {
  REQUIRE_TOKENIZER();
  const testing::SuiteVocab sv{r->vocab, [r](const std::string& text) { return r->tok->encode(text, false); }, true};
  const testing::Stats st = testing::run_suite("draft7", SchemaDraft::kDraft7, {"real tokenizer", false, true, -1}, false, sv);
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
  EXPECT_GE(st.passed, 299);
}

TEST(RealTokenizerTest, DsmlWithRealSpecialTokens) {
  REQUIRE_TOKENIZER();
  std::vector<DsmlTool> tools = {{"get_weather", Json::parse(R"({"type":"object","properties":{
      "city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]})")}};
  DsmlOptions o;
  o.thinking = true;
  auto g = CompiledGrammar::compile(dsml_tool_call_grammar(tools, o, *r->vocab).value(), r->vocab).value();
  const std::string d = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";
  const std::string text = "The user wants weather.</think>Checking.\n\n<" + d + "tool_calls>\n<" + d +
                           "invoke name=\"get_weather\">\n<" + d + "parameter name=\"city\" string=\"true\">北京</" + d +
                           "parameter>\n<" + d + "parameter name=\"days\" string=\"false\">2</" + d + "parameter>\n</" + d +
                           "invoke>\n</" + d + "tool_calls>";
  const auto ids = r->tok->encode(text, /*match_special=*/true);
  EXPECT_TRUE(testing::accepts_tokens(g, ids, true, /*check_masks=*/false));
  // A mask check at a few positions (each is 129,280 accept() calls).
  Matcher m(g);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 0 || i == ids.size() / 2 || i + 1 == ids.size()) {
      ASSERT_TRUE(testing::mask_matches_accept(m));
    }
    ASSERT_TRUE(m.accept(ids[i]));
  }
}

}  // namespace
}  // namespace deepinfer::grammar
