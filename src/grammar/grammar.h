// Grammar IR (named rules whose bodies are Ast expressions) and its compiled form: one minimized
// byte-level DFA per rule, with call edges to other rules and token-terminal edges. The compiled
// grammar is immutable after compile() except for its lazily filled per-state mask cache, which is
// internally synchronized: one CompiledGrammar may be shared by any number of matchers/threads.
// Left recursion: direct left recursion is rewritten (A ::= A x | y  ->  A ::= y x*); any other
// left-recursive cycle is a compile error naming the rules.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/ast.h"
#include "grammar/dfa.h"

namespace deepinfer::grammar {

class Vocabulary;
struct StateMask;
struct SuffixTrie;

struct Rule {
  std::string name;
  NodeId body = -1;
};

// A grammar under construction. Rule 0..n-1; `root` is the start rule.
struct Grammar {
  Ast ast;
  std::vector<Rule> rules;
  int32_t root = 0;

  int32_t add_rule(std::string name, NodeId body = -1) {
    rules.push_back({std::move(name), body});
    return static_cast<int32_t>(rules.size() - 1);
  }
  int32_t find_rule(const std::string& name) const {
    for (size_t i = 0; i < rules.size(); ++i) if (rules[i].name == name) return static_cast<int32_t>(i);
    return -1;
  }
};

struct CompileLimits {
  int64_t max_states = 500'000;     // DFA states over all rules
  int64_t max_rule_states = 200'000;
  double max_compile_ms = 250.0;    // CPU time of the compiling thread for the whole compilation; then an error
  bool inline_small_rules = true;   // substitute small narrow non-recursive rules into callers
};

class CompiledGrammar {
 public:
  static Result<std::shared_ptr<const CompiledGrammar>> compile(
      Grammar grammar, std::shared_ptr<const Vocabulary> vocab, const CompileLimits& limits = {});
  ~CompiledGrammar();

  int32_t n_rules() const { return static_cast<int32_t>(dfas_.size()); }
  int32_t root() const { return root_; }
  // Whether some rule calls the root (then its states also run with a caller below them).
  bool root_is_called() const { return root_is_called_; }
  const Dfa& dfa(int32_t rule) const { return *dfas_[static_cast<size_t>(rule)]; }
  const std::string& rule_name(int32_t rule) const { return names_[static_cast<size_t>(rule)]; }
  // The rule can finish at `state` without reading more input (accepting or nullable calls).
  bool can_complete(int32_t rule, int32_t state) const {
    return complete_[static_cast<size_t>(state_base_[rule] + state)] != 0;
  }
  // Dfa::SliceBounds of the rule's automaton at `state` (see Vocabulary slices).
  uint8_t slice_lo(int32_t rule, int32_t state) const { return dfas_[rule]->slice_bounds().lo[state]; }
  uint8_t slice_hi(int32_t rule, int32_t state) const { return dfas_[rule]->slice_bounds().hi[state]; }
  int32_t n_states_total() const { return static_cast<int32_t>(complete_.size()); }
  int32_t state_index(int32_t rule, int32_t state) const { return state_base_[rule] + state; }
  // Token terminals: vocabulary ids matched by id (terminal index i <-> token id).
  const std::vector<int32_t>& terminal_tokens() const { return terminal_tokens_; }
  const Vocabulary& vocab() const { return *vocab_; }
  const std::shared_ptr<const Vocabulary>& vocab_ptr() const { return vocab_; }
  double compile_ms() const { return compile_ms_; }

  // The context-independent token classification of (rule, state), built on first use.
  const StateMask& state_mask(int32_t rule, int32_t state) const;
  // The class of (rule, state) among the rule's states that no input of up to the longest token's
  // bytes tells apart, in the caller's role too (Dfa::depth_classes with call edges), or -1 where
  // that is not known cheaply: a rule calling one that may read nothing (a call would then not
  // bound the bytes), or a small or costly automaton (the classes are worth their refinement for
  // counted repetitions: a state per count). The matcher keys its recent masks by these classes.
  int32_t frame_class(int32_t rule, int32_t state) const;
  // Counts a matcher's mask computed (not found in its memo) with `rule` in some frame: the
  // classes of a rule are refined once its misses have cost about what the refinement does.
  void note_frame_miss(int32_t rule) const { frame_misses_[static_cast<size_t>(rule)].fetch_add(1, std::memory_order_relaxed); }
  // Adds a vocabulary walk's work (mask_cache.cc) for a state of `rule`; returns the rule's total.
  int64_t add_walk_work(int32_t rule, int64_t work) const {
    return walk_work_[static_cast<size_t>(rule)].fetch_add(work, std::memory_order_relaxed) + work;
  }

 private:
  CompiledGrammar() = default;
  friend class GrammarCompilerImpl;

  int32_t root_ = 0;
  bool root_is_called_ = false;
  std::vector<int32_t> misses_to_classes_;  // [rule]: misses before frame_class refines; -1 never
  mutable std::unique_ptr<std::atomic<int32_t>[]> frame_misses_;  // [rule]
  std::vector<std::shared_ptr<const Dfa>> dfas_;  // shared with front-end caches where possible
  std::vector<std::string> names_;
  std::vector<int32_t> state_base_;
  std::vector<uint8_t> complete_;
  std::vector<int32_t> terminal_tokens_;
  std::shared_ptr<const Vocabulary> vocab_;
  double compile_ms_ = 0;

  mutable std::mutex cache_mu_;
  mutable std::unique_ptr<std::atomic<const StateMask*>[]> cache_;
  mutable std::vector<std::shared_ptr<const StateMask>> cache_owned_;
  mutable std::unique_ptr<std::atomic<int64_t>[]> walk_work_;  // [rule]: its states' walks' work
};

}  // namespace deepinfer::grammar
