// Grammar compilation: validation, direct-left-recursion rewrite, per-rule DFA construction in
// callee-first order with inlining of small narrow rules, removal of unproductive calls, and the
// analyses the runtime needs (can-complete, left-recursion check, slice depth).
#include "grammar/grammar.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include "base/check.h"
#include "grammar/mask_cache.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar {

CompiledGrammar::~CompiledGrammar() = default;

class GrammarCompilerImpl {
 public:
  GrammarCompilerImpl(Grammar g, std::shared_ptr<const Vocabulary> vocab, const CompileLimits& limits)
      : g_(std::move(g)), vocab_(std::move(vocab)), limits_(limits) {
    start_ = std::chrono::steady_clock::now();
    auto_limits_.max_states = limits.max_rule_states;
    auto_limits_.deadline =
        ThreadCpuClock::now() + std::chrono::microseconds(static_cast<int64_t>(limits.max_compile_ms * 1000));
  }

  Result<std::shared_ptr<const CompiledGrammar>> run();

 private:
  Status validate();
  Status rewrite_left_recursion();
  void collect_refs(NodeId id, std::vector<int32_t>& out, std::vector<uint8_t>& seen) const;
  NodeId substitute(NodeId id, std::unordered_map<NodeId, NodeId>& memo);
  Status compile_rules();
  Status prune_unproductive();
  void compute_complete();
  Status check_left_recursion();
  void compute_slice_bounds();
  bool inlinable(int32_t rule, const Dfa& dfa) const;

  Grammar g_;
  std::shared_ptr<const Vocabulary> vocab_;
  CompileLimits limits_;
  AutomatonLimits auto_limits_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::vector<int32_t>> refs_;
  std::vector<uint8_t> recursive_;
  std::vector<std::shared_ptr<const Dfa>> inline_dfa_;  // non-null: rule is substituted
  std::map<int32_t, int32_t> terminal_index_;
  std::shared_ptr<CompiledGrammar> out_;
};

Status GrammarCompilerImpl::validate() {
  if (g_.rules.empty()) return invalid_argument("grammar has no rules");
  if (g_.root < 0 || g_.root >= static_cast<int32_t>(g_.rules.size())) {
    return invalid_argument("grammar root rule {} does not exist", g_.root);
  }
  refs_.assign(g_.rules.size(), {});
  for (size_t r = 0; r < g_.rules.size(); ++r) {
    if (g_.rules[r].body < 0) return invalid_argument("rule '{}' is used but never defined", g_.rules[r].name);
    std::vector<uint8_t> seen(g_.ast.n_nodes(), 0);
    collect_refs(g_.rules[r].body, refs_[r], seen);
    for (int32_t callee : refs_[r]) {
      if (callee < 0 || callee >= static_cast<int32_t>(g_.rules.size())) {
        return invalid_argument("rule '{}' calls rule {} which does not exist", g_.rules[r].name, callee);
      }
    }
  }
  return Status::ok();
}

void GrammarCompilerImpl::collect_refs(NodeId id, std::vector<int32_t>& out,
                                       std::vector<uint8_t>& seen) const {
  if (seen[id]) return;
  seen[id] = 1;
  const Node& n = g_.ast.node(id);
  if (n.op == Op::kRule) out.push_back(n.a);
  if (n.op == Op::kDfa) {
    const Dfa& d = *g_.ast.dfa(n.a);
    for (int32_t s = 0; s < d.n_states(); ++s) {
      for (auto [e, end] = d.calls(s); e != end; ++e) out.push_back(e->label);
    }
  }
  for (NodeId k : n.kids) collect_refs(k, out, seen);
  if ((n.op == Op::kSeparated || n.op == Op::kPermutation) && n.b >= 0) collect_refs(n.b, out, seen);
}

