// AST -> Thompson NFA (bytes, UTF-8-expanded code-point classes, calls, token terminals, embedded
// DFAs, separated/permutation lists) -> subset construction -> minimized Dfa. Fragments never add
// edges into their entry or out of their exit state, so alternatives may share both.
#include <algorithm>
#include <map>
#include <unordered_map>

#include <xxhash.h>

#include "base/check.h"
#include "grammar/dfa.h"

namespace deepinfer::grammar {
namespace {

enum EdgeKind : uint8_t { kEps, kByte, kCall, kTok };

struct NfaEdge {
  EdgeKind kind;
  uint8_t lo, hi;
  int32_t label;
  int32_t target;
};

class NfaBuilder {
 public:
  NfaBuilder(const Ast& ast, const AutomatonLimits& limits,
             const std::function<int32_t(int32_t)>& token_index, const std::string& what)
      : ast_(ast), limits_(limits), token_index_(token_index), what_(what) {}

  Status build(NodeId root) {
    start_ = add_state();
    accept_ = add_state();
    return emit(root, start_, accept_);
  }

  std::vector<std::vector<NfaEdge>> out;
  int32_t start_ = 0, accept_ = 0;

 private:
  int32_t add_state() {
    out.emplace_back();
    return static_cast<int32_t>(out.size() - 1);
  }
  void edge(int32_t from, NfaEdge e) { out[from].push_back(e); }
  void eps(int32_t from, int32_t to) { edge(from, {kEps, 0, 0, 0, to}); }
  Status check_budget() {
    if (static_cast<int64_t>(out.size()) > limits_.max_states) {
      return resource_exhausted("{}: automaton exceeds {} states", what_, limits_.max_states);
    }
    if (limits_.past_deadline()) return resource_exhausted("{}: compile time limit exceeded", what_);
    return Status::ok();
  }
  Status emit(NodeId id, int32_t in, int32_t exit);
  Status emit_chars(const CodepointSet& set, int32_t in, int32_t exit);
  Status emit_dfa(const Dfa& dfa, int32_t in, int32_t exit);
  Status emit_repeat(const Node& n, int32_t in, int32_t exit);
  Status emit_separated(const Node& n, int32_t in, int32_t exit);
  Status emit_permutation(const Node& n, int32_t in, int32_t exit);
  // Emits (separator if `with_sep`) then item, from in to exit.
  Status emit_item(const Node& n, NodeId item, bool with_sep, int32_t in, int32_t exit) {
    if (!with_sep || n.b < 0) return emit(item, in, exit);
    const int32_t mid = add_state();
    DI_RETURN_IF_ERROR(emit(n.b, in, mid));
    return emit(item, mid, exit);
  }

