// Building StateMasks: a walk of the vocabulary trie from one (rule, state) — a plain DFA walk for
// leaf rules, a pushdown walk (Stepper over a local arena whose bottom is kContext) otherwise —
// over only the tokens outside the slice the state provably accepts (Vocabulary::rest_trie);
// then the suffix trie of rule-finishing tokens. Also the per-state slice depth analysis.
#include "grammar/mask_cache.h"

#include <algorithm>
#include <deque>
#include <string>

#include <xxhash.h>

#include "grammar/grammar.h"
#include "grammar/stack.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar {

size_t StateMask::memory_bytes() const {
  return sizeof(*this) + ids.size() * 4 + bits.size() * 4 + suffixes.nodes.size() * sizeof(SuffixTrie::Node) +
         suffixes.tokens.size() * 4;
}

void StateMask::or_into(uint32_t* mask, const Vocabulary& vocab) const {
  const int32_t n_words = vocab.n_words();
  if (slice_level >= 0) {
    const uint32_t* s = vocab.slice_bits(slice_level);
    for (int32_t w = 0; w < n_words; ++w) mask[w] |= s[w];
  }
  if (!bits.empty()) {
    for (int32_t w = 0; w < n_words; ++w) mask[w] |= bits[w];
  } else {
    for (int32_t id : ids) mask[id >> 5] |= 1u << (id & 31);
  }
}

Dfa::SliceBounds compute_slice_bounds(const Dfa& dfa) {
  const int32_t n = dfa.n_states();
  Dfa::SliceBounds out;
  out.lo.assign(n, kUnboundedSlice);
  out.hi.assign(n, kUnboundedSlice);
  if (n == 0) return out;
  static const std::vector<Utf8Sequence> kSeqs = [] {
    std::vector<Utf8Sequence> seqs;
    for (auto [lo, hi] : {std::pair<uint32_t, uint32_t>{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodepoint}}) {
      for (const auto& s : utf8_sequences(lo, hi)) seqs.push_back(s);
    }
    return seqs;
  }();
  // Classes hit by each byte range of each sequence.
  std::vector<std::vector<std::vector<int32_t>>> classes(kSeqs.size());
  for (size_t k = 0; k < kSeqs.size(); ++k) {
    classes[k].resize(kSeqs[k].n);
    for (int i = 0; i < kSeqs[k].n; ++i) {
      for (int b = kSeqs[k].lo[i]; b <= kSeqs[k].hi[i]; ++b) {
        const int32_t c = dfa.byte_class(static_cast<uint8_t>(b));
        auto& v = classes[k][i];
        if (std::find(v.begin(), v.end(), c) == v.end()) v.push_back(c);
      }
    }
  }
  // One-character successors (live ones) and whether some character kills the state.
  std::vector<std::vector<int32_t>> succ(n), preds(n);
  std::vector<uint8_t> dies(n, 0);
  std::vector<int32_t> cur, next;
  for (int32_t q = 0; q < n; ++q) {
    for (size_t k = 0; k < kSeqs.size(); ++k) {
      cur.assign(1, q);
      for (int i = 0; i < kSeqs[k].n && !cur.empty(); ++i) {
        next.clear();
        for (int32_t s : cur) {
          for (int32_t c : classes[k][i]) {
            const int32_t t = dfa.next_class(s, c);
            if (t < 0) { dies[q] = 1; continue; }
            if (std::find(next.begin(), next.end(), t) == next.end()) next.push_back(t);
          }
        }
        cur.swap(next);
      }
      for (int32_t t : cur) {
        if (std::find(succ[q].begin(), succ[q].end(), t) == succ[q].end()) { succ[q].push_back(t); preds[t].push_back(q); }
      }
    }
  }
  // lo: shortest count of characters that kills q, minus one.
  std::vector<int32_t> dist(n, -1);
  std::deque<int32_t> queue;
  for (int32_t q = 0; q < n; ++q) if (dies[q]) { dist[q] = 1; queue.push_back(q); }
  while (!queue.empty()) {
    const int32_t q = queue.front();
    queue.pop_front();
    for (int32_t p : preds[q]) {
      if (dist[p] < 0) { dist[p] = dist[q] + 1; queue.push_back(p); }
    }
  }
  for (int32_t q = 0; q < n; ++q) {
    if (dist[q] >= 0) out.lo[q] = static_cast<uint8_t>(std::min(dist[q] - 1, 254));
  }
  // hi: longest live path (unbounded if it can reach a cycle), by peeling sinks (Kahn on succ).
  std::vector<int32_t> out_degree(n), longest(n, 0);
  for (int32_t q = 0; q < n; ++q) out_degree[q] = static_cast<int32_t>(succ[q].size());
  for (int32_t q = 0; q < n; ++q) if (out_degree[q] == 0) queue.push_back(q);
  std::vector<uint8_t> done(n, 0);
  while (!queue.empty()) {
    const int32_t q = queue.front();
    queue.pop_front();
    done[q] = 1;
    for (int32_t t : succ[q]) longest[q] = std::max(longest[q], longest[t] + 1);
    for (int32_t p : preds[q]) if (--out_degree[p] == 0) queue.push_back(p);
  }
  for (int32_t q = 0; q < n; ++q) {
    if (done[q]) out.hi[q] = static_cast<uint8_t>(std::min(longest[q], 254));
  }
  // sealed: accepting states are not reachable through characters.
  out.sealed.assign(n, 1);
  for (int32_t q = 0; q < n; ++q) if (dfa.accepting(q)) { out.sealed[q] = 0; queue.push_back(q); }
  while (!queue.empty()) {
    const int32_t q = queue.front();
    queue.pop_front();
    for (int32_t p : preds[q]) if (out.sealed[p]) { out.sealed[p] = 0; queue.push_back(p); }
  }
  return out;
}

