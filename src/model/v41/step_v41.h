// ModelV41::Rows and ModelV41::Step: what one forward() derives from its ForwardBatch before the
// layers run — the full row set (encoder), the decoder row set (the kept tail under compact
// prefill, otherwise the same rows), the compressor emission plans, the Engram table rows, and the
// step-local CSA2 state passed between layers (latest top-k, candidate blocks, DSpark inputs).
// Private to src/model. Rows hold the host arrays their BatchView points into: never copy a Rows.
#pragma once

#include <map>
#include <vector>

#include "model/v41/model_v41.h"
#include "ops/batch.h"

namespace deepinfer::model {

struct ModelV41::Rows {
  std::vector<int32_t> token_ids, positions, token_seq;  // [n]
  std::vector<ops::SeqSpan> seqs;
  std::vector<int32_t> block_tables;  // [n_seqs * max_blocks]
  int32_t max_blocks = 1;
  std::vector<int32_t> image_rows;    // rows of this set inside image spans (ascending)
  ops::BatchView batch;               // device arrays + host mirrors of the vectors above
  int64_t n() const { return static_cast<int64_t>(token_ids.size()); }
  // batch's sizes and host mirrors (the device arrays come with ModelV41::upload_rows).
  void mirror(int32_t block_tokens) {
    batch.n_tokens = n();
    batch.n_seqs = static_cast<int64_t>(seqs.size());
    batch.block_tokens = block_tokens;
    batch.max_blocks = max_blocks;
    batch.h_token_ids = token_ids.data();
    batch.h_positions = positions.data();
    batch.h_token_seq = token_seq.data();
    batch.h_seqs = seqs.data();
    batch.h_block_tables = block_tables.data();
  }

  Rows() = default;
  Rows(const Rows&) = delete;
  Rows& operator=(const Rows&) = delete;
};

struct ModelV41::Step {
  const ForwardBatch* host = nullptr;
  Rows full;                           // every row of the batch
  Rows dec;                            // rows the decoder layers run on
  bool cut = false;                    // dec differs from full (dropped rows or raised floors)
  std::vector<int32_t> dec_rows;       // full-batch row of each decoder row
  std::vector<int32_t> dec_of_full;    // decoder row of each full row, -1 when dropped
  std::vector<KvState::DecoderRows> dec_held;  // per sequence: the slot's decoder rows after the step
  std::map<int, ops::EmitPlan> emit;   // ratio -> groups completed this step (full rows)
  std::map<int, tensor::TensorView> emit_positions;  // ratio -> [n_emit] I32 positions g * ratio
  std::vector<std::vector<int64_t>> engram_rows;     // [engram layer][n * n_cols] table rows
  tensor::TensorView topk;             // latest index source's top-k [rows, index_topk] I32
  tensor::TensorView candidates;       // candidate blocks [decoder rows, candidate_topk_blocks] I32
  std::vector<tensor::TensorView> draft_inputs;  // per DSpark target layer: [rows, D] stream mean
  std::vector<bool> draft_input_full;  // that input covers the full rows (gather before seeding)

  Step() = default;
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;
};

}  // namespace deepinfer::model
