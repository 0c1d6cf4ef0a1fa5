// TokenHistory bookkeeping (see token_history.h for the invariants).
#include "sample/token_history.h"

namespace deepinfer::sample {

TokenHistory::TokenHistory(std::span<const int32_t> prompt) {
  for (int32_t token : prompt) mark_seen(token);
}

void TokenHistory::mark_seen(int32_t token) {
  if (seen_set_.insert(token).second) seen_.push_back(token);
}

void TokenHistory::append(int32_t token) {
  mark_seen(token);
  auto [it, inserted] = output_index_.emplace(token, static_cast<int32_t>(output_counts_.size()));
  if (inserted) {
    output_counts_.push_back({token, 1});
  } else {
    ++output_counts_[it->second].count;
  }
  ++n_output_;
}

void TokenHistory::append(std::span<const int32_t> tokens) {
  for (int32_t token : tokens) append(token);
}

}  // namespace deepinfer::sample