namespace {

class Walk {
 public:
  // with_suffixes = false: the suffix trie is left empty (for states that never have a caller
  // below them, where the matcher never reads it).
  Walk(const CompiledGrammar& g, int32_t rule, int32_t state, bool with_suffixes)
      : g_(g), v_(g.vocab()), rule_(rule), state_(state), with_suffixes_(with_suffixes) {
    out_ = std::make_shared<StateMask>();
    const int level = Vocabulary::slice_level(g.slice_lo(rule, state));
    trie_ = &v_.rest_trie(level);
    out_->slice_level = static_cast<int8_t>(level);
    slice_max_ = level >= 0 ? kSliceLengths[level] : 0;
    // Only where the rule cannot finish inside such a token (it would continue in the caller).
    const Dfa::SliceBounds& b = g.dfa(rule).slice_bounds();
    if (b.sealed[state]) longest_ = b.hi[state];
    out_->exit_at_root = g.can_complete(rule, state);
    accepted_.assign(static_cast<size_t>(v_.n_words()), 0);
  }

  std::shared_ptr<const StateMask> run() {
    if (g_.dfa(rule_).has_calls()) walk_pushdown(); else walk_leaf();
    finish();
    return out_;
  }
  // Trie nodes visited and suffix entries made: the walk's cost in deterministic units.
  int64_t work() const { return work_; }

 private:
  void accept_node(const TrieNode& node) {
    for (int32_t t = node.token; t >= 0; t = v_.next_duplicate(t)) {
      accepted_[t >> 5] |= 1u << (t & 31);
      ++out_->n_accepted;
    }
  }
  bool is_accepted(int32_t t) const {
    return ((accepted_[t >> 5] >> (t & 31)) & 1u) || v_.slice_length(t) <= slice_max_;
  }
  void walk_leaf();
  void walk_pushdown();
  void finish();
  void build_suffixes();