  const Ast& ast_;
  const AutomatonLimits& limits_;
  const std::function<int32_t(int32_t)>& token_index_;
  const std::string& what_;
};

Status NfaBuilder::emit(NodeId id, int32_t in, int32_t exit) {
  DI_RETURN_IF_ERROR(check_budget());
  const Node& n = ast_.node(id);
  switch (n.op) {
    case Op::kEmpty: eps(in, exit); return Status::ok();
    case Op::kNothing: return Status::ok();
    case Op::kBytes: edge(in, {kByte, n.lo, n.hi, 0, exit}); return Status::ok();
    case Op::kChars: return emit_chars(ast_.charset(n.a), in, exit);
    case Op::kConcat: {
      int32_t cur = in;
      for (size_t i = 0; i < n.kids.size(); ++i) {
        const int32_t next = i + 1 == n.kids.size() ? exit : add_state();
        DI_RETURN_IF_ERROR(emit(n.kids[i], cur, next));
        cur = next;
      }
      return Status::ok();
    }
    case Op::kAlt:
      for (NodeId k : n.kids) {
        // Fresh entry per alternative keeps loops inside one alternative local to it.
        const int32_t s = add_state();
        eps(in, s);
        DI_RETURN_IF_ERROR(emit(k, s, exit));
      }
      return Status::ok();
    case Op::kRepeat: return emit_repeat(n, in, exit);
    case Op::kRule: edge(in, {kCall, 0, 0, n.a, exit}); return Status::ok();
    case Op::kToken: {
      const int32_t index = token_index_(n.a);
      if (index < 0) return invalid_argument("{}: token terminal {} is not in the vocabulary", what_, n.a);
      edge(in, {kTok, 0, 0, index, exit});
      return Status::ok();
    }
    case Op::kDfa: return emit_dfa(*ast_.dfa(n.a), in, exit);
    case Op::kSeparated: return emit_separated(n, in, exit);
    case Op::kPermutation: return emit_permutation(n, in, exit);
  }
  return internal_error("{}: unknown AST node", what_);
}

Status NfaBuilder::emit_chars(const CodepointSet& set, int32_t in, int32_t exit) {
  for (const auto& [lo, hi] : set.ranges()) {
    for (const Utf8Sequence& seq : utf8_sequences(lo, hi)) {
      int32_t cur = in;
      for (int i = 0; i < seq.n; ++i) {
        const int32_t next = i + 1 == seq.n ? exit : add_state();
        edge(cur, {kByte, seq.lo[i], seq.hi[i], 0, next});
        cur = next;
      }
    }
  }
  return check_budget();
}

Status NfaBuilder::emit_dfa(const Dfa& dfa, int32_t in, int32_t exit) {
  if (dfa.empty()) return Status::ok();
  // Byte runs per class.
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> runs(dfa.n_classes());
  for (int b = 0; b < 256; ++b) {
    auto& r = runs[dfa.byte_class(static_cast<uint8_t>(b))];
    if (!r.empty() && r.back().second + 1 == b) r.back().second = static_cast<uint8_t>(b);
    else r.emplace_back(static_cast<uint8_t>(b), static_cast<uint8_t>(b));
  }
  const int32_t base = static_cast<int32_t>(out.size());
  for (int32_t s = 0; s < dfa.n_states(); ++s) add_state();
  DI_RETURN_IF_ERROR(check_budget());
  eps(in, base + dfa.start());
  for (int32_t s = 0; s < dfa.n_states(); ++s) {
    for (int32_t c = 0; c < dfa.n_classes(); ++c) {
      const int32_t t = dfa.next_class(s, c);
      if (t < 0) continue;
      for (auto [lo, hi] : runs[c]) edge(base + s, {kByte, lo, hi, 0, base + t});
    }
    for (auto [e, end] = dfa.calls(s); e != end; ++e) edge(base + s, {kCall, 0, 0, e->label, base + e->target});
    for (auto [e, end] = dfa.tokens(s); e != end; ++e) edge(base + s, {kTok, 0, 0, e->label, base + e->target});
    if (dfa.accepting(s)) eps(base + s, exit);
  }
  return Status::ok();
}

Status NfaBuilder::emit_repeat(const Node& n, int32_t in, int32_t exit) {
  const NodeId kid = n.kids[0];
  int32_t cur = in;
  for (int32_t i = 0; i < n.a; ++i) {
    const int32_t next = add_state();
    DI_RETURN_IF_ERROR(emit(kid, cur, next));
    cur = next;
  }
  if (n.b == kUnbounded) {
    const int32_t loop = add_state();
    const int32_t back = add_state();
    eps(cur, loop);
    DI_RETURN_IF_ERROR(emit(kid, loop, back));
    eps(back, loop);
    eps(loop, exit);
    return Status::ok();
  }
  // Optional copies: each may be skipped straight to the exit.
  for (int32_t i = n.a; i < n.b; ++i) {
    eps(cur, exit);
    const int32_t next = i + 1 == n.b ? exit : add_state();
    DI_RETURN_IF_ERROR(emit(kid, cur, next));
    cur = next;
  }
  if (n.a == n.b) eps(cur, exit);
  return Status::ok();
}

// Count bookkeeping shared by separated and permutation lists: counts are capped at the largest
// value that still matters (max_count, or min_count when unbounded, and at least 1: whether an
// item was already emitted decides the separator).
struct ListCounter {
  int32_t min, max, cap;
  explicit ListCounter(const Node& n)
      : min(n.min_count), max(n.max_count),
        cap(n.max_count >= 0 ? n.max_count : std::max(n.min_count, 1)) {}
  bool can_add(int32_t c) const { return max < 0 || c < max; }
  int32_t bump(int32_t c) const { return std::min(c + 1, cap); }
};

Status NfaBuilder::emit_separated(const Node& n, int32_t in, int32_t exit) {
  const size_t n_items = n.required.size();
  const ListCounter count(n);
  if (count.cap > 4096) return resource_exhausted("{}: list count bound {} is too large", what_, count.cap);
  // st[i][c]: before item i with c items emitted.
  std::vector<std::vector<int32_t>> st(n_items + 1, std::vector<int32_t>(count.cap + 1, -1));
  st[0][0] = in;
  auto get = [&](size_t i, int32_t c) {
    if (st[i][c] < 0) st[i][c] = add_state();
    return st[i][c];
  };
  for (size_t i = 0; i < n_items; ++i) {
    for (int32_t c = 0; c <= count.cap; ++c) {
      if (st[i][c] < 0) continue;
      const int32_t from = st[i][c];
      if (!n.required[i]) eps(from, get(i + 1, c));
      if (count.can_add(c)) DI_RETURN_IF_ERROR(emit_item(n, n.kids[i], c > 0, from, get(i + 1, count.bump(c))));
    }
  }
  for (int32_t c = 0; c <= count.cap; ++c) {
    if (st[n_items][c] < 0 || !n.has_extra || !count.can_add(c)) continue;
    DI_RETURN_IF_ERROR(emit_item(n, n.kids.back(), c > 0, st[n_items][c], get(n_items, count.bump(c))));
  }
  for (int32_t c = count.min; c <= count.cap; ++c) {
    if (st[n_items][c] >= 0) eps(st[n_items][c], exit);
  }
  return Status::ok();
}

Status NfaBuilder::emit_permutation(const Node& n, int32_t in, int32_t exit) {
  const size_t n_items = n.required.size();
  if (n_items > 20) return resource_exhausted("{}: any-order list of {} items is too long", what_, n_items);
  const ListCounter count(n);
  if (count.cap > 64) return resource_exhausted("{}: list count bound {} is too large", what_, count.cap);
  uint32_t required_mask = 0;
  for (size_t i = 0; i < n_items; ++i) if (n.required[i]) required_mask |= 1u << i;
  std::unordered_map<uint64_t, int32_t> states;  // (seen mask, count) -> NFA state
  std::vector<std::pair<uint32_t, int32_t>> work{{0u, 0}};
  auto key = [](uint32_t seen, int32_t c) { return (uint64_t{seen} << 8) | static_cast<uint64_t>(c); };
  states[key(0, 0)] = in;
  auto get = [&](uint32_t seen, int32_t c) {
    auto [it, inserted] = states.emplace(key(seen, c), 0);
    if (inserted) {
      it->second = add_state();
      work.emplace_back(seen, c);
    }
    return it->second;
  };
  while (!work.empty()) {
    const auto [seen, c] = work.back();
    work.pop_back();
    const int32_t from = states[key(seen, c)];
    if (count.can_add(c)) {
      for (size_t i = 0; i < n_items; ++i) {
        if (seen & (1u << i)) continue;
        DI_RETURN_IF_ERROR(emit_item(n, n.kids[i], c > 0, from, get(seen | (1u << i), count.bump(c))));
      }
      if (n.has_extra) DI_RETURN_IF_ERROR(emit_item(n, n.kids.back(), c > 0, from, get(seen, count.bump(c))));
    }
    if ((seen & required_mask) == required_mask && c >= count.min) eps(from, exit);
    DI_RETURN_IF_ERROR(check_budget());
  }
  return Status::ok();
}

struct VecHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    return XXH3_64bits(v.data(), v.size() * sizeof(int32_t));
  }
};