Status GrammarCompilerImpl::rewrite_left_recursion() {
  for (size_t r = 0; r < g_.rules.size(); ++r) {
    const NodeId body = g_.rules[r].body;
    const Node& bn = g_.ast.node(body);
    std::vector<NodeId> alts = bn.op == Op::kAlt ? bn.kids : std::vector<NodeId>{body};
    std::vector<NodeId> base, rests;
    for (NodeId k : alts) {
      const Node& kn = g_.ast.node(k);
      if (kn.op == Op::kRule && kn.a == static_cast<int32_t>(r)) {
        rests.push_back(g_.ast.empty());
      } else if (kn.op == Op::kConcat && g_.ast.node(kn.kids[0]).op == Op::kRule &&
                 g_.ast.node(kn.kids[0]).a == static_cast<int32_t>(r)) {
        std::vector<NodeId> rest(kn.kids.begin() + 1, kn.kids.end());
        rests.push_back(g_.ast.concat(std::move(rest)));
      } else {
        base.push_back(k);
      }
    }
    if (rests.empty()) continue;
    if (base.empty()) {
      return invalid_argument("rule '{}' is left-recursive in every alternative (it matches nothing)",
                              g_.rules[r].name);
    }
    g_.rules[r].body = g_.ast.concat({g_.ast.alt(std::move(base)), g_.ast.star(g_.ast.alt(std::move(rests)))});
  }
  return Status::ok();
}

NodeId GrammarCompilerImpl::substitute(NodeId id, std::unordered_map<NodeId, NodeId>& memo) {
  if (auto it = memo.find(id); it != memo.end()) return it->second;
  Node n = g_.ast.node(id);
  NodeId result = id;
  if (n.op == Op::kRule && inline_dfa_[n.a]) {
    result = g_.ast.dfa(inline_dfa_[n.a]);
  } else if (!n.kids.empty()) {
    bool changed = false;
    std::vector<NodeId> kids;
    for (NodeId k : n.kids) {
      kids.push_back(substitute(k, memo));
      changed |= kids.back() != k;
    }
    NodeId sep = n.b;
    if ((n.op == Op::kSeparated || n.op == Op::kPermutation) && n.b >= 0) {
      sep = substitute(n.b, memo);
      changed |= sep != n.b;
    }
    if (changed) {
      switch (n.op) {
        case Op::kConcat: result = g_.ast.concat(std::move(kids)); break;
        case Op::kAlt: result = g_.ast.alt(std::move(kids)); break;
        case Op::kRepeat: result = g_.ast.repeat(kids[0], n.a, n.b); break;
        case Op::kSeparated:
        case Op::kPermutation: {
          NodeId extra = -1;
          if (n.has_extra) { extra = kids.back(); kids.pop_back(); }
          result = n.op == Op::kSeparated
                       ? g_.ast.separated(std::move(kids), n.required, sep, extra, n.min_count, n.max_count)
                       : g_.ast.permutation(std::move(kids), n.required, sep, extra, n.min_count, n.max_count);
          break;
        }
        default: break;
      }
    }
  }
  memo.emplace(id, result);
  return result;
}

bool GrammarCompilerImpl::inlinable(int32_t rule, const Dfa& dfa) const {
  if (!limits_.inline_small_rules || rule == g_.root || recursive_[rule]) return false;
  if (dfa.n_states() > 48 || dfa.has_tokens()) return false;
  // A self-loop wider than the digits (free text, string bodies, identifiers) stays a separate
  // rule: its states are walked with the fast leaf walk, cached once and shared by all callers
  // (and across grammars), instead of once per caller position with the pushdown walk.
  for (int32_t s = 0; s < dfa.n_states(); ++s) {
    int loops = 0;
    for (int b = 0; b < 256; ++b) loops += dfa.next(s, static_cast<uint8_t>(b)) == s;
    if (loops > 10) return false;
  }
  return true;
}

