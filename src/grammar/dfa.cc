// Dfa queries and minimization (reachability, liveness, Hopcroft partition refinement over byte
// classes plus call/token labels, BFS renumbering, byte-class merging).
#include "grammar/dfa.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <unordered_map>

#include <xxhash.h>

#include "base/check.h"
#include "grammar/mask_cache.h"

namespace deepinfer::grammar {

bool Dfa::matches(std::string_view bytes) const {
  if (empty()) return false;
  int32_t s = start_;
  for (char c : bytes) {
    s = next(s, static_cast<uint8_t>(c));
    if (s < 0) return false;
  }
  return accepting(s);
}

std::array<uint64_t, 2> Dfa::digest_from(int32_t state) const {
  // Serialize the reachable sub-automaton in BFS order with byte runs, so two DFAs with the same
  // structure from `state` get the same digest regardless of numbering or class layout.
  std::vector<int32_t> order{state};
  std::unordered_map<int32_t, int32_t> index{{state, 0}};
  std::vector<int32_t> words;
  auto id_of = [&](int32_t s) -> int32_t {
    if (s < 0) return -1;
    auto [it, inserted] = index.emplace(s, static_cast<int32_t>(order.size()));
    if (inserted) order.push_back(s);
    return it->second;
  };
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t s = order[i];
    words.push_back(accepting(s) ? -2 : -3);
    int32_t run_start = 0;
    int32_t run_target = id_of(next(s, 0));
    for (int b = 1; b <= 256; ++b) {
      const int32_t t = b < 256 ? id_of(next(s, static_cast<uint8_t>(b))) : -4;
      if (b == 256 || t != run_target) {
        words.insert(words.end(), {run_start, b - 1, run_target});
        run_start = b;
        run_target = t;
      }
    }
    for (auto [e, end] = calls(s); e != end; ++e) words.insert(words.end(), {-5, e->label, id_of(e->target)});
    for (auto [e, end] = tokens(s); e != end; ++e) words.insert(words.end(), {-6, e->label, id_of(e->target)});
  }
  XXH128_hash_t h = XXH3_128bits(words.data(), words.size() * sizeof(int32_t));
  return {h.low64, h.high64};
}

namespace {

// Moore's refinement, `depth` rounds at most: round k's class of q is (its class in round k - 1,
// the round k - 1 classes of its successors per byte class, token edge and call edge; a call
// counts as one transition, so for rules that call only rules reading at least one byte the
// classes still bound what `depth` bytes can tell apart). A round that adds no
// class leaves the partition stable, so the rounds stop there.
Dfa::DepthClasses refine_to_depth(const Dfa& dfa, int32_t depth) {
  const int32_t n = dfa.n_states();
  Dfa::DepthClasses out;
  out.depth = depth;
  out.of.resize(static_cast<size_t>(n));
  // Round 0: accepting or not (classes numbered in order of first appearance).
  int32_t first[2] = {-1, -1};
  for (int32_t q = 0; q < n; ++q) {
    int32_t& c = first[dfa.accepting(q) ? 1 : 0];
    if (c < 0) c = out.n++;
    out.of[q] = c;
  }
  std::vector<int32_t> sig, next(static_cast<size_t>(n));
  std::map<std::vector<int32_t>, int32_t> ids;
  for (int32_t round = 0; round < depth; ++round) {
    ids.clear();
    for (int32_t q = 0; q < n; ++q) {
      sig.assign(1, out.of[q]);
      for (int32_t c = 0; c < dfa.n_classes(); ++c) {
        const int32_t t = dfa.next_class(q, c);
        sig.push_back(t < 0 ? -1 : out.of[t]);
      }
      for (auto [e, end] = dfa.tokens(q); e != end; ++e) sig.insert(sig.end(), {-2, e->label, out.of[e->target]});
      for (auto [e, end] = dfa.calls(q); e != end; ++e) sig.insert(sig.end(), {-3, e->label, out.of[e->target]});
      next[q] = ids.emplace(sig, static_cast<int32_t>(ids.size())).first->second;
    }
    const auto n_next = static_cast<int32_t>(ids.size());
    out.of.swap(next);
    if (n_next == out.n) break;  // stable
    out.n = n_next;
  }
  return out;
}

}  // namespace

