// Byte-level deterministic automata: the per-rule automaton of a compiled grammar and the leaf
// automata (patterns, numbers, string alphabets) the front ends combine. Transitions on bytes are
// a dense table over byte classes; calls of other rules and token terminals are extra labelled
// edges (a state may both read bytes and call rules: the pushdown runtime explores both).
// Invariant after build/minimize: every state is live (an accepting state is reachable), dead
// transitions are -1, and state 0..n-1 are numbered in BFS order from start.
#pragma once

#include <array>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "grammar/ast.h"

namespace deepinfer::grammar {

struct LabeledEdge {
  int32_t label;   // rule id (call edges) or terminal-token index (token edges)
  int32_t target;  // DFA state
  bool operator==(const LabeledEdge& o) const { return label == o.label && target == o.target; }
};

class Dfa {
 public:
  int32_t n_states() const { return static_cast<int32_t>(accepting_.size()); }
  int32_t start() const { return start_; }
  int32_t n_classes() const { return n_classes_; }
  int32_t next(int32_t state, uint8_t byte) const {
    return table_[static_cast<size_t>(state) * n_classes_ + byte_class_[byte]];
  }
  int32_t next_class(int32_t state, int32_t cls) const {
    return table_[static_cast<size_t>(state) * n_classes_ + cls];
  }
  uint8_t byte_class(uint8_t byte) const { return byte_class_[byte]; }
  bool accepting(int32_t state) const { return accepting_[static_cast<size_t>(state)] != 0; }
  bool has_calls() const { return !calls_.empty(); }
  bool has_tokens() const { return !tokens_.empty(); }
  std::pair<const LabeledEdge*, const LabeledEdge*> calls(int32_t state) const {
    return {calls_.data() + call_offsets_[state], calls_.data() + call_offsets_[state + 1]};
  }
  std::pair<const LabeledEdge*, const LabeledEdge*> tokens(int32_t state) const {
    return {tokens_.data() + token_offsets_[state], tokens_.data() + token_offsets_[state + 1]};
  }
  // Whether the language is empty (a minimized DFA with no live start has 0 states).
  bool empty() const { return n_states() == 0; }
  // Runs a byte string from start; true if it ends in an accepting state (calls ignored).
  bool matches(std::string_view bytes) const;
  // 128-bit digest of the sub-automaton reachable from `state` (structure, not numbering).
  std::array<uint64_t, 2> digest_from(int32_t state) const;
  // Classes of states that no input of at most `depth` bytes tells apart (Moore's
  // k-equivalence, k = depth: the same acceptance after every such input, the same token edges
  // along it): two states of one class give every token of at most `depth` bytes the same fate. A
  // counted repetition's states further than `depth` from the count's end form one class (their
  // futures differ only past `depth`); a JSON automaton's states are mostly told apart within a
  // few bytes, where the refinement stops early. Computed once per depth (the vocabulary's
  // longest token), O(rounds * states * classes).
  struct DepthClasses {
    int32_t depth = -1;
    std::vector<int32_t> of;  // [state] -> class
    int32_t n = 0;            // classes
  };
  // compute = false: null unless already computed for this depth.
  std::shared_ptr<const DepthClasses> depth_classes(int32_t depth, bool compute = true) const;
  // Process-unique id of this automaton's content (copies share it): an exact cache key.
  uint64_t uid() const { return uid_; }
  size_t memory_bytes() const;
  // Per state, over strings of JSON-safe characters read through byte transitions: lo = the
  // largest k such that every string of <= k characters keeps the automaton alive; hi = the most
  // characters any such string can have while alive (255 = unbounded). Computed once.
  // sealed: no accepting state is reachable through such characters (the automaton can only
  // finish after some other byte, e.g. a closing quote).
  struct SliceBounds {
    std::vector<uint8_t> lo, hi, sealed;
  };
  const SliceBounds& slice_bounds() const;

