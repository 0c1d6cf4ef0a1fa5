// Small test vocabulary and brute-force mask checks (see test_vocab.h).
#include "test_vocab.h"

#include <algorithm>

namespace deepinfer::grammar::testing {

int32_t SmallVocab::special(const std::string& text) const {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (vocab->is_special(static_cast<int32_t>(i)) && pieces[i] == text) return static_cast<int32_t>(i);
  }
  return -1;
}

std::vector<int32_t> SmallVocab::tokenize(const std::string& text) const {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t best = -1;
    size_t best_len = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const std::string& p = pieces[i];
      if (p.empty() || p.size() <= best_len || text.compare(pos, p.size(), p) != 0) continue;
      best = static_cast<int32_t>(i);
      best_len = p.size();
    }
    ids.push_back(best);
    pos += best_len;
  }
  return ids;
}

const SmallVocab& small_vocab() {
  static const SmallVocab v = [] {
    SmallVocab sv;
    std::vector<uint8_t> special;
    sv.pieces.push_back("<eos>");
    special.push_back(1);
    for (int b = 0; b < 256; ++b) {
      sv.pieces.push_back(std::string(1, static_cast<char>(b)));
      special.push_back(0);
    }
    for (const char* p : {"{\"", "\":", "\",", "\"}", "\":\"", "\",\"", "true", "false", "null", "name",
                          "age", "ab", "abc", "bc", "12", "123", "0.", ".5", "e+", "  ", "\n", "\n  ",
                          "\": ", "\", \"", "}]", "]}", "[{", "\\n", "\\\"", "\"\"", "é", "中文", "\xe4\xb8",
                          "\xad", "hello", " world", "<", "</", "parameter", "invoke", " name=\"",
                          "\">", "string=\"", "true\">", "tool_calls", ">\n", "\n\n"}) {
      sv.pieces.push_back(p);
      special.push_back(0);
    }
    for (const char* s : {"<think>", "</think>", "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c"}) {
      sv.pieces.push_back(s);
      special.push_back(1);
    }
    sv.eos = 0;
    sv.vocab = Vocabulary::create(sv.pieces, special, 0, static_cast<int32_t>(sv.pieces.size()) + 7).value();
    return sv;
  }();
  return v;
}

::testing::AssertionResult mask_matches_accept(Matcher& m) {
  std::vector<uint32_t> mask(static_cast<size_t>(m.n_words()));
  auto st = m.fill_bitmask(mask);
  if (!st.is_ok()) return ::testing::AssertionFailure() << st.to_string();
  const int32_t n = m.grammar().vocab().n_tokens();
  for (int32_t t = 0; t < n; ++t) {
    const bool bit = (mask[t >> 5] >> (t & 31)) & 1u;
    const bool ok = m.accept(t);
    if (ok) (void)m.rollback(1);
    if (bit != ok) {
      return ::testing::AssertionFailure() << "token " << t << " '" << m.grammar().vocab().token_bytes(t)
                                           << "': mask " << bit << " accept " << ok << " after "
                                           << m.n_accepted() << " tokens";
    }
  }
  return ::testing::AssertionSuccess();
}

bool accepts_tokens(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& ids,
                    bool finish, bool check_masks) {
  Matcher m(g);
  for (int32_t id : ids) {
    if (check_masks) {
      EXPECT_TRUE(mask_matches_accept(m));
    }
    if (!m.accept(id)) return false;
  }
  if (!finish) return true;
  if (check_masks) {
    EXPECT_TRUE(mask_matches_accept(m));
  }
  return m.accept(g->vocab().eos_id()) && m.is_terminated();
}

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const SmallVocab& v, const std::string& text,
             bool check_masks) {
  return accepts_tokens(g, v.tokenize(text), true, check_masks);
}

}  // namespace deepinfer::grammar::testing