std::shared_ptr<const Dfa::DepthClasses> Dfa::depth_classes(int32_t depth, bool compute) const {
  auto cached = std::atomic_load(&depth_classes_);
  if (cached && cached->depth == depth) return cached;
  if (!compute) return nullptr;
  cached = std::make_shared<const DepthClasses>(refine_to_depth(*this, depth));
  std::atomic_store(&depth_classes_, cached);
  return cached;
}

const Dfa::SliceBounds& Dfa::slice_bounds() const {
  auto cached = std::atomic_load(&slice_bounds_);
  if (!cached) {
    cached = std::make_shared<const SliceBounds>(compute_slice_bounds(*this));
    std::atomic_store(&slice_bounds_, cached);
  }
  return *cached;
}

size_t Dfa::memory_bytes() const {
  return table_.size() * 4 + accepting_.size() + calls_.size() * 8 + tokens_.size() * 8 +
         (call_offsets_.size() + token_offsets_.size()) * 4;
}

RawDfa DfaBuilder::to_raw(const Dfa& dfa) {
  RawDfa raw;
  raw.byte_class = dfa.byte_class_;
  raw.n_classes = dfa.n_classes_;
  raw.start = dfa.start_;
  raw.table = dfa.table_;
  raw.accepting = dfa.accepting_;
  raw.calls.resize(dfa.accepting_.size());
  raw.tokens.resize(dfa.accepting_.size());
  for (int32_t s = 0; s < dfa.n_states(); ++s) {
    auto [c0, c1] = dfa.calls(s);
    raw.calls[s].assign(c0, c1);
    auto [t0, t1] = dfa.tokens(s);
    raw.tokens[s].assign(t0, t1);
  }
  return raw;
}

namespace {

// Reachable-from-start and can-reach-accepting flags.
std::vector<uint8_t> useful_states(const RawDfa& raw) {
  const int32_t n = raw.n_states();
  std::vector<uint8_t> reach(n, 0), live(n, 0);
  std::vector<std::vector<int32_t>> preds(n);
  std::vector<int32_t> stack{raw.start};
  if (n == 0) return {};
  reach[raw.start] = 1;
  auto visit = [&](int32_t from, int32_t to) {
    if (to < 0) return;
    preds[to].push_back(from);
    if (!reach[to]) { reach[to] = 1; stack.push_back(to); }
  };
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t c = 0; c < raw.n_classes; ++c) visit(s, raw.table[static_cast<size_t>(s) * raw.n_classes + c]);
    for (const auto& e : raw.calls[s]) visit(s, e.target);
    for (const auto& e : raw.tokens[s]) visit(s, e.target);
  }
  for (int32_t s = 0; s < n; ++s) {
    if (reach[s] && raw.accepting[s]) { live[s] = 1; stack.push_back(s); }
  }
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t p : preds[s]) {
      if (!live[p]) { live[p] = 1; stack.push_back(p); }
    }
  }
  for (int32_t s = 0; s < n; ++s) live[s] = live[s] && reach[s];
  return live;
}

// Hopcroft refinement; returns block id per state (states given by `keep`), sink = n.
class Refiner {
 public:
  Refiner(int32_t n_elems, std::vector<std::vector<int32_t>> delta_by_symbol)
      : n_(n_elems), delta_(std::move(delta_by_symbol)) {
    build_inverse();
  }
  std::vector<int32_t> run(const std::vector<uint8_t>& accepting);

 private:
  void build_inverse();
  void split_by(const std::vector<int32_t>& splitter_elems);

  int32_t n_;
  std::vector<std::vector<int32_t>> delta_;  // [symbol][elem] -> elem
  std::vector<std::vector<int32_t>> inv_off_, inv_src_;
  std::vector<int32_t> elems_, loc_, blk_, bstart_, bend_, marked_;
  std::vector<uint8_t> in_work_;
  std::vector<int32_t> work_;
  std::vector<int32_t> pre_, touched_;  // scratch
};

void Refiner::build_inverse() {
  inv_off_.resize(delta_.size());
  inv_src_.resize(delta_.size());
  for (size_t a = 0; a < delta_.size(); ++a) {
    auto& off = inv_off_[a];
    off.assign(static_cast<size_t>(n_) + 1, 0);
    for (int32_t s = 0; s < n_; ++s) ++off[delta_[a][s] + 1];
    for (int32_t t = 0; t < n_; ++t) off[t + 1] += off[t];
    auto& src = inv_src_[a];
    src.resize(static_cast<size_t>(n_));
    std::vector<int32_t> fill(off.begin(), off.end() - 1);
    for (int32_t s = 0; s < n_; ++s) src[fill[delta_[a][s]]++] = s;
  }
}

