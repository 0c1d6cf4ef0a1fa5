// Leaf-DFA algebra: product constructions (intersection, union), complement over all byte
// strings, literal-set DFAs and shortest examples. Inputs must have no call or token edges.
#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>

#include "base/check.h"
#include "base/status.h"
#include "grammar/dfa.h"

namespace deepinfer::grammar {
namespace {

// Combined byte classes of two DFAs: class id per distinct (class_a, class_b) pair.
struct PairClasses {
  std::array<uint8_t, 256> byte_class{};
  std::vector<std::pair<int32_t, int32_t>> members;  // class -> (class in a, class in b)
};

PairClasses pair_classes(const Dfa& a, const Dfa& b) {
  PairClasses pc;
  std::map<std::pair<int32_t, int32_t>, int32_t> ids;
  for (int x = 0; x < 256; ++x) {
    const auto key = std::make_pair<int32_t, int32_t>(a.byte_class(static_cast<uint8_t>(x)),
                                                      b.byte_class(static_cast<uint8_t>(x)));
    auto [it, inserted] = ids.emplace(key, static_cast<int32_t>(pc.members.size()));
    if (inserted) pc.members.push_back(key);
    pc.byte_class[x] = static_cast<uint8_t>(it->second);
  }
  return pc;
}

// Product of a and b; a missing side is a sink (-1). keep(sa, sb) says whether to explore a
// pair, accept(sa, sb) whether it accepts.
template <typename Keep, typename Accept>
Result<Dfa> product(const Dfa& a, const Dfa& b, Keep keep, Accept accept, int64_t max_states,
                    const std::string& what) {
  DI_CHECK(!a.has_calls() && !b.has_calls() && !a.has_tokens() && !b.has_tokens());
  const PairClasses pc = pair_classes(a, b);
  RawDfa raw;
  raw.byte_class = pc.byte_class;
  raw.n_classes = static_cast<int32_t>(pc.members.size());
  std::map<std::pair<int32_t, int32_t>, int32_t> ids;
  std::deque<std::pair<int32_t, int32_t>> queue;
  auto id_of = [&](int32_t sa, int32_t sb) -> int32_t {
    if (!keep(sa, sb)) return -1;
    auto [it, inserted] = ids.emplace(std::make_pair(sa, sb), raw.n_states());
    if (inserted) {
      const int32_t s = raw.add_state();
      raw.accepting[s] = accept(sa, sb) ? 1 : 0;
      queue.emplace_back(sa, sb);
    }
    return it->second;
  };
  const int32_t sa0 = a.empty() ? -1 : a.start();
  const int32_t sb0 = b.empty() ? -1 : b.start();
  if (id_of(sa0, sb0) < 0) return DfaBuilder::minimize(RawDfa{});
  while (!queue.empty()) {
    const auto [sa, sb] = queue.front();
    queue.pop_front();
    const int32_t s = ids[{sa, sb}];
    for (int32_t c = 0; c < raw.n_classes; ++c) {
      const int32_t ta = sa < 0 ? -1 : a.next_class(sa, pc.members[c].first);
      const int32_t tb = sb < 0 ? -1 : b.next_class(sb, pc.members[c].second);
      const int32_t t = id_of(ta, tb);
      raw.table[static_cast<size_t>(s) * raw.n_classes + c] = t;
    }
    if (raw.n_states() > max_states) {
      return resource_exhausted("{}: automaton product exceeds {} states", what, max_states);
    }
  }
  return DfaBuilder::trim(raw);
}

}  // namespace

std::shared_ptr<const Dfa> DfaCache::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second;
}

void DfaCache::put(const std::string& key, std::shared_ptr<const Dfa> dfa) {
  std::lock_guard<std::mutex> lock(mu_);
  if (map_.size() >= 4096) map_.clear();
  map_.emplace(key, std::move(dfa));
}

