// EngineConfig: everything the engine derives once from EngineOptions and the loaded model —
// scheduler limits, the KV bookkeeping config (pool sizes, replay and snapshot policies) and the
// KvState layout. Sizing decisions live here and nowhere else (no configuration is rewritten
// inside constructors); errors name the option at fault.
#pragma once

#include <cstdint>

#include "deepinfer/engine.h"
#include "kv/kv_config.h"
#include "loader/model_config.h"
#include "model/kv_state.h"
#include "sched/scheduler.h"

namespace deepinfer::engine {

// Default history-block budget when neither kv_blocks nor kv_cache_bytes is given.
inline constexpr int64_t kDefaultKvCacheBytes = int64_t{256} << 20;

// Which draft model proposes the tokens a step verifies (speculative decoding).
enum class Drafter {
  kNone,
  kMtp,     // V4: the MTP block mtp.0 over every position, chained k times for k drafts
  kDspark,  // V4.1: the DSpark block (its rings seeded by forward()), one pass for up to block-size drafts
};

struct EngineConfig {
  sched::SchedulerConfig sched;  // sched.max_draft_tokens: drafts per step (0 without a drafter)
  kv::KvConfig kv;
  // n_slots = state slots + snapshot slots; spare_positions = sched.max_draft_tokens
  model::KvStateOptions state;
  int32_t n_state_slots = 0;    // snapshot id s lives in KvState slot n_state_slots + s
  Drafter drafter = Drafter::kNone;
  int32_t max_model_len = 0;    // longest sequence (prompt + generated)
};

// Bytes one history block occupies in KvState for this model (compressed rows + indexer keys of
// every layer, main and MTP), mirroring KvState's layout.
int64_t kv_bytes_per_block(const loader::ModelConfig& config, int32_t block_tokens, tensor::DType kv_dtype);

// Derives the engine configuration. `model_fingerprint` seeds the prefix-cache hashes.
Result<EngineConfig> make_engine_config(const EngineOptions& options, const loader::ModelConfig& config,
                                        tensor::DType kv_dtype, uint64_t model_fingerprint);

}  // namespace deepinfer::engine
