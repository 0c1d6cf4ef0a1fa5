// Model::Step: everything one forward() derives from its ForwardBatch before running layers —
// the device batch view and, per compression ratio, the rows completed this step and their
// RoPE positions. Private to src/model.
#pragma once

#include <map>
#include <vector>

#include "model/model.h"
#include "ops/batch.h"

namespace deepinfer::model {

struct Model::Step {
  const ForwardBatch* host = nullptr;
  std::vector<int32_t> token_seq;            // host: sequence index per row
  std::vector<int32_t> block_tables;         // host: padded tables of a fixed-shape step
  ops::BatchView batch;
  std::map<int, ops::EmitPlan> emit;         // ratio -> rows completed this step
  std::map<int, tensor::TensorView> emit_positions;  // ratio -> [n_emit] I32 positions g * ratio
};

}  // namespace deepinfer::model
