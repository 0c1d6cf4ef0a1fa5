// Synthetic checkpoints in the exact official format (model_v4_flash.md §5.8): from a config and a
// seed, write config.json, inference/config.json, generation_config.json, sharded safetensors and
// model.safetensors.index.json. Bytes are a pure function of (config, seed, sharding): every value
// is derived from a counter-based hash of (seed, tensor name, element index), independent of
// thread count and tensor order. Also the tiny test configurations of §10.
#pragma once

#include <cstdint>
#include <string>

#include "loader/model_config.h"

namespace deepinfer::loader {

struct SyntheticOptions {
  uint64_t seed = 0;
  // Main layers per shard; 0 puts every layer in the first shard (with the embedding), which is
  // the tiny-model layout of §10.3. The head/norm/hc_head shard and the mtp shard follow.
  int64_t layers_per_shard = 0;
};

Status write_synthetic_checkpoint(const ModelConfig& config, const std::string& dir,
                                  const SyntheticOptions& options);

// tiny-v4f (§10.2): all three layer kinds + MTP, real vocabulary size, hidden 256.
ModelConfig tiny_v4_flash_config();
// tiny-short (§10.5): window 16, ratios [0,0,4,16,4,16,4,0], index_topk 4.
ModelConfig tiny_short_config();
// micro (§10.5): vocab 512, hidden 128, o_groups 1, otherwise tiny-short.
ModelConfig micro_config();
// tiny-v41 (model_v41_flash.md §13): the V4.1 structure at hidden 128, vocab 512, window 8.
ModelConfig tiny_v41_config();
// Looks up one of the names above ("tiny-v4f", "tiny-short", "micro", "tiny-v41").
Result<ModelConfig> named_test_config(const std::string& name);

// The value the generator assigns to element `index` of tensor `name` before quantisation
// (exposed so tests can check quantisation against the float masters).
float synthetic_master_value(uint64_t seed, const std::string& name, uint64_t index, float stddev);

}  // namespace deepinfer::loader
