// KvConfig: sizes and policies of the KV bookkeeping, filled by the engine from ModelConfig and
// EngineOptions (kv does not depend on loader). validate_kv_config fails with a message naming
// the field; the Manager assumes a validated config.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "kv/policies.h"

namespace deepinfer::kv {

struct KvConfig {
  int32_t block_tokens = 256;    // positions per history block; a multiple of every ratio
  int32_t n_blocks = 0;          // history blocks (one id indexes every history pool)
  int32_t n_state_slots = 0;     // per-sequence state slots: bounds the running sequences
  int32_t n_snapshot_slots = 0;  // state snapshots for prefix hits (0 disables them)
  std::vector<int32_t> compress_ratios;  // every layer's ratio (0 = window only); validation only
  bool enable_prefix_caching = true;
  uint64_t hash_seed = 0;        // model/weights/KV-format fingerprint mixed into every hash
  ReplayConfig replay;
  SnapshotConfig snapshot;
};

Status validate_kv_config(const KvConfig& config);

}  // namespace deepinfer::kv
