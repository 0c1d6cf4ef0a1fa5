// The per-step batch description the ops consume (the runner builds it from a sched::BatchPlan):
// token rows, positions, per-sequence spans, history block tables, and the compressed-row
// emission plans derived from positions. Device arrays are TensorViews; every array also has a
// host mirror so launchers can size grids without a device sync.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace deepinfer::ops {

using tensor::TensorView;

// One sequence's tokens in this step. Its tokens occupy rows [token_begin, token_begin +
// n_tokens) in position order starting at start_pos.
struct SeqSpan {
  int32_t slot = 0;          // state slot: window rings and compressor states
  int32_t token_begin = 0;
  int32_t n_tokens = 0;
  int32_t start_pos = 0;
  // Compressed rows of groups that complete before this position already exist in shared
  // history blocks (prefix hit): they are read, never rewritten.
  int32_t n_cached = 0;
  // First position the sliding window may see (> 0 after a bounded replay that rebuilt the
  // window from the middle of the sequence); positions below it are invisible to the window.
  int32_t window_floor = 0;
};

struct BatchView {
  int64_t n_tokens = 0;
  int64_t n_seqs = 0;
  int32_t block_tokens = 0;     // positions per history block
  int32_t max_blocks = 0;       // columns of block_tables
  TensorView token_ids;         // [n_tokens] I32
  TensorView positions;         // [n_tokens] I32
  TensorView token_seq;         // [n_tokens] I32: sequence index of each row
  TensorView seqs;              // [n_seqs, 6] I32: SeqSpan fields in declaration order
  TensorView block_tables;      // [n_seqs, max_blocks] I32
  // Host mirrors (always valid):
  const int32_t* h_token_ids = nullptr;
  const int32_t* h_positions = nullptr;
  const int32_t* h_token_seq = nullptr;
  const SeqSpan* h_seqs = nullptr;
  const int32_t* h_block_tables = nullptr;
};

// Rows a compressor of ratio m emits this step: group g of a sequence is complete when the token
// at position g*m + m - 1 is processed. Built on the host from BatchView (plan_emissions).
struct EmitPlan {
  int ratio = 0;
  int64_t n_emit = 0;
  TensorView token;  // [n_emit] I32: batch row of the token that completes the group
  TensorView group;  // [n_emit] I32: group index g (its rows are RoPE'd at position g*m)
  TensorView dst;    // [n_emit] I32: flat history row (block * rows_per_block + offset), -1 = cached
  std::vector<int32_t> h_token, h_group, h_dst;
};

// Fills the host side of an EmitPlan (device views are attached by the caller).
void plan_emissions(const BatchView& batch, int ratio, EmitPlan* plan);
// Pads a plan to `capacity` entries that emit nothing (token = n_tokens of the batch, after
// every sequence; group 0; dst -1), so its shape no longer depends on positions.
void pad_emissions(int64_t capacity, EmitPlan* plan);

}  // namespace deepinfer::ops