class SubsetBuilder {
 public:
  SubsetBuilder(const NfaBuilder& nfa, const AutomatonLimits& limits, const std::string& what)
      : out_(nfa.out), accept_(nfa.accept_), limits_(limits), what_(what) {
    mark_.assign(out_.size(), 0);
    important_.assign(out_.size(), 0);
    for (size_t s = 0; s < out_.size(); ++s) {
      for (const auto& e : out_[s]) if (e.kind != kEps) important_[s] = 1;
    }
    important_[accept_] = 1;
    compute_classes();
  }

  Result<Dfa> run(int32_t start) {
    raw_.start = intern(closure({start}));
    std::vector<std::vector<int32_t>> moves(raw_.n_classes);
    std::vector<int32_t> touched;
    for (size_t i = 0; i < sets_.size(); ++i) {
      if (static_cast<int64_t>(sets_.size()) > limits_.max_states) {
        return resource_exhausted("{}: automaton exceeds {} states", what_, limits_.max_states);
      }
      if ((i & 255) == 0 && limits_.past_deadline()) {
        return resource_exhausted("{}: compile time limit exceeded", what_);
      }
      std::map<int32_t, std::vector<int32_t>> call_moves, token_moves;
      const std::vector<int32_t> set = sets_[i];
      for (int32_t s : set) {
        for (const auto& e : out_[s]) {
          if (e.kind == kByte) {
            for (int32_t c = raw_.byte_class[e.lo]; c <= raw_.byte_class[e.hi]; ++c) {
              if (moves[c].empty()) touched.push_back(c);
              moves[c].push_back(e.target);
            }
          } else if (e.kind == kCall) {
            call_moves[e.label].push_back(e.target);
          } else if (e.kind == kTok) {
            token_moves[e.label].push_back(e.target);
          }
        }
      }
      for (int32_t c : touched) {
        const int32_t t = intern(closure(moves[c]));
        raw_.table[i * static_cast<size_t>(raw_.n_classes) + c] = t;
        moves[c].clear();
      }
      touched.clear();
      // intern() may grow raw_, so take the target before indexing into it.
      for (auto& [label, seeds] : call_moves) {
        const int32_t t = intern(closure(seeds));
        raw_.calls[i].push_back({label, t});
      }
      for (auto& [label, seeds] : token_moves) {
        const int32_t t = intern(closure(seeds));
        raw_.tokens[i].push_back({label, t});
      }
    }
    return DfaBuilder::minimize(raw_);
  }