Result<Dfa> dfa_intersect(const Dfa& a, const Dfa& b, const AutomatonLimits& limits,
                          const std::string& what) {
  return product(
      a, b, [](int32_t sa, int32_t sb) { return sa >= 0 && sb >= 0; },
      [&](int32_t sa, int32_t sb) { return a.accepting(sa) && b.accepting(sb); },
      limits.max_states, what);
}

Dfa dfa_union(const Dfa& a, const Dfa& b) {
  auto r = product(
      a, b, [](int32_t sa, int32_t sb) { return sa >= 0 || sb >= 0; },
      [&](int32_t sa, int32_t sb) {
        return (sa >= 0 && a.accepting(sa)) || (sb >= 0 && b.accepting(sb));
      },
      int64_t{1} << 40, "union");
  return std::move(r).value();
}

Dfa dfa_complement(const Dfa& a) {
  DI_CHECK(!a.has_calls() && !a.has_tokens());
  RawDfa raw;
  raw.n_classes = a.empty() ? 1 : a.n_classes();
  for (int x = 0; x < 256; ++x) raw.byte_class[x] = a.empty() ? 0 : a.byte_class(static_cast<uint8_t>(x));
  const int32_t n = a.n_states();
  for (int32_t s = 0; s <= n; ++s) raw.add_state();
  const int32_t sink = n;
  for (int32_t s = 0; s < n; ++s) {
    raw.accepting[s] = a.accepting(s) ? 0 : 1;
    for (int32_t c = 0; c < raw.n_classes; ++c) {
      const int32_t t = a.next_class(s, c);
      raw.table[static_cast<size_t>(s) * raw.n_classes + c] = t < 0 ? sink : t;
    }
  }
  raw.accepting[sink] = 1;
  for (int32_t c = 0; c < raw.n_classes; ++c) raw.table[static_cast<size_t>(sink) * raw.n_classes + c] = sink;
  raw.start = a.empty() ? sink : a.start();
  return DfaBuilder::trim(raw);
}

Dfa dfa_from_strings(const std::vector<std::string>& strings) {
  // A trie over the bytes that occur (plus one class for all others); minimization merges
  // common suffixes.
  RawDfa raw;
  std::array<bool, 256> used{};
  for (const std::string& s : strings) for (char ch : s) used[static_cast<uint8_t>(ch)] = true;
  raw.n_classes = 1;
  for (int x = 0; x < 256; ++x) raw.byte_class[x] = used[x] ? static_cast<uint8_t>(raw.n_classes++) : 0;
  raw.start = raw.add_state();
  for (const std::string& s : strings) {
    int32_t cur = raw.start;
    for (char ch : s) {
      const size_t slot = static_cast<size_t>(cur) * raw.n_classes + raw.byte_class[static_cast<uint8_t>(ch)];
      if (raw.table[slot] < 0) {
        const int32_t t = raw.add_state();
        raw.table[slot] = t;
      }
      cur = raw.table[slot];
    }
    raw.accepting[cur] = 1;
  }
  return DfaBuilder::minimize(raw);
}

bool dfa_shortest_example(const Dfa& a, std::string& out) {
  if (a.empty()) return false;
  std::vector<int32_t> parent(a.n_states(), -2);
  std::vector<uint8_t> via(a.n_states(), 0);
  std::deque<int32_t> queue{a.start()};
  parent[a.start()] = -1;
  while (!queue.empty()) {
    const int32_t s = queue.front();
    queue.pop_front();
    if (a.accepting(s)) {
      out.clear();
      for (int32_t cur = s; parent[cur] >= 0; cur = parent[cur]) out.push_back(static_cast<char>(via[cur]));
      std::reverse(out.begin(), out.end());
      return true;
    }
    for (int x = 0; x < 256; ++x) {
      const int32_t t = a.next(s, static_cast<uint8_t>(x));
      if (t >= 0 && parent[t] == -2) {
        parent[t] = s;
        via[t] = static_cast<uint8_t>(x);
        queue.push_back(t);
      }
    }
  }
  return false;
}

}  // namespace deepinfer::grammar
