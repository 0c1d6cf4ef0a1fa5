// BPE merge loops (see bpe_model.h). Both loops implement the same order: repeatedly merge the
// adjacent pair with the lowest rank, the leftmost one on ties. merge_short compacts small stack
// arrays (ordinary words: a few dozen bytes at most); merge_long keeps symbols at their original
// byte positions in a linked list and finds the next merge with a min segment tree, O(log n)
// per merge, so a 100 KB whitespace run costs O(n log n) rather than O(n^2).
#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstring>

namespace deepinfer::tokenizer {

BpeModel::BpeModel(std::array<int32_t, 256> byte_ids, MergeTable merges, bool ignore_merges,
                   std::unordered_map<std::string, int32_t> whole_tokens)
    : byte_ids_(byte_ids),
      merges_(std::move(merges)),
      ignore_merges_(ignore_merges),
      whole_tokens_(std::move(whole_tokens)) {}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    const auto it = whole_tokens_.find(std::string(piece));
    if (it != whole_tokens_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (piece.size() <= kMaxShortBytes) {
    merge_short(piece, out);
  } else {
    merge_long(piece, out);
  }
}

void BpeModel::merge_short(std::string_view piece, std::vector<int32_t>& out) const {
  // ids[i]: current symbols; pair[i]: the merge of (ids[i], ids[i+1]).
  int32_t ids[kMaxShortBytes];
  Merge pair[kMaxShortBytes];
  size_t n = piece.size();
  for (size_t i = 0; i < n; ++i) ids[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
  for (size_t i = 0; i + 1 < n; ++i) pair[i] = merges_.find(ids[i], ids[i + 1]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (pair[i].rank < pair[best].rank) best = i;
    }
    if (pair[best].rank == Merge::kNoRank) break;
    ids[best] = pair[best].merged_id;
    // Drop symbol best+1; the pairs after it move down one slot.
    std::memmove(ids + best + 1, ids + best + 2, (n - best - 2) * sizeof(ids[0]));
    if (best + 3 < n)
      std::memmove(pair + best + 1, pair + best + 2, (n - best - 3) * sizeof(pair[0]));
    --n;
    if (best > 0) pair[best - 1] = merges_.find(ids[best - 1], ids[best]);
    if (best + 1 < n) pair[best] = merges_.find(ids[best], ids[best + 1]);
  }
  out.insert(out.end(), ids, ids + n);
}

namespace {

// Min segment tree over uint32 keys with "leftmost minimum" queries. Leaves start at `base`.
struct MinTree {
  std::vector<uint64_t> node;  // key = rank << 32 | position: ties resolve to the leftmost
  size_t base = 1;

  void reset(size_t n) {
    base = 1;
    while (base < n) base *= 2;
    node.assign(2 * base, UINT64_MAX);
  }
  void set_leaf(size_t i, uint64_t key) { node[base + i] = key; }
  void build() {
    for (size_t p = base - 1; p >= 1; --p) node[p] = std::min(node[2 * p], node[2 * p + 1]);
  }
  void update(size_t i, uint64_t key) {
    size_t p = base + i;
    node[p] = key;
    for (p /= 2; p >= 1; p /= 2) {
      const uint64_t m = std::min(node[2 * p], node[2 * p + 1]);
      if (node[p] == m) break;  // unchanged here, so unchanged above too
      node[p] = m;
    }
  }
  uint64_t min() const { return node[1]; }
};

}  // namespace

void BpeModel::merge_long(std::string_view piece, std::vector<int32_t>& out) const {
  const auto n = static_cast<int32_t>(piece.size());
  struct Scratch {
    std::vector<int32_t> ids, next, prev, merged;
    MinTree tree;
  };
  thread_local Scratch s;  // reused: long pieces are rare, but then often many in a row
  s.ids.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  s.merged.resize(n);
  s.tree.reset(static_cast<size_t>(n));
  int32_t* ids = s.ids.data();
  int32_t* next = s.next.data();
  int32_t* prev = s.prev.data();
  int32_t* merged = s.merged.data();
  // Key of the pair starting at i: (rank, position), so the tree minimum is the next merge.
  auto key_of = [&](int32_t i) -> uint64_t {
    if (next[i] < 0) return UINT64_MAX;
    const Merge m = merges_.find(ids[i], ids[next[i]]);
    merged[i] = m.merged_id;
    return m.rank == Merge::kNoRank
               ? UINT64_MAX
               : (static_cast<uint64_t>(m.rank) << 32) | static_cast<uint32_t>(i);
  };
  for (int32_t i = 0; i < n; ++i) {
    ids[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  for (int32_t i = 0; i < n; ++i) s.tree.set_leaf(i, key_of(i));
  s.tree.build();
  while (s.tree.min() != UINT64_MAX) {
    const auto best = static_cast<int32_t>(s.tree.min() & 0xFFFFFFFFu);
    const int32_t right = next[best];
    ids[best] = merged[best];
    next[best] = next[right];
    if (next[right] >= 0) prev[next[right]] = best;
    s.tree.update(right, UINT64_MAX);
    s.tree.update(best, key_of(best));
    if (prev[best] >= 0) s.tree.update(prev[best], key_of(prev[best]));
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

}  // namespace deepinfer::tokenizer
