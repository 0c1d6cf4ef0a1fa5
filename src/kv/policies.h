// The two small policies of the KV manager, both pure functions of config:
// ReplayPolicy — where a sequence restarts computing after a prefix hit without a state
//   snapshot (model_v4_flash.md §9.3, model_v41_flash.md §2.4): R = max(0, H − n_replay).
// SnapshotPolicy — at which block boundaries a sequence's state slot is worth copying.
// Neither touches pools; the Manager and the Scheduler ask them and act.
#pragma once

#include <cstdint>

namespace deepinfer::kv {

enum class ReplayMode : uint8_t {
  // Recompute the last `window + n_extra_tokens` cached tokens (DeepSeek/vLLM/TRT-LLM). Their
  // windows see nothing below R: approximate for a stack of window layers, cheap.
  kBounded,
  // Recompute the whole receptive field n_layers·(window − 1) + max_overlap: the rebuilt window
  // rings and compressor states equal a cold run's, so logits are bit-exact.
  kExact,
};
const char* replay_mode_name(ReplayMode mode);

struct ReplayConfig {
  ReplayMode mode = ReplayMode::kBounded;
  int32_t window = 128;       // W: sliding-window length of every layer
  int32_t n_layers = 44;      // stacked window layers on the longest path (main + MTP/draft)
  int32_t max_overlap = 4;    // tokens of the previous group an overlapped compressor reads
  int32_t n_extra_tokens = 0; // added to n_replay: e.g. max spec-decode rewind (V4.1: 140 = 128 + 12)
  int32_t align_tokens = 1;   // R is rounded down to a multiple of this (1: no rounding)
};

class ReplayPolicy {
 public:
  explicit ReplayPolicy(const ReplayConfig& config) : config_(config) {}

  ReplayMode mode() const { return config_.mode; }
  // Tokens recomputed below a snapshot-less hit (before clamping at position 0).
  int32_t n_replay_tokens() const;
  // R for a prefix hit of `n_tokens_cached` = H tokens without a snapshot; 0 ≤ R ≤ H.
  int32_t replay_start(int32_t n_tokens_cached) const;

 private:
  ReplayConfig config_;
};

struct SnapshotConfig {
  // At the last block boundary strictly inside the prompt, floor((P − 1)/B)·B: the deepest hit a
  // later request with the same prompt can get (match_prefix never covers the last token).
  bool at_prompt_end = true;
  // At the boundary of a snapshot-less prefix hit, once the replay reaches it: a boundary that
  // was shared once is likely to be shared again (system prompts, multi-turn chat).
  bool at_hit_boundary = true;
  // Every `interval_tokens` positions (a multiple of block_tokens; 0 = off), also while decoding,
  // so long conversations keep restart points (ds4 writes one every ~10K tokens).
  int32_t interval_tokens = 0;
};

class SnapshotPolicy {
 public:
  SnapshotPolicy(const SnapshotConfig& config, int32_t block_tokens)
      : config_(config), block_tokens_(block_tokens) {}

  // The first boundary b with n_computed < b ≤ n_limit where a snapshot is wanted, or 0.
  // n_prompt: prompt length; n_hit: H of the sequence's snapshot-less prefix hit (0 if none).
  int32_t next_boundary(int32_t n_computed, int32_t n_limit, int32_t n_prompt, int32_t n_hit) const;

 private:
  SnapshotConfig config_;
  int32_t block_tokens_;
};

}  // namespace deepinfer::kv
