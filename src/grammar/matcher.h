// Matcher: the per-request state of constrained decoding over one shared CompiledGrammar.
// Each step: fill_bitmask() for the next token, then accept() the sampled token. The state is a
// history of configurations (sets of hash-consed stacks), so rollback(n) (speculative decoding)
// is O(n). EOS is allowed exactly when the grammar can end; after it, only EOS is.
// Not thread-safe: one per request.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/stack.h"

namespace deepinfer::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Words needed by fill_bitmask: ceil(n_tokens / 32).
  int32_t n_words() const;
  // Bit i of word i/32 set = token i allowed next. Words past the vocabulary are zeroed.
  Status fill_bitmask(std::span<uint32_t> words);
  // Advances over `token` if the grammar allows it; false (state unchanged) otherwise.
  bool accept(int32_t token);
  // Advances over raw bytes (no tokenization); false (state unchanged) if not allowed.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last n accepted tokens.
  Status rollback(int32_t n);
  void reset();
  // Bytes the grammar forces next (stops before any choice, or where it may end).
  std::string find_jump_forward_string();
  bool can_terminate() const;
  bool is_terminated() const { return history_.back().terminated; }
  int32_t n_accepted() const { return static_cast<int32_t>(history_.size()) - 1; }
  const CompiledGrammar& grammar() const { return *g_; }

 private:
  struct Config {
    std::vector<int32_t> stacks;
    bool terminated = false;
  };
  struct MemoEntry {
    std::vector<int32_t> key;
    std::vector<uint32_t> mask;
  };

  bool advance(const std::vector<int32_t>& from, std::string_view bytes, std::vector<int32_t>& out);
  void compute_mask(const Config& config, uint32_t* mask);
  void add_stack(int32_t stack, uint32_t* mask, StackArena& arena, Stepper& stepper);
  void walk_suffixes(const SuffixTrie& trie, int32_t parent, uint32_t* mask, Stepper& stepper);

  std::shared_ptr<const CompiledGrammar> g_;
  StackArena arena_;
  Stepper stepper_;
  std::vector<Config> history_;
  std::vector<int32_t> visited_;
  std::vector<std::vector<int32_t>> walk_cfg_;
  std::vector<MemoEntry> memo_;  // most recent first
};

}  // namespace deepinfer::grammar