std::vector<int32_t> Refiner::run(const std::vector<uint8_t>& accepting) {
  elems_.resize(n_);
  loc_.resize(n_);
  blk_.resize(n_);
  int32_t pos = 0;
  for (int pass = 1; pass >= 0; --pass) {
    const int32_t b = static_cast<int32_t>(bstart_.size());
    const int32_t begin = pos;
    for (int32_t s = 0; s < n_; ++s) {
      if ((accepting[s] != 0) == (pass == 1)) {
        elems_[pos] = s;
        loc_[s] = pos++;
        blk_[s] = b;
      }
    }
    if (pos > begin) {
      bstart_.push_back(begin);
      bend_.push_back(pos);
    }
  }
  marked_.assign(bstart_.size(), 0);
  in_work_.assign(bstart_.size(), 1);
  for (int32_t b = 0; b < static_cast<int32_t>(bstart_.size()); ++b) work_.push_back(b);
  std::vector<int32_t> splitter;
  while (!work_.empty()) {
    const int32_t b = work_.back();
    work_.pop_back();
    in_work_[b] = 0;
    splitter.assign(elems_.begin() + bstart_[b], elems_.begin() + bend_[b]);
    for (size_t a = 0; a < delta_.size(); ++a) {
      pre_.clear();
      for (int32_t t : splitter) {
        for (int32_t i = inv_off_[a][t]; i < inv_off_[a][t + 1]; ++i) pre_.push_back(inv_src_[a][i]);
      }
      if (!pre_.empty()) split_by(pre_);
    }
  }
  return blk_;
}

void Refiner::split_by(const std::vector<int32_t>& pre) {
  std::vector<int32_t>& touched = touched_;
  touched.clear();
  for (int32_t s : pre) {
    const int32_t b = blk_[s];
    const int32_t p = loc_[s];
    const int32_t front = bstart_[b] + marked_[b];
    if (p < front) continue;  // already marked
    // Move s to the marked front of its block.
    const int32_t other = elems_[front];
    std::swap(elems_[p], elems_[front]);
    loc_[other] = p;
    loc_[s] = front;
    if (marked_[b]++ == 0) touched.push_back(b);
  }
  for (int32_t b : touched) {
    const int32_t m = marked_[b];
    marked_[b] = 0;
    const int32_t size = bend_[b] - bstart_[b];
    if (m == size) continue;
    const int32_t nb = static_cast<int32_t>(bstart_.size());
    bstart_.push_back(bstart_[b]);
    bend_.push_back(bstart_[b] + m);
    bstart_[b] += m;
    marked_.push_back(0);
    in_work_.push_back(0);
    for (int32_t i = bstart_[nb]; i < bend_[nb]; ++i) blk_[elems_[i]] = nb;
    if (in_work_[b] || m <= size - m) {
      work_.push_back(nb);
      in_work_[nb] = 1;
    } else {
      work_.push_back(b);
      in_work_[b] = 1;
    }
  }
}

}  // namespace

