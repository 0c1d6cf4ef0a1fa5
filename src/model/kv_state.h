// KvState: the device storage behind the KV manager's integer ids (model_v4_flash.md §7).
// Per state slot (one running sequence): every layer's window ring and every compressor's
// streaming state. Per history block (block_tokens positions): each compressed layer's rows and
// each CSA layer's indexer keys. The manager (src/kv) decides which ids a sequence owns; this
// struct only holds the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/model_config.h"
#include "ops/ops.h"

namespace deepinfer::model {

struct KvStateOptions {
  int32_t n_slots = 1;
  int32_t n_blocks = 1;
  int32_t block_tokens = 256;           // multiple of every compression ratio
  tensor::DType kv_dtype = tensor::DType::kF32;  // window rings and history rows
};

struct CompressorState {
  tensor::TensorView kv;     // [n_slots, n_state, width] F32
  tensor::TensorView score;  // [n_slots, n_state, width] F32 (already biased by ape)
};

struct LayerState {
  int ratio = 0;
  tensor::TensorView window;    // [n_slots, W, head_dim]
  CompressorState comp;         // ratio > 0
  CompressorState idx_comp;     // ratio == 4
  tensor::TensorView comp_rows; // [n_blocks * block_tokens / ratio, head_dim]
  tensor::TensorView idx_keys;  // [n_blocks * block_tokens / 4, index_head_dim]
};

class KvState {
 public:
  KvState(const loader::ModelConfig& config, const KvStateOptions& options, ops::Ops* ops);

  const KvStateOptions& options() const { return options_; }
  // Main layers first, then the MTP/draft blocks.
  LayerState& layer(int64_t i) { return layers_[static_cast<size_t>(i)]; }
  int64_t n_layers() const { return static_cast<int64_t>(layers_.size()); }
  // Empties a slot for a new sequence: compressor scores -inf (no candidates), values 0.
  // Window contents need no clearing: the window floor hides anything not written since.
  void reset_slot(int32_t slot);
  // Copies every per-slot tensor of `src` into `dst` (prefix-cache state snapshots).
  void copy_slot(int32_t src, int32_t dst);
  // Bytes held per slot and per block (capacity planning and the bench).
  int64_t bytes_per_slot() const { return bytes_per_slot_; }
  int64_t bytes_per_block() const { return bytes_per_block_; }

 private:
  loader::ModelConfig config_;
  KvStateOptions options_;
  ops::Ops* ops_;
  std::vector<LayerState> layers_;
  int64_t bytes_per_slot_ = 0;
  int64_t bytes_per_block_ = 0;
};

}  // namespace deepinfer::model
