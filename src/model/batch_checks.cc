#include "model/batch_checks.h"

namespace deepinfer::model {

using tensor::TensorView;

Status check_batch_layout(const ForwardBatch& b, const KvStateOptions& so, int64_t vocab_size,
                          int64_t max_positions, bool needs_blocks) {
  const int64_t T = static_cast<int64_t>(b.token_ids.size());
  if (T == 0) return invalid_argument("forward: empty batch");
  if (static_cast<int64_t>(b.positions.size()) != T) return invalid_argument("forward: {} positions for {} tokens", b.positions.size(), T);
  int64_t next_row = 0;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const ops::SeqSpan& seq = b.seqs[s];
    if (seq.token_begin != next_row || seq.n_tokens <= 0) return invalid_argument("forward: sequence {} rows are not contiguous", s);
    next_row += seq.n_tokens;
    if (seq.slot < 0 || seq.slot >= so.n_slots) return invalid_argument("forward: sequence {} slot {} out of range", s, seq.slot);
    const int64_t last = seq.start_pos + seq.n_tokens - 1;
    if (last >= max_positions) {
      return out_of_range("forward: sequence {} reaches position {} beyond max_position_embeddings {}", s, last,
                          max_positions);
    }
    if (seq.start_pos < 0 || seq.window_floor < 0 || seq.window_floor > seq.start_pos) {
      return invalid_argument("forward: sequence {} has start_pos {} window_floor {}", s, seq.start_pos, seq.window_floor);
    }
    const int64_t blocks_needed = last / so.block_tokens + 1;
    if (needs_blocks && blocks_needed > b.max_blocks) {
      return invalid_argument("forward: sequence {} needs {} history blocks, table has {}", s, blocks_needed, b.max_blocks);
    }
    for (int64_t k = 0; needs_blocks && k < blocks_needed; ++k) {
      const int32_t blk = b.block_tables[s * b.max_blocks + k];
      if (blk < 0 || blk >= so.n_blocks) return invalid_argument("forward: sequence {} block {} is {}", s, k, blk);
    }
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      if (b.positions[seq.token_begin + i] != seq.start_pos + i) {
        return invalid_argument("forward: sequence {} positions are not consecutive from {}", s, seq.start_pos);
      }
    }
  }
  if (next_row != T) return invalid_argument("forward: sequences cover {} of {} rows", next_row, T);
  for (int64_t t = 0; t < T; ++t) {
    if (b.token_ids[t] < 0 || b.token_ids[t] >= vocab_size) {
      return invalid_argument("forward: token id {} at row {} is outside the vocabulary of {}", b.token_ids[t], t,
                              vocab_size);
    }
  }
  if (!b.token_from.empty()) {
    if (static_cast<int64_t>(b.token_from.size()) != T) {
      return invalid_argument("forward: {} device token sources for {} tokens", b.token_from.size(), T);
    }
    const TensorView& src = b.token_source;
    if (src.dtype != tensor::DType::kI32 || src.rank != 1 || !src.is_contiguous()) {
      return invalid_argument("forward: device token sources need a [n] I32 token_source, got {}", src.shape_string());
    }
    for (int64_t t = 0; t < T; ++t) {
      if (b.token_from[t] >= src.numel()) {
        return invalid_argument("forward: row {} takes device token {} of {}", t, b.token_from[t], src.numel());
      }
    }
  }
  for (int32_t r : b.logit_rows) {
    if (r < 0 || r >= T) return invalid_argument("forward: logit row {} outside [0, {})", r, T);
  }
  return Status::ok();
}

}  // namespace deepinfer::model
