// SamplingParams::bad_words (vLLM's semantics): the matcher bans a word's last token where the
// output ends with the tokens before it (a one-token word everywhere), composes with a grammar's
// matcher and takes accepted tokens back on rollback; in the engine (tiny-v4f, its real
// vocabulary) a word greedy decoding produces never appears once banned, with and without
// speculative drafts (same tokens either way).
#include <algorithm>

#include "engine/bad_words.h"
#include "engine_test_util.h"
#include "sample/logits_processors.h"

namespace deepinfer {
namespace {

bool allowed(const std::vector<uint32_t>& bits, int32_t token) { return (bits[token >> 5] >> (token & 31)) & 1u; }

std::vector<uint32_t> mask_of(engine::StructuredOutputMatcher& m, int32_t n_vocab) {
  std::vector<uint32_t> bits(static_cast<size_t>(sample::bitmask_words(n_vocab)));
  EXPECT_TRUE(m.fill_bitmask(bits).is_ok());
  return bits;
}

TEST(BadWordsTest, MatcherBansTheLastTokenAfterItsPrefix) {
  engine::BadWordsMatcher m(nullptr, {{7}, {3, 4, 5}, {9, 4}}, 64);
  auto bits = mask_of(m, 64);
  EXPECT_FALSE(allowed(bits, 7));  // a one-token word: always
  EXPECT_TRUE(allowed(bits, 5));
  EXPECT_TRUE(allowed(bits, 4));
  ASSERT_TRUE(m.accept(3));
  EXPECT_TRUE(allowed(mask_of(m, 64), 4));
  ASSERT_TRUE(m.accept(4));
  bits = mask_of(m, 64);
  EXPECT_FALSE(allowed(bits, 5));  // 3 4 then 5 would complete the word
  EXPECT_FALSE(allowed(bits, 7));
  EXPECT_TRUE(allowed(bits, 4));
  ASSERT_TRUE(m.rollback(1).is_ok());  // back to "3": 5 is free again, 4 is not banned by {9, 4}
  bits = mask_of(m, 64);
  EXPECT_TRUE(allowed(bits, 5));
  EXPECT_TRUE(allowed(bits, 4));
  ASSERT_TRUE(m.accept(9));
  EXPECT_FALSE(allowed(mask_of(m, 64), 4));
  EXPECT_FALSE(m.is_terminated());
  EXPECT_FALSE(m.rollback(3).is_ok());  // only two accepted
}

// A stand-in grammar: tokens 0..9 only, ends after 3 tokens.
class DigitsMatcher final : public engine::StructuredOutputMatcher {
 public:
  Status fill_bitmask(std::span<uint32_t> words) override {
    std::fill(words.begin(), words.end(), 0u);
    words[0] = 0x3ffu;
    return Status::ok();
  }
  bool accept(int32_t token) override {
    if (token < 0 || token > 9) return false;
    ++n;
    return true;
  }
  bool is_terminated() const override { return n >= 3; }
  Status rollback(int32_t k) override {
    n -= k;
    return Status::ok();
  }
  int n = 0;
};

TEST(BadWordsTest, MatcherComposesWithTheGrammar) {
  auto inner = std::make_unique<DigitsMatcher>();
  DigitsMatcher* digits = inner.get();
  engine::BadWordsMatcher m(std::move(inner), {{2}, {30}}, 64);
  auto bits = mask_of(m, 64);
  EXPECT_TRUE(allowed(bits, 1));
  EXPECT_FALSE(allowed(bits, 2));   // banned
  EXPECT_FALSE(allowed(bits, 30));  // the grammar's
  EXPECT_FALSE(m.accept(30));       // the grammar refuses it
  ASSERT_TRUE(m.accept(1) && m.accept(1) && m.accept(1));
  EXPECT_TRUE(m.is_terminated());
  ASSERT_TRUE(m.rollback(2).is_ok());
  EXPECT_EQ(digits->n, 1);
}

bool contains(const std::vector<int32_t>& text, const std::vector<int32_t>& word) {
  return std::search(text.begin(), text.end(), word.begin(), word.end()) != text.end();
}

TEST(BadWordsTest, EngineNeverGeneratesABannedWord) {
  EngineOptions o;
  o.model = testing::synthetic_model_dir("tiny-v4f");
  o.kv_blocks = 32;
  o.max_num_seqs = 4;
  Request r;
  r.prompt = "The answer is";
  r.sampling.max_tokens = 16;
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  const testing::Outcome plain = testing::generate_all({r}, o);
  ASSERT_EQ(plain.outputs.size(), 1u);
  const std::vector<int32_t> tokens = plain.outputs[0].sequences.at(0).token_ids;
  ASSERT_GE(tokens.size(), 8u);
  auto probe = testing::open_micro(o);
  ASSERT_NE(probe, nullptr);
  const Tokenizer& tok = *probe->tokenizer();
  const int32_t n_vocab = tok.n_vocab();
  // A two-token word from the greedy output whose text tokenizes back to those tokens, and a
  // one-token word after it: banned, neither may appear; the output changes where they stood.
  std::vector<int32_t> pair, single;
  std::string pair_text, single_text;
  for (size_t i = 2; i + 1 < tokens.size() && (pair.empty() || single.empty()); ++i) {
    const std::vector<int32_t> two{tokens[i], tokens[i + 1]};
    const std::string text = tok.decode(two);
    const auto ids = engine::bad_word_token_ids(std::vector<std::string>{text}, tok, n_vocab);
    if (pair.empty() && std::find(ids.begin(), ids.end(), two) != ids.end()) {
      pair = two;
      pair_text = text;
      continue;
    }
    const std::vector<int32_t> just{tokens[i]};
    const std::string one = tok.decode(just);
    const auto one_ids = engine::bad_word_token_ids(std::vector<std::string>{one}, tok, n_vocab);
    if (!pair.empty() && single.empty() && tokens[i] != pair[0] && tokens[i] != pair[1] &&
        std::find(one_ids.begin(), one_ids.end(), std::vector<int32_t>{tokens[i]}) != one_ids.end()) {
      single = {tokens[i]};
      single_text = one;
    }
  }
  ASSERT_FALSE(pair.empty()) << "no two-token word round-trips in the greedy output";
  ASSERT_TRUE(contains(tokens, pair));
  Request banned = r;
  banned.sampling.bad_words = {pair_text};
  if (!single.empty()) banned.sampling.bad_words.push_back(single_text);
  const testing::Outcome without = testing::generate_all({banned}, o);
  ASSERT_EQ(without.outputs.size(), 1u);
  const std::vector<int32_t>& got = without.outputs[0].sequences.at(0).token_ids;
  EXPECT_EQ(got.size(), tokens.size());
  EXPECT_FALSE(contains(got, pair)) << "\"" << pair_text << "\"";
  if (!single.empty()) {
    EXPECT_FALSE(contains(got, single)) << "\"" << single_text << "\"";
  }
  EXPECT_NE(got, tokens);
  // Drafts: verified under the same bans, the same tokens.
  o.nextn_decode = 3;
  const testing::Outcome spec = testing::generate_all({banned}, o);
  testing::expect_same_outputs(spec.outputs, without.outputs);
  EXPECT_GT(spec.stats.n_draft_rows, 0);
  // Bad words are validated: empty, blank or not UTF-8 are errors naming them.
  for (const std::string& bad : {std::string(""), std::string("  "), std::string("\xff")}) {
    Request wrong = r;
    wrong.sampling.bad_words = {"ok", bad};
    EXPECT_NE(wrong.sampling.validate().message().find("bad_words[1]"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace deepinfer
