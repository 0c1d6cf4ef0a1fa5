// Benchmark model builders: the full-width DeepSeek-V4-Flash config with a chosen layer count,
// random weights generated directly in device memory (no files), random KV contents, and the
// per-step byte and FLOP counts the roofline percentages are computed from.
#pragma once

#include <memory>
#include <string>

#include "engine/loaded_model.h"
#include "loader/model_config.h"
#include "loader/weight_binding.h"
#include "model/kv_state.h"
#include "ops/ops.h"

namespace deepinfer::engine {

// V4-Flash dimensions (model_v4_flash.md §2.1) with `layers` main layers of the official
// ratio schedule and no MTP block.
loader::ModelConfig v4_flash_config(int64_t layers);

// Device tensors with random contents for every tensor of the config's inventory (CUDA only).
Result<std::unique_ptr<loader::TensorSource>> synthetic_device_weights(const loader::ModelConfig& config,
                                                                       ops::Ops* ops, uint64_t seed);
// A LoadedModel (the engine's) on those weights: the engine benchmark's model. CUDA only.
// mtp: V4-Flash's MTP block mtp.0 too (speculative decoding).
Result<std::unique_ptr<LoadedModel>> synthetic_loaded_model(int64_t layers, const std::string& device,
                                                            model::Numerics numerics, uint64_t seed, bool mtp = false);

// Fills window rings, compressor states and history pools with random values (never time zeros).
Status randomize_kv(model::KvState& state, ops::Ops* ops, uint64_t seed);

// The current UTC time as ISO 8601 ("2026-12-04T00:50:00Z"), the benchmarks' "date".
std::string utc_timestamp();

// Bytes the KV state would take (history blocks and state slots) for capacity checks.
int64_t kv_bytes_estimate(const loader::ModelConfig& config, int64_t n_slots, int64_t n_blocks, int32_t block_tokens);

struct StepCost {
  double weight_bytes = 0;  // weights read once per step
  double kv_bytes = 0;      // KV rows and indexer keys read
  double flops = 0;         // matmul + attention + indexer
};
// Decode of `batch` sequences at `context` tokens (routed experts read: uniform-routing estimate).
StepCost decode_step_cost(const loader::ModelConfig& config, int64_t batch, int64_t context);
// Prefill of `n` tokens of one sequence.
StepCost prefill_cost(const loader::ModelConfig& config, int64_t n);

}  // namespace deepinfer::engine