Status GrammarCompilerImpl::compile_rules() {
  const int32_t n = static_cast<int32_t>(g_.rules.size());
  // Tarjan SCCs: recursion flags and a callee-first order.
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1), order, stack;
  std::vector<uint8_t> on_stack(n, 0);
  int32_t counter = 0, n_comp = 0;
  std::function<void(int32_t)> strong = [&](int32_t v) {
    index[v] = low[v] = counter++;
    stack.push_back(v);
    on_stack[v] = 1;
    for (int32_t w : refs_[v]) {
      if (index[w] < 0) { strong(w); low[v] = std::min(low[v], low[w]); }
      else if (on_stack[w]) low[v] = std::min(low[v], index[w]);
    }
    if (low[v] == index[v]) {
      std::vector<int32_t> members;
      int32_t w;
      do { w = stack.back(); stack.pop_back(); on_stack[w] = 0; comp[w] = n_comp; members.push_back(w); } while (w != v);
      ++n_comp;
      for (int32_t m : members) order.push_back(m);
      if (members.size() > 1) for (int32_t m : members) recursive_[m] = 1;
    }
  };
  recursive_.assign(n, 0);
  for (int32_t r = 0; r < n; ++r) {
    for (int32_t c : refs_[r]) if (c == r) recursive_[r] = 1;
  }
  for (int32_t r = 0; r < n; ++r) if (index[r] < 0) strong(r);
  inline_dfa_.assign(n, nullptr);
  out_->dfas_.resize(n);
  int64_t total = 0;
  auto token_index = [&](int32_t token_id) -> int32_t {
    if (token_id < 0 || token_id >= vocab_->n_tokens()) return -1;
    auto [it, inserted] = terminal_index_.emplace(token_id, static_cast<int32_t>(terminal_index_.size()));
    return it->second;
  };
  for (int32_t r : order) {
    std::unordered_map<NodeId, NodeId> memo;
    const NodeId body = substitute(g_.rules[r].body, memo);
    std::shared_ptr<const Dfa> dfa;
    if (g_.ast.node(body).op == Op::kDfa) {
      dfa = g_.ast.dfa(g_.ast.node(body).a);  // a prebuilt automaton (front ends build them minimal)
    } else {
      DI_ASSIGN_OR_RETURN(Dfa built, DfaBuilder::from_ast(g_.ast, body, auto_limits_, token_index,
                                                          "rule '" + g_.rules[r].name + "'"));
      dfa = std::make_shared<const Dfa>(std::move(built));
    }
    total += dfa->n_states();
    if (total > limits_.max_states) {
      return resource_exhausted("grammar exceeds {} automaton states (at rule '{}')", limits_.max_states,
                                g_.rules[r].name);
    }
    if (inlinable(r, *dfa)) inline_dfa_[r] = dfa;
    out_->dfas_[r] = std::move(dfa);
  }
  return Status::ok();
}

Status GrammarCompilerImpl::prune_unproductive() {
  const int32_t n = out_->n_rules();
  std::vector<uint8_t> productive(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n; ++r) {
      if (productive[r]) continue;
      const Dfa& d = *out_->dfas_[r];
      if (d.empty()) continue;
      std::vector<uint8_t> seen(d.n_states(), 0);
      std::vector<int32_t> work{d.start()};
      seen[d.start()] = 1;
      bool found = false;
      while (!work.empty() && !found) {
        const int32_t s = work.back();
        work.pop_back();
        if (d.accepting(s)) { found = true; break; }
        auto push = [&](int32_t t) { if (t >= 0 && !seen[t]) { seen[t] = 1; work.push_back(t); } };
        for (int32_t c = 0; c < d.n_classes(); ++c) push(d.next_class(s, c));
        for (auto [e, end] = d.tokens(s); e != end; ++e) push(e->target);
        for (auto [e, end] = d.calls(s); e != end; ++e) if (productive[e->label]) push(e->target);
      }
      if (found) { productive[r] = 1; changed = true; }
    }
  }
  if (!productive[g_.root]) return invalid_argument("the grammar matches nothing (unsatisfiable)");
  for (int32_t r = 0; r < n; ++r) {
    const Dfa& d = *out_->dfas_[r];
    bool drop = false;
    for (int32_t s = 0; s < d.n_states() && !drop; ++s) {
      for (auto [e, end] = d.calls(s); e != end; ++e) drop |= !productive[e->label];
    }
    if (!drop) continue;
    RawDfa raw = DfaBuilder::to_raw(d);
    for (auto& calls : raw.calls) {
      std::erase_if(calls, [&](const LabeledEdge& e) { return !productive[e.label]; });
    }
    out_->dfas_[r] = std::make_shared<const Dfa>(DfaBuilder::minimize(raw));
  }
  return Status::ok();
}

