// BPE merge semantics on synthetic tokenizers: rank order, leftmost tie-break, both merge
// formats, and a randomized differential test against a naive reference implementation that
// covers the short-piece loop and the long-piece (segment tree) loop.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "deepinfer/tokenizer.h"
#include "synthetic_tokenizer.h"

namespace deepinfer {
namespace {

using testing_tokenizer::make_tokenizer_json;
using testing_tokenizer::merged_id;
using testing_tokenizer::SyntheticSpec;
using testing_tokenizer::write_temp_file;

std::shared_ptr<const Tokenizer> load_spec(const SyntheticSpec& spec) {
  auto tok = Tokenizer::load(write_temp_file("tokenizer.json", make_tokenizer_json(spec).dump()));
  EXPECT_TRUE(tok.is_ok()) << tok.status().to_string();
  return tok.is_ok() ? *tok : nullptr;
}

TEST(TokenizerBpeTest, LowerRankMergesFirst) {
  SyntheticSpec spec;
  spec.merges = {{"a", "b"}, {"b", "c"}};
  auto tok = load_spec(spec);
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{256, 'c'}));
  spec.merges = {{"b", "c"}, {"a", "b"}};
  tok = load_spec(spec);
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{'a', 256}));
}

TEST(TokenizerBpeTest, EqualRanksMergeLeftmostFirst) {
  SyntheticSpec spec;
  spec.merges = {{"a", "a"}};
  auto tok = load_spec(spec);
  EXPECT_EQ(tok->encode("aaa", false), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(tok->encode("aaaa", false), (std::vector<int32_t>{256, 256}));
  EXPECT_EQ(tok->encode("aaaaa", false), (std::vector<int32_t>{256, 256, 'a'}));
}

TEST(TokenizerBpeTest, ChainsOfMergesAndBothMergeFormats) {
  SyntheticSpec spec;
  spec.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {" w", "o"}};
  for (bool pairs : {false, true}) {
    spec.merges_as_pairs = pairs;
    auto tok = load_spec(spec);
    const int32_t hello = merged_id(spec, "hello");
    ASSERT_EQ(hello, 259);
    EXPECT_EQ(tok->encode("hello world", false),
              (std::vector<int32_t>{hello, merged_id(spec, " wo"), 'r', 'l', 'd'}));
    EXPECT_EQ(tok->decode(tok->encode("hello world", false)), "hello world");
  }
}

TEST(TokenizerBpeTest, PreTokenizerPiecesAreMergedSeparately) {
  SyntheticSpec spec;
  spec.merges = {{"a", " "}, {"a ", "b"}};  // would need to cross the piece boundary
  auto tok = load_spec(spec);
  EXPECT_EQ(tok->encode("a b", false), (std::vector<int32_t>{'a', ' ', 'b'}));
  spec.split_regexes.clear();  // no Split: the whole text is one piece
  tok = load_spec(spec);
  EXPECT_EQ(tok->encode("a b", false), (std::vector<int32_t>{merged_id(spec, "a b")}));
}

// The reference: merge the lowest-ranked adjacent pair, leftmost on ties, until none is left.
std::vector<int32_t> naive_bpe(const std::string& text, const SyntheticSpec& spec) {
  std::map<std::pair<std::string, std::string>, size_t> rank;
  for (size_t i = 0; i < spec.merges.size(); ++i)
    rank.emplace(spec.merges[i], i);  // pairs are unique
  std::vector<std::string> symbols;
  for (char c : text) symbols.emplace_back(1, c);
  while (symbols.size() > 1) {
    size_t best = SIZE_MAX, best_rank = SIZE_MAX;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = rank.find({symbols[i], symbols[i + 1]});
      if (it != rank.end() && it->second < best_rank) best = i, best_rank = it->second;
    }
    if (best == SIZE_MAX) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<int32_t> ids;
  for (const auto& s : symbols) {
    ids.push_back(s.size() == 1 ? static_cast<unsigned char>(s[0]) : merged_id(spec, s));
  }
  return ids;
}

TEST(TokenizerBpeTest, MatchesNaiveReferenceOnRandomInputs) {
  std::mt19937 rng(1234);
  SyntheticSpec spec;
  spec.split_regexes.clear();
  std::vector<std::string> tokens = {"a", "b", "c", "d"};
  std::map<std::pair<std::string, std::string>, bool> seen;
  while (spec.merges.size() < 80) {  // training-like: merge existing tokens into new ones
    const std::string l = tokens[rng() % tokens.size()], r = tokens[rng() % tokens.size()];
    if (l.size() + r.size() > 8 || seen[{l, r}]) continue;
    seen[{l, r}] = true;
    spec.merges.emplace_back(l, r);
    tokens.push_back(l + r);
  }
  auto tok = load_spec(spec);
  ASSERT_NE(tok, nullptr);
  // Lengths on both sides of the short/long loop threshold (64 bytes), up to 1000.
  for (int round = 0; round < 340; ++round) {
    const size_t len = round < 300 ? 1 + round % 150 : 1 + rng() % 1000;
    std::string text;
    const int alphabet = 1 + round % 4;
    for (size_t i = 0; i < len; ++i) text.push_back(static_cast<char>('a' + rng() % alphabet));
    ASSERT_EQ(tok->encode(text, false), naive_bpe(text, spec)) << "text: " << text;
  }
}

TEST(TokenizerBpeTest, BytesWithoutMergesStayBytes) {
  SyntheticSpec spec;
  auto tok = load_spec(spec);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  // Invalid UTF-8 is tokenized byte by byte and decodes back (with U+FFFD where ill-formed).
  const auto ids = tok->encode(all, false);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(tok->token_bytes(b), std::string(1, static_cast<char>(b)));
}

}  // namespace
}  // namespace deepinfer