Dfa DfaBuilder::finish(const RawDfa& raw, bool merge_states) {
  static std::atomic<uint64_t> next_uid{1};
  Dfa out;
  out.uid_ = next_uid.fetch_add(1, std::memory_order_relaxed);
  const std::vector<uint8_t> keep = useful_states(raw);
  std::vector<int32_t> elem_of(raw.n_states(), -1), state_of;
  for (int32_t s = 0; s < raw.n_states(); ++s) {
    if (keep[s]) { elem_of[s] = static_cast<int32_t>(state_of.size()); state_of.push_back(s); }
  }
  if (raw.n_states() == 0 || !keep[raw.start]) {
    out.table_.clear();
    out.accepting_.clear();
    out.call_offsets_ = {0};
    out.token_offsets_ = {0};
    return out;
  }
  const int32_t n = static_cast<int32_t>(state_of.size());
  const int32_t sink = n;
  // Symbols: byte classes, then each distinct call label, then each distinct token label.
  std::map<int32_t, int32_t> call_sym, token_sym;
  for (int32_t s : state_of) {
    for (const auto& e : raw.calls[s]) call_sym.emplace(e.label, 0);
    for (const auto& e : raw.tokens[s]) token_sym.emplace(e.label, 0);
  }
  int32_t n_sym = raw.n_classes;
  for (auto& [label, sym] : call_sym) sym = n_sym++;
  for (auto& [label, sym] : token_sym) sym = n_sym++;
  std::vector<std::vector<int32_t>> delta(n_sym, std::vector<int32_t>(n + 1, sink));
  auto map_target = [&](int32_t t) { return t >= 0 && elem_of[t] >= 0 ? elem_of[t] : sink; };
  for (int32_t e = 0; e < n; ++e) {
    const int32_t s = state_of[e];
    for (int32_t c = 0; c < raw.n_classes; ++c) {
      delta[c][e] = map_target(raw.table[static_cast<size_t>(s) * raw.n_classes + c]);
    }
    for (const auto& ce : raw.calls[s]) delta[call_sym[ce.label]][e] = map_target(ce.target);
    for (const auto& te : raw.tokens[s]) delta[token_sym[te.label]][e] = map_target(te.target);
  }
  std::vector<uint8_t> acc(n + 1, 0);
  for (int32_t e = 0; e < n; ++e) acc[e] = raw.accepting[state_of[e]];
  std::vector<int32_t> block(n + 1);
  if (merge_states) {
    Refiner refiner(n + 1, delta);
    block = refiner.run(acc);
  } else {
    for (int32_t e = 0; e <= n; ++e) block[e] = e;
  }
  // BFS renumbering over blocks from the start block.
  std::vector<int32_t> new_id(n + 2, -1), rep;
  const int32_t sink_block = block[sink];
  std::deque<int32_t> queue{elem_of[raw.start]};
  new_id[block[elem_of[raw.start]]] = 0;
  rep.push_back(elem_of[raw.start]);
  while (!queue.empty()) {
    const int32_t e = queue.front();
    queue.pop_front();
    for (int32_t a = 0; a < n_sym; ++a) {
      const int32_t t = delta[a][e];
      const int32_t tb = block[t];
      if (tb == sink_block || new_id[tb] >= 0) continue;
      new_id[tb] = static_cast<int32_t>(rep.size());
      rep.push_back(t);
      queue.push_back(t);
    }
  }
  const int32_t m = static_cast<int32_t>(rep.size());
  // Merge byte classes whose columns are identical.
  std::vector<int32_t> col_class(raw.n_classes);
  std::map<std::vector<int32_t>, int32_t> columns;
  for (int32_t c = 0; c < raw.n_classes; ++c) {
    std::vector<int32_t> col(m);
    for (int32_t i = 0; i < m; ++i) {
      const int32_t tb = block[delta[c][rep[i]]];
      col[i] = tb == sink_block ? -1 : new_id[tb];
    }
    auto [it, inserted] = columns.emplace(std::move(col), static_cast<int32_t>(columns.size()));
    col_class[c] = it->second;
  }
  out.n_classes_ = static_cast<int32_t>(columns.size());
  for (int b = 0; b < 256; ++b) out.byte_class_[b] = static_cast<uint8_t>(col_class[raw.byte_class[b]]);
  out.table_.assign(static_cast<size_t>(m) * out.n_classes_, -1);
  for (const auto& [col, cls] : columns) {
    for (int32_t i = 0; i < m; ++i) out.table_[static_cast<size_t>(i) * out.n_classes_ + cls] = col[i];
  }
  out.accepting_.resize(m);
  out.start_ = 0;
  out.call_offsets_.assign(1, 0);
  out.token_offsets_.assign(1, 0);
  for (int32_t i = 0; i < m; ++i) {
    const int32_t s = state_of[rep[i]];
    out.accepting_[i] = raw.accepting[s];
    for (const auto& [label, sym] : call_sym) {
      const int32_t tb = block[delta[sym][rep[i]]];
      if (tb != sink_block) out.calls_.push_back({label, new_id[tb]});
    }
    for (const auto& [label, sym] : token_sym) {
      const int32_t tb = block[delta[sym][rep[i]]];
      if (tb != sink_block) out.tokens_.push_back({label, new_id[tb]});
    }
    out.call_offsets_.push_back(static_cast<uint32_t>(out.calls_.size()));
    out.token_offsets_.push_back(static_cast<uint32_t>(out.tokens_.size()));
  }
  return out;
}

}  // namespace deepinfer::grammar
