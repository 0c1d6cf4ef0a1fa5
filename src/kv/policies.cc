// Replay and snapshot policies (see policies.h).
#include "kv/policies.h"

#include <algorithm>

namespace deepinfer::kv {

const char* replay_mode_name(ReplayMode mode) {
  return mode == ReplayMode::kExact ? "exact" : "bounded";
}

int32_t ReplayPolicy::n_replay_tokens() const {
  // Exact: layer l's ring row at q depends on layer l−1 outputs over [q − W + 1, q], so the top
  // ring row at H − W reaches back n_layers·(W − 1) + 1 tokens; the overlapped compressor's
  // previous group adds at most max_overlap. Bounded keeps just one window.
  const int64_t n = config_.mode == ReplayMode::kExact
                        ? int64_t{config_.n_layers} * (config_.window - 1) + config_.max_overlap
                        : int64_t{config_.window};
  return static_cast<int32_t>(std::min<int64_t>(n + config_.n_extra_tokens, INT32_MAX));
}

int32_t ReplayPolicy::replay_start(int32_t n_tokens_cached) const {
  const int32_t r = std::max(0, n_tokens_cached - n_replay_tokens());
  const int32_t align = std::max(1, config_.align_tokens);
  return r / align * align;
}

int32_t SnapshotPolicy::next_boundary(int32_t n_computed, int32_t n_limit, int32_t n_prompt,
                                      int32_t n_hit) const {
  int32_t best = 0;
  auto consider = [&](int32_t b) {
    if (b > n_computed && b <= n_limit && b > 0 && (best == 0 || b < best)) best = b;
  };
  if (config_.at_prompt_end && n_prompt > 0) consider((n_prompt - 1) / block_tokens_ * block_tokens_);
  if (config_.at_hit_boundary) consider(n_hit);
  if (config_.interval_tokens > 0) {
    const int64_t step = config_.interval_tokens;
    consider(static_cast<int32_t>(std::min<int64_t>((n_computed / step + 1) * step, INT32_MAX)));
  }
  return best;
}

}  // namespace deepinfer::kv
