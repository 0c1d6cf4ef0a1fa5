// KvState: the device storage behind the KV manager's integer ids (model_v4_flash.md §7,
// model_v41_flash.md §3.4). Per state slot (one running sequence): every layer's window ring and
// every compressor's streaming state (+ V4.1's Engram look-back, on the host). Per history block
// (block_tokens positions): the compressed rows and indexer keys of the layers that own them —
// every compressed layer in V4, only the KV-source layers in V4.1 (CSA2: the others read their
// source's pools). The manager (src/kv) decides which ids a sequence owns; this only holds bytes.
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
  // Positions every per-slot ring keeps beyond what the model reads (window rings, compressor
  // states, the Engram look-back): rows written up to this many positions past a sequence's
  // end and then given up leave every row it reads intact, so rejected drafts need no rewind of
  // the state (the engine sets it to its draft length; 0 without drafts).
  int32_t spare_positions = 0;
};

struct CompressorState {
  tensor::TensorView kv;     // [n_slots, 2m or m + spare, width] F32: position p at p % ring
  tensor::TensorView score;  // [n_slots, 2m or m + spare, width] F32 (already biased by ape)
};

struct LayerState {
  int ratio = 0;
  tensor::TensorView window;    // [n_slots, W + spare, head_dim]: position p at p % ring
  CompressorState comp;         // V4: ratio > 0; V4.1: KV sources with ratio > 1 (ratio 1 keeps none)
  CompressorState idx_comp;     // V4: ratio == 4
  // V4: every compressed layer; V4.1: KV sources only. Rows hold FP8/FP4-valued numbers in
  // kv_dtype (exactly representable; packed storage is a device-backend layout choice).
  tensor::TensorView comp_rows; // [n_blocks * block_tokens / ratio, head_dim]
  tensor::TensorView idx_keys;  // [n_blocks * block_tokens / ratio, index_head_dim] (V4: ratio 4 only)
};

class KvState {
 public:
  KvState(const loader::ModelConfig& config, const KvStateOptions& options, ops::Ops* ops);

  const KvStateOptions& options() const { return options_; }
  // Main layers first, then the MTP/draft blocks.
  LayerState& layer(int64_t i) { return layers_[static_cast<size_t>(i)]; }
  int64_t n_layers() const { return static_cast<int64_t>(layers_.size()); }
  // Empties a slot for a new sequence: compressor scores -inf (no candidates), values 0, Engram
  // look-back unknown. Window contents need no clearing: the window floor hides anything not
  // written since.
  void reset_slot(int32_t slot);
  // Gives every tensor back to the Ops (Ops::free_persistent) and holds none after: for an owner
  // done with the state while the Ops lives on (the bench builds one per row: without it each
  // row's pools stayed until the Ops went, and a run of large rows ran out of device memory).
  // The engine's state lives as long as its Ops and is never released.
  void release();
  // Copies every per-slot tensor of `src` into `dst` (prefix-cache state snapshots).
  void copy_slot(int32_t src, int32_t dst);
  // The slot's sequence gives up its positions >= end (rejected drafts): the rings keep their
  // entries (past the end, written again before they are read; spare_positions kept what they
  // overwrote), the host's record of where the decoder rings are valid ends at `end`.
  void forget_from(int32_t slot, int32_t end);
  // Bytes held per slot and per block (capacity planning and the bench).
  int64_t bytes_per_slot() const { return bytes_per_slot_; }
  int64_t bytes_per_block() const { return bytes_per_block_; }
  // What one history block costs for `config` (the engine sizes its pools with this).
  static int64_t history_bytes_per_block(const loader::ModelConfig& config, int32_t block_tokens,
                                         tensor::DType kv_dtype);

  // V4.1 Engram look-back (host, per slot): the compressed id last recorded at `pos`, or -1 when
  // this slot does not hold it (never written, or overwritten by a later position).
  int32_t engram_id(int32_t slot, int32_t pos) const;
  void record_engram_id(int32_t slot, int32_t pos, int32_t id);
  int32_t engram_lookback() const { return n_engram_back_; }

  // V4.1 CED decoder rows (host, per slot): the decoder layers' window rings hold positions
  // [floor, next) of this slot's sequence (compact prefill skips decoder rows, so a ring may have
  // gaps; a restored snapshot carries where its rings are valid). A fresh slot holds [0, 0).
  struct DecoderRows {
    int32_t floor = 0;
    int32_t next = 0;
  };
  DecoderRows decoder_rows(int32_t slot) const { return decoder_rows_[static_cast<size_t>(slot)]; }
  void set_decoder_rows(int32_t slot, DecoderRows rows) { decoder_rows_[static_cast<size_t>(slot)] = rows; }

 private:
  loader::ModelConfig config_;
  KvStateOptions options_;
  ops::Ops* ops_;
  std::vector<LayerState> layers_;
  int64_t bytes_per_slot_ = 0;
  int64_t bytes_per_block_ = 0;
  int32_t n_engram_back_ = 0;              // engram_max_ngram_size - 1 (0: no Engram)
  int32_t engram_ring_size_ = 0;           // n_back + spare positions
  std::vector<int32_t> engram_ring_;       // [n_slots, ring, 2]: (position, compressed id)
  std::vector<DecoderRows> decoder_rows_;  // [n_slots]
};

}  // namespace deepinfer::model