  const CompiledGrammar& g_;
  const Vocabulary& v_;
  const std::vector<TrieNode>* trie_;
  int32_t rule_, state_;
  bool with_suffixes_;
  uint8_t longest_ = kUnboundedSlice;  // slice tokens longer than this are all rejected
  uint8_t slice_max_ = 0;
  std::shared_ptr<StateMask> out_;
  std::vector<uint32_t> accepted_;
  std::vector<int32_t> exits_;  // trie nodes after which the rule may return
  int64_t work_ = 0;
};

void Walk::walk_leaf() {
  const Dfa& dfa = g_.dfa(rule_);
  std::vector<int32_t> st(1, state_);
  const std::vector<TrieNode>& trie = *trie_;
  const int32_t n = static_cast<int32_t>(trie.size());
  for (int32_t i = 1; i < n;) {
    const TrieNode& node = trie[i];
    ++work_;
    if (node.min_slice > longest_) { i = node.end; continue; }
    const int32_t t = dfa.next(st[node.depth - 1], node.byte);
    if (t < 0) { i = node.end; continue; }
    if (st.size() <= node.depth) st.resize(node.depth + 1);
    st[node.depth] = t;
    accept_node(node);
    if (node.end > i + 1 && dfa.accepting(t)) exits_.push_back(i);
    ++i;
  }
}

void Walk::walk_pushdown() {
  const Dfa& dfa = g_.dfa(rule_);
  StackArena arena;
  Stepper stepper(g_, arena);
  std::vector<std::vector<int32_t>> cfg(2);
  const std::vector<TrieNode>& trie = *trie_;
  const int32_t n = static_cast<int32_t>(trie.size());
  for (int32_t i = 1; i < n;) {
    const TrieNode& node = trie[i];
    const int d = node.depth;
    if (cfg.size() <= static_cast<size_t>(d)) cfg.resize(d + 1);
    if (d == 1) {
      // Depth 0 reads only this rule's own bytes: calls at `state` are separate matcher stacks.
      const int32_t t = dfa.next(state_, node.byte);
      cfg[1].clear();
      if (t >= 0) cfg[1].push_back(arena.make(kContext, rule_, t));
    } else if (!stepper.step(cfg[d - 1], node.byte, cfg[d])) {
      cfg[d].clear();  // too ambiguous: fail closed (the token is not allowed)
    }
    if (cfg[d].empty()) { i = node.end; continue; }
    accept_node(node);
    if (node.end > i + 1 && stepper.can_finish_any(cfg[d], kContext)) exits_.push_back(i);
    ++i;
  }
}

void Walk::build_suffixes() {
  // A token's remaining bytes after an exit at depth `base` are the tail of its own bytes: views
  // into the vocabulary, no copies (a counted [a-z ] repetition's states give every token with a
  // letter prefix one entry per letter: ~10^5-10^6 entries at 129K tokens).
  std::vector<std::pair<std::string_view, int32_t>> entries;
  const std::vector<TrieNode>& trie = *trie_;
  for (int32_t e : exits_) {
    const int base = trie[e].depth;
    for (int32_t j = e + 1; j < trie[e].end; ++j) {
      const TrieNode& node = trie[j];
      for (int32_t t = node.token; t >= 0; t = v_.next_duplicate(t)) {
        if (!is_accepted(t)) entries.emplace_back(v_.token_bytes(t).substr(static_cast<size_t>(base)), t);
      }
    }
  }
  work_ += static_cast<int64_t>(entries.size());
  if (entries.empty()) return;
  std::sort(entries.begin(), entries.end());
  SuffixTrie& st = out_->suffixes;
  st.nodes.push_back({0, 0, 0, 0, 0});
  std::vector<int32_t> open{0};
  const std::string_view* prev = nullptr;
  for (size_t k = 0; k < entries.size();) {
    const std::string_view& s = entries[k].first;
    size_t lcp = 0;
    if (prev) while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    while (open.size() > lcp + 1) {
      st.nodes[open.back()].end = static_cast<int32_t>(st.nodes.size());
      open.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      const auto begin = static_cast<int32_t>(st.tokens.size());
      st.nodes.push_back({0, begin, begin, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
      open.push_back(static_cast<int32_t>(st.nodes.size() - 1));
    }
    SuffixTrie::Node& last = st.nodes[open.back()];
    last.tok_begin = static_cast<int32_t>(st.tokens.size());
    for (; k < entries.size() && entries[k].first == s; ++k) st.tokens.push_back(entries[k].second);
    last.tok_end = static_cast<int32_t>(st.tokens.size());
    prev = &s;
  }
  while (!open.empty()) {
    st.nodes[open.back()].end = static_cast<int32_t>(st.nodes.size());
    open.pop_back();
  }
}

void Walk::finish() {
  if (with_suffixes_) build_suffixes();
  // Sparse when the list is no larger than the bitmask.
  if (out_->n_accepted <= v_.n_words()) {
    for (int32_t w = 0; w < v_.n_words(); ++w) {
      for (uint32_t bitsw = accepted_[w]; bitsw; bitsw &= bitsw - 1) {
        out_->ids.push_back(w * 32 + __builtin_ctz(bitsw));
      }
    }
  } else {
    out_->bits = std::move(accepted_);
  }
}

// Whether at most `limit` states are reachable from `state` (then the digest is cheap).
bool small_reachable(const Dfa& dfa, int32_t state, int32_t limit) {
  std::vector<int32_t> seen{state};
  for (size_t i = 0; i < seen.size(); ++i) {
    for (int32_t c = 0; c < dfa.n_classes(); ++c) {
      const int32_t t = dfa.next_class(seen[i], c);
      if (t >= 0 && std::find(seen.begin(), seen.end(), t) == seen.end()) {
        seen.push_back(t);
        if (static_cast<int32_t>(seen.size()) > limit) return false;
      }
    }
  }
  return true;
}

// The cache key of a large leaf automaton's state by its class of states no token tells apart
// (Dfa::depth_classes over the vocabulary's longest token) and the Walk's other inputs.
std::array<uint64_t, 2> depth_class_key(const CompiledGrammar& grammar, int32_t rule, int32_t state,
                                        const Dfa::DepthClasses& classes) {
  const Dfa& dfa = grammar.dfa(rule);
  const Dfa::SliceBounds& b = dfa.slice_bounds();
  const uint64_t words[] = {dfa.uid(), static_cast<uint64_t>(classes.depth),
                            static_cast<uint64_t>(classes.of[static_cast<size_t>(state)]),
                            static_cast<uint64_t>(Vocabulary::slice_level(b.lo[state]) + 1),
                            b.sealed[state] ? b.hi[state] + 1u : 0u,
                            grammar.can_complete(rule, state) ? 1u : 0u};
  const XXH128_hash_t h = XXH3_128bits(words, sizeof(words));
  return {h.low64, h.high64};
}

// Whether a rule whose vocabulary walks have done `walk_work` so far (Walk::work: trie nodes and
// suffix entries, each a few ns) has earned its automaton's depth classes (ski rental: the
// refinement is computed once the walks it could have saved cost as much). Its cost, ~3-4 ns per
// (state, byte class, round) on the dev machine, reaches ~25 ms for the largest JSON-schema
// automata (2,700 states, 22 classes, 128 rounds) whose walks are cheap; computed up front for
// every large automaton it took grammar_bench's JSON-schema mask p99.9 from ~0.4 to ~23 ms. A
// counted repetition's ~400 states cost ~0.5 ms against ~13 ms per walk: classes after its
// first walk. Work units, not time, so the choice (and what the tests see) is deterministic.
bool classes_earned(const Dfa& dfa, int32_t depth, int64_t walk_work) {
  return walk_work >= static_cast<int64_t>(dfa.n_states()) * (dfa.n_classes() + 1) * depth;
}

}  // namespace

std::shared_ptr<const StateMask> lookup_or_build_state_mask(const CompiledGrammar& grammar,
                                                            int32_t rule, int32_t state) {
  const Dfa& dfa = grammar.dfa(rule);
  // Leaf states are shared across grammars: by automaton identity (front ends hand out cached
  // automata), and for small automata also by structure (equal rules built separately).
  const bool leaf = !dfa.has_calls();
  // The root's states, where no rule calls the root, never have a caller below them: the matcher
  // reads no suffix trie there (Matcher::add_stack), so the walk builds none — the trie of a
  // counted [a-z ] repetition's state holds most of the vocabulary and was ~90% of its walk. Such
  // masks lack what a called rule's need, so their keys are kept apart (the same automaton may be
  // a called rule in another grammar).
  const bool rootless = rule == grammar.root() && !grammar.root_is_called();
  const uint64_t apart = rootless ? 0x9E3779B97F4A7C15ull : 0;
  const std::array<uint64_t, 2> id_key{dfa.uid() ^ apart, static_cast<uint64_t>(state) | (uint64_t{1} << 63)};
  std::array<uint64_t, 2> digest_key{};
  const bool small = leaf && small_reachable(dfa, state, 64);
  // Large automata: by what the state does within the longest token's bytes, once the rule has
  // earned its depth classes. A counted repetition ([a-z ]{1,400}, a string's maxLength) has a
  // state per count, and each step's new state would walk the vocabulary again (~13 ms at 129K
  // tokens); with the classes, the states more than a token's length from the count's end share
  // one mask. The Walk also reads the state's slice level, sealed bound and completability: they
  // join the key.
  const int32_t depth = grammar.vocab().max_token_bytes();
  std::shared_ptr<const Dfa::DepthClasses> classes;
  bool by_digest = small;
  if (leaf) {
    if (auto hit = grammar.vocab().find_shared(id_key)) return hit;
    if (small) {
      digest_key = dfa.digest_from(state);
    } else if ((classes = dfa.depth_classes(depth, /*compute=*/false))) {
      digest_key = depth_class_key(grammar, rule, state, *classes);
      by_digest = true;
    }
    digest_key[0] ^= apart;
    if (by_digest) {
      if (auto hit = grammar.vocab().find_shared(digest_key)) {
        grammar.vocab().put_shared(id_key, hit);
        return hit;
      }
    }
  }
  Walk walk(grammar, rule, state, /*with_suffixes=*/!rootless);
  auto mask = walk.run();
  if (leaf && !small && !classes) {
    if (classes_earned(dfa, depth, grammar.add_walk_work(rule, walk.work()))) {
      classes = dfa.depth_classes(depth);
      digest_key = depth_class_key(grammar, rule, state, *classes);
      digest_key[0] ^= apart;
      by_digest = true;
    }
  }
  if (leaf) grammar.vocab().put_shared(id_key, mask);
  if (by_digest) grammar.vocab().put_shared(digest_key, mask);
  return mask;
}

}  // namespace deepinfer::grammar
