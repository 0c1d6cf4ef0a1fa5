// Context-independent token classification of one (rule, DFA state), the unit of mask caching
// (XGrammar's adaptive token mask idea, on our automata): tokens whose bytes stay inside the rule
// are accepted whatever the caller is; tokens that finish the rule part-way are kept as the
// remaining bytes ("suffixes", merged into a small trie) to be checked against the actual caller
// at mask time; if the rule can finish before the token, every token also depends on the caller.
// Depth-0 calls of the state are not included: the matcher expands them as separate stacks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/dfa.h"

namespace deepinfer::grammar {

class CompiledGrammar;
class Vocabulary;

// Remaining bytes of rule-finishing tokens, merged; node 0 is the root (no byte), preorder.
struct SuffixTrie {
  struct Node {
    int32_t end;        // one past the subtree
    int32_t tok_begin;  // tokens whose remaining bytes end here: tokens[tok_begin, tok_end)
    int32_t tok_end;
    uint16_t depth;
    uint8_t byte;
  };
  std::vector<Node> nodes;
  std::vector<int32_t> tokens;
  bool empty() const { return nodes.size() <= 1; }
};

struct StateMask {
  int8_t slice_level = -1;      // also accepts the vocabulary slice of this level
  std::vector<int32_t> ids;     // accepted tokens (sparse form) ...
  std::vector<uint32_t> bits;   // ... or (dense form) a full bitmask
  bool exit_at_root = false;    // the rule may return before the token starts
  SuffixTrie suffixes;
  int32_t n_accepted = 0;       // excluding the slice
  size_t memory_bytes() const;
  // mask |= accepted tokens (n_words words).
  void or_into(uint32_t* mask, const Vocabulary& vocab) const;
};

// Per-state slice bounds of one automaton (use the cached Dfa::slice_bounds()).
Dfa::SliceBounds compute_slice_bounds(const Dfa& dfa);

// Builds the mask of (rule, state); leaf-rule states are shared across grammars through the
// vocabulary's cache, keyed by the digest of the automaton reachable from the state.
std::shared_ptr<const StateMask> lookup_or_build_state_mask(const CompiledGrammar& grammar,
                                                            int32_t rule, int32_t state);

}  // namespace deepinfer::grammar
