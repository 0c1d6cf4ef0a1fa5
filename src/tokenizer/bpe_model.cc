// BPE merge loops (see bpe_model.h). Both loops implement the same order: repeatedly merge the
// adjacent pair with the lowest rank, the leftmost one on ties. The linear loop is the fast path
// for ordinary words; the heap loop handles pieces longer than kMaxLinearBytes.
#include "tokenizer/bpe_model.h"

#include <cstring>
#include <queue>

namespace deepinfer::tokenizer {

BpeModel::BpeModel(std::array<int32_t, 256> byte_ids, MergeTable merges, bool ignore_merges,
                   std::unordered_map<std::string, int32_t> whole_tokens)
    : byte_ids_(byte_ids), merges_(std::move(merges)), ignore_merges_(ignore_merges),
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
  if (piece.size() <= kMaxLinearBytes) {
    merge_linear(piece, out);
  } else {
    merge_heap(piece, out);
  }
}

void BpeModel::merge_linear(std::string_view piece, std::vector<int32_t>& out) const {
  // ids[i]: current symbols; pair[i]: the merge of (ids[i], ids[i+1]).
  int32_t ids[kMaxLinearBytes];
  Merge pair[kMaxLinearBytes];
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
    // Drop symbol best+1; the pair after it moves down one slot.
    std::memmove(ids + best + 1, ids + best + 2, (n - best - 2) * sizeof(ids[0]));
    if (best + 3 < n) std::memmove(pair + best + 1, pair + best + 2, (n - best - 3) * sizeof(pair[0]));
    --n;
    if (best > 0) pair[best - 1] = merges_.find(ids[best - 1], ids[best]);
    if (best + 1 < n) pair[best] = merges_.find(ids[best], ids[best + 1]);
  }
  out.insert(out.end(), ids, ids + n);
}

void BpeModel::merge_heap(std::string_view piece, std::vector<int32_t>& out) const {
  const size_t n = piece.size();
  // Doubly linked list over the original byte positions; a merge keeps the left symbol.
  std::vector<int32_t> ids(n);
  std::vector<int32_t> prev(n);
  std::vector<int32_t> next(n);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  // A candidate remembers the ids it was computed from; it is stale once either symbol changed.
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t left_id;
    int32_t right_id;
    int32_t merged_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    const Merge m = merges_.find(ids[pos], ids[next[pos]]);
    if (m.rank != Merge::kNoRank) heap.push({m.rank, pos, ids[pos], ids[next[pos]], m.merged_id});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int32_t right = next[c.pos];
    if (!alive[c.pos] || right < 0 || ids[c.pos] != c.left_id || ids[right] != c.right_id) continue;
    ids[c.pos] = c.merged_id;
    alive[right] = false;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

}  // namespace deepinfer::tokenizer