 private:
  friend class DfaBuilder;
  mutable std::shared_ptr<const SliceBounds> slice_bounds_;  // lazy, atomically published
  mutable std::shared_ptr<const DepthClasses> depth_classes_;  // lazy, atomically published
  uint64_t uid_ = 0;
  int32_t start_ = 0;
  int32_t n_classes_ = 1;
  std::array<uint8_t, 256> byte_class_{};
  std::vector<int32_t> table_;       // [state * n_classes + class]
  std::vector<uint8_t> accepting_;
  std::vector<uint32_t> call_offsets_{0};
  std::vector<LabeledEdge> calls_;
  std::vector<uint32_t> token_offsets_{0};
  std::vector<LabeledEdge> tokens_;
};

// Unminimized form used while building: class-based rows plus labelled edges; may contain dead
// or unreachable states (minimize() removes them).
struct RawDfa {
  std::array<uint8_t, 256> byte_class{};
  int32_t n_classes = 1;
  int32_t start = 0;
  std::vector<int32_t> table;  // [state * n_classes + class], -1 = dead
  std::vector<uint8_t> accepting;
  std::vector<std::vector<LabeledEdge>> calls;
  std::vector<std::vector<LabeledEdge>> tokens;
  int32_t n_states() const { return static_cast<int32_t>(accepting.size()); }
  int32_t add_state() {
    table.resize(table.size() + static_cast<size_t>(n_classes), -1);
    accepting.push_back(0);
    calls.emplace_back();
    tokens.emplace_back();
    return n_states() - 1;
  }
};

// CPU time of the calling thread. Compilation runs on one thread, and its time budget counts only
// the work done for this grammar: a loaded machine must never turn a valid grammar into a
// time-limit error (wall-clock budgets did, at 2-3x load).
struct ThreadCpuClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<ThreadCpuClock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return time_point(duration(static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec));
  }
};

struct AutomatonLimits {
  int64_t max_states = 200'000;  // NFA and DFA states per automaton
  // Deadline of the whole compilation in the compiling thread's CPU time (fail closed when passed).
  ThreadCpuClock::time_point deadline = ThreadCpuClock::time_point::max();
  bool past_deadline() const { return ThreadCpuClock::now() > deadline; }
};

class DfaBuilder {
 public:
  // Compiles an AST (kRule nodes become call edges, kToken nodes token edges whose label is the
  // index returned by `token_index`) to a minimized DFA. Errors name `what` when over limits.
  static Result<Dfa> from_ast(const Ast& ast, NodeId root, const AutomatonLimits& limits,
                              const std::function<int32_t(int32_t)>& token_index,
                              const std::string& what);
  // Drops dead and unreachable states, merges equivalent ones (Hopcroft), merges equal byte
  // classes and numbers states in BFS order. An empty language gives a 0-state DFA.
  static Dfa minimize(const RawDfa& raw) { return finish(raw, true); }
  // Drops dead and unreachable states and merges equal byte classes, without merging states:
  // for constructions that are (nearly) minimal already, where Hopcroft would cost more than it saves.
  static Dfa trim(const RawDfa& raw) { return finish(raw, false); }
  static RawDfa to_raw(const Dfa& dfa);

 private:
  static Dfa finish(const RawDfa& raw, bool merge_states);
};

// A process-wide, thread-safe cache of built automata by key (front ends see the same
// constraints again and again); bounded: when full it starts over.
class DfaCache {
 public:
  std::shared_ptr<const Dfa> find(const std::string& key) const;
  void put(const std::string& key, std::shared_ptr<const Dfa> dfa);

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const Dfa>> map_;
};

// Leaf-DFA algebra (automata without calls or token edges).
Result<Dfa> dfa_intersect(const Dfa& a, const Dfa& b, const AutomatonLimits& limits,
                          const std::string& what);
// Strings over all bytes that `a` rejects.
Dfa dfa_complement(const Dfa& a);
Dfa dfa_union(const Dfa& a, const Dfa& b);
// A DFA accepting exactly the given byte strings.
Dfa dfa_from_strings(const std::vector<std::string>& strings);
// Shortest accepted byte string, if any (used in error messages and tests).
bool dfa_shortest_example(const Dfa& a, std::string& out);

}  // namespace deepinfer::grammar
