// KvConfig validation (see kv_config.h).
#include "kv/kv_config.h"

namespace deepinfer::kv {

Status validate_kv_config(const KvConfig& c) {
  if (c.block_tokens <= 0) return invalid_argument("kv config: block_tokens must be > 0, got {}", c.block_tokens);
  if (c.n_blocks <= 0) return invalid_argument("kv config: n_blocks must be > 0, got {}", c.n_blocks);
  if (c.n_state_slots <= 0) {
    return invalid_argument("kv config: n_state_slots must be > 0, got {}", c.n_state_slots);
  }
  if (c.n_snapshot_slots < 0) {
    return invalid_argument("kv config: n_snapshot_slots must be >= 0, got {}", c.n_snapshot_slots);
  }
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    const int32_t r = c.compress_ratios[i];
    if (r < 0 || (r > 0 && c.block_tokens % r != 0)) {
      return invalid_argument("kv config: block_tokens {} is not a multiple of compress_ratios[{}] = {}",
                              c.block_tokens, i, r);
    }
  }
  const ReplayConfig& r = c.replay;
  if (r.window <= 0 || r.n_layers <= 0 || r.max_overlap < 0 || r.n_extra_tokens < 0 || r.align_tokens <= 0) {
    return invalid_argument(
        "kv config: replay needs window > 0, n_layers > 0, max_overlap >= 0, n_extra_tokens >= 0, "
        "align_tokens > 0 (got {}, {}, {}, {}, {})",
        r.window, r.n_layers, r.max_overlap, r.n_extra_tokens, r.align_tokens);
  }
  const int32_t interval = c.snapshot.interval_tokens;
  if (interval < 0 || interval % c.block_tokens != 0) {
    return invalid_argument("kv config: snapshot.interval_tokens {} must be a non-negative multiple of "
                            "block_tokens {}", interval, c.block_tokens);
  }
  return Status::ok();
}

}  // namespace deepinfer::kv
