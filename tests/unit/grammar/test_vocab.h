// Test helpers: a small vocabulary (all single bytes, common multi-byte pieces, a few special
// tokens, EOS), greedy longest-match tokenization over it, and a brute-force mask check that
// compares fill_bitmask() with accept()/rollback() for every token.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar::testing {

struct SmallVocab {
  std::shared_ptr<const Vocabulary> vocab;
  std::vector<std::string> pieces;  // id -> bytes (special tokens: their text)
  int32_t eos = 0;
  int32_t special(const std::string& text) const;
  // Greedy longest match; special-token texts become their ids.
  std::vector<int32_t> tokenize(const std::string& text) const;
};

// 256 byte tokens, extra pieces, specials "<eos>", "<think>", "</think>", "｜DSML｜".
const SmallVocab& small_vocab();

// Drives a fresh matcher over `text` tokenized with `v`; at every step checks that the mask
// agrees with accept() for every token when check_masks. Returns true iff all tokens are
// accepted and the grammar can terminate at the end (EOS accepted).
bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const SmallVocab& v,
             const std::string& text, bool check_masks = true);
// Same over explicit token ids (no EOS appended when `finish` is false).
bool accepts_tokens(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& ids,
                    bool finish, bool check_masks = true);

// Compares the bitmask of the matcher's current state with accept()+rollback() over all tokens.
::testing::AssertionResult mask_matches_accept(Matcher& m);

}  // namespace deepinfer::grammar::testing