 private:
  void compute_classes() {
    std::array<bool, 257> boundary{};
    for (const auto& edges : out_) {
      for (const auto& e : edges) {
        if (e.kind != kByte) continue;
        boundary[e.lo] = true;
        boundary[e.hi + 1] = true;
      }
    }
    int32_t cls = 0;
    for (int b = 0; b < 256; ++b) {
      if (b > 0 && boundary[b]) ++cls;
      raw_.byte_class[b] = static_cast<uint8_t>(cls);
    }
    raw_.n_classes = cls + 1;
  }

  std::vector<int32_t> closure(const std::vector<int32_t>& seeds) {
    ++gen_;
    std::vector<int32_t> stack, result;
    for (int32_t s : seeds) {
      if (mark_[s] != gen_) { mark_[s] = gen_; stack.push_back(s); }
    }
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      if (important_[s]) result.push_back(s);
      for (const auto& e : out_[s]) {
        if (e.kind == kEps && mark_[e.target] != gen_) {
          mark_[e.target] = gen_;
          stack.push_back(e.target);
        }
      }
    }
    std::sort(result.begin(), result.end());
    return result;
  }

  int32_t intern(std::vector<int32_t> set) {
    if (set.empty()) return -1;
    auto it = ids_.find(set);
    if (it != ids_.end()) return it->second;
    const int32_t id = raw_.add_state();
    raw_.accepting[id] = std::binary_search(set.begin(), set.end(), accept_) ? 1 : 0;
    ids_.emplace(set, id);
    sets_.push_back(std::move(set));
    return id;
  }

  const std::vector<std::vector<NfaEdge>>& out_;
  int32_t accept_;
  const AutomatonLimits& limits_;
  const std::string& what_;
  RawDfa raw_;
  std::vector<uint32_t> mark_;
  uint32_t gen_ = 0;
  std::vector<uint8_t> important_;
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> ids_;
  std::vector<std::vector<int32_t>> sets_;
};

}  // namespace

Result<Dfa> DfaBuilder::from_ast(const Ast& ast, NodeId root, const AutomatonLimits& limits,
                                 const std::function<int32_t(int32_t)>& token_index,
                                 const std::string& what) {
  NfaBuilder nfa(ast, limits, token_index, what);
  DI_RETURN_IF_ERROR(nfa.build(root));
  SubsetBuilder subset(nfa, limits, what);
  return subset.run(nfa.start_);
}

}  // namespace deepinfer::grammar