void GrammarCompilerImpl::compute_complete() {
  const int32_t n = out_->n_rules();
  out_->state_base_.resize(n + 1);
  int32_t total = 0;
  for (int32_t r = 0; r < n; ++r) { out_->state_base_[r] = total; total += out_->dfas_[r]->n_states(); }
  out_->state_base_[n] = total;
  out_->complete_.assign(total, 0);
  for (int32_t r = 0; r < n; ++r) {
    const Dfa& d = *out_->dfas_[r];
    for (int32_t s = 0; s < d.n_states(); ++s) out_->complete_[out_->state_base_[r] + s] = d.accepting(s);
  }
  auto nullable = [&](int32_t r) {
    const Dfa& d = *out_->dfas_[r];
    return !d.empty() && out_->complete_[out_->state_base_[r] + d.start()];
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n; ++r) {
      const Dfa& d = *out_->dfas_[r];
      for (int32_t s = 0; s < d.n_states(); ++s) {
        uint8_t& c = out_->complete_[out_->state_base_[r] + s];
        if (c) continue;
        for (auto [e, end] = d.calls(s); e != end; ++e) {
          if (nullable(e->label) && out_->complete_[out_->state_base_[r] + e->target]) { c = 1; changed = true; break; }
        }
      }
    }
  }
}

Status GrammarCompilerImpl::check_left_recursion() {
  const int32_t n = out_->n_rules();
  // left[r]: rules called by r before r has read anything.
  std::vector<std::vector<int32_t>> left(n);
  for (int32_t r = 0; r < n; ++r) {
    const Dfa& d = *out_->dfas_[r];
    if (d.empty()) continue;
    std::vector<uint8_t> seen(d.n_states(), 0);
    std::vector<int32_t> work{d.start()};
    seen[d.start()] = 1;
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      for (auto [e, end] = d.calls(s); e != end; ++e) {
        left[r].push_back(e->label);
        const Dfa& callee = *out_->dfas_[e->label];
        const bool null = !callee.empty() && out_->can_complete(e->label, callee.start());
        if (null && !seen[e->target]) { seen[e->target] = 1; work.push_back(e->target); }
      }
    }
  }
  std::vector<int> color(n, 0);
  std::vector<int32_t> path;
  std::function<bool(int32_t)> dfs = [&](int32_t v) {
    color[v] = 1;
    path.push_back(v);
    for (int32_t w : left[v]) {
      if (color[w] == 1) { path.push_back(w); return true; }
      if (color[w] == 0 && dfs(w)) return true;
    }
    path.pop_back();
    color[v] = 2;
    return false;
  };
  for (int32_t r = 0; r < n; ++r) {
    if (color[r] != 0 || !dfs(r)) continue;
    std::string cycle;
    const int32_t last = path.back();
    size_t first = 0;
    while (path[first] != last) ++first;
    for (size_t i = first; i < path.size(); ++i) cycle += (i > first ? " -> " : "") + g_.rules[path[i]].name;
    return invalid_argument("left recursion is not supported (rules {}); rewrite it with repetition", cycle);
  }
  return Status::ok();
}

