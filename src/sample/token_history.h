// TokenHistory: the per-sequence token statistics that penalties need, kept incrementally so a
// decode step costs O(distinct tokens), not O(sequence length). Repetition penalty looks at
// prompt ∪ output; presence and frequency penalties look at the output only (vLLM semantics).
// Invariant: every id appears at most once in seen() and in output_counts(), in the order of
// its first occurrence (so iteration order, and thus any result, is reproducible).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace deepinfer::sample {

struct TokenCount {
  int32_t token = 0;
  int32_t count = 0;
};

class TokenHistory {
 public:
  TokenHistory() = default;
  explicit TokenHistory(std::span<const int32_t> prompt);

  // Records one generated token (call in generation order, also for multi-token spec accepts).
  void append(int32_t token);
  void append(std::span<const int32_t> tokens);

  // Distinct ids of prompt ∪ output, in first-occurrence order.
  std::span<const int32_t> seen() const { return seen_; }
  // Distinct ids of the output with their counts, in first-occurrence order.
  std::span<const TokenCount> output_counts() const { return output_counts_; }
  int32_t n_output() const { return n_output_; }

 private:
  void mark_seen(int32_t token);

  std::vector<int32_t> seen_;
  std::unordered_set<int32_t> seen_set_;
  std::vector<TokenCount> output_counts_;
  std::unordered_map<int32_t, int32_t> output_index_;  // token -> index into output_counts_
  int32_t n_output_ = 0;
};

}  // namespace deepinfer::sample