void GrammarCompilerImpl::compute_slice_bounds() {
  for (const auto& dfa : out_->dfas_) (void)dfa->slice_bounds();  // computed once, shared
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompilerImpl::run() {
  out_ = std::shared_ptr<CompiledGrammar>(new CompiledGrammar());
  DI_RETURN_IF_ERROR(validate());
  DI_RETURN_IF_ERROR(rewrite_left_recursion());
  DI_RETURN_IF_ERROR(validate());  // refs after the rewrite
  DI_RETURN_IF_ERROR(compile_rules());
  DI_RETURN_IF_ERROR(prune_unproductive());
  compute_complete();
  DI_RETURN_IF_ERROR(check_left_recursion());
  compute_slice_bounds();
  out_->root_ = g_.root;
  // frame_class: rules of more than 64 states (counted repetitions) whose callees all read at
  // least one byte, refined once their mask misses have cost about as much (ski rental): a miss
  // ~1 ms at 129K tokens for a counted rule repetition, the refinement ~4 ns per (state, symbol,
  // round). Refined on first use, the large JSON-schema rules took the schema benchmark's mask p99
  // from 135 to 253 us.
  const int64_t depth = vocab_->max_token_bytes();
  out_->misses_to_classes_.assign(out_->dfas_.size(), -1);
  out_->frame_misses_ = std::make_unique<std::atomic<int32_t>[]>(out_->dfas_.size());
  for (size_t r = 0; r < out_->dfas_.size(); ++r) {
    out_->frame_misses_[r].store(0);
    const Dfa& d = *out_->dfas_[r];
    int64_t n_calls = 0;
    bool callees_read = true;
    for (int32_t q = 0; q < d.n_states(); ++q) {
      for (auto [e, end] = d.calls(q); e != end; ++e) {
        ++n_calls;
        const Dfa& callee = *out_->dfas_[static_cast<size_t>(e->label)];
        callees_read = callees_read && !callee.empty() && !out_->complete_[out_->state_base_[e->label] + callee.start()];
      }
    }
    const int64_t ops = (static_cast<int64_t>(d.n_states()) * (d.n_classes() + 1) + n_calls) * depth;
    // Past ~16M steps (~60 ms) the refinement would stall a step too long whatever it saves.
    if (d.n_states() > 64 && callees_read && ops <= (int64_t{1} << 24)) {
      out_->misses_to_classes_[r] = static_cast<int32_t>(ops / 4000 + 1);
    }
  }
  for (const auto& d : out_->dfas_) {
    for (int32_t q = 0; q < d->n_states() && !out_->root_is_called_; ++q) {
      for (auto [e, end] = d->calls(q); e != end; ++e) out_->root_is_called_ |= e->label == g_.root;
    }
  }
  for (const Rule& r : g_.rules) out_->names_.push_back(r.name);
  out_->terminal_tokens_.resize(terminal_index_.size());
  for (const auto& [token, index] : terminal_index_) out_->terminal_tokens_[index] = token;
  out_->vocab_ = vocab_;
  out_->cache_ = std::make_unique<std::atomic<const StateMask*>[]>(out_->complete_.size());
  for (size_t i = 0; i < out_->complete_.size(); ++i) out_->cache_[i].store(nullptr);
  out_->walk_work_ = std::make_unique<std::atomic<int64_t>[]>(out_->dfas_.size());
  for (size_t i = 0; i < out_->dfas_.size(); ++i) out_->walk_work_[i].store(0);
  out_->compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  if (out_->compile_ms_ > limits_.max_compile_ms) {
    return resource_exhausted("grammar compile time {:.1f} ms exceeds the {:.0f} ms limit",
                              out_->compile_ms_, limits_.max_compile_ms);
  }
  return std::shared_ptr<const CompiledGrammar>(out_);
}

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::compile(
    Grammar grammar, std::shared_ptr<const Vocabulary> vocab, const CompileLimits& limits) {
  if (!vocab) return invalid_argument("grammar compile: no vocabulary");
  GrammarCompilerImpl impl(std::move(grammar), std::move(vocab), limits);
  return impl.run();
}

const StateMask& CompiledGrammar::state_mask(int32_t rule, int32_t state) const {
  const size_t index = static_cast<size_t>(state_base_[rule] + state);
  if (const StateMask* m = cache_[index].load(std::memory_order_acquire)) return *m;
  std::shared_ptr<const StateMask> built = lookup_or_build_state_mask(*this, rule, state);
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (const StateMask* m = cache_[index].load(std::memory_order_acquire)) return *m;
  cache_owned_.push_back(built);
  cache_[index].store(built.get(), std::memory_order_release);
  return *built;
}

int32_t CompiledGrammar::frame_class(int32_t rule, int32_t state) const {
  const int32_t need = misses_to_classes_[static_cast<size_t>(rule)];
  if (need < 0 || frame_misses_[static_cast<size_t>(rule)].load(std::memory_order_relaxed) < need) return -1;
  return dfa(rule).depth_classes(vocab_->max_token_bytes())->of[static_cast<size_t>(state)];
}

}  // namespace deepinfer::grammar
