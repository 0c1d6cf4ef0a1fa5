// What a step sampled where its logits are needs from the host (ModelRunner::forward's device
// path), built from the sequences' sampler inputs: each logit row's Ops::SampleRow (steps 5-10 of
// the host sampler) and, for rows whose steps 1-4 change something — logit bias, allowed ids, a
// grammar mask, min_tokens' stop suppression, penalties — its Ops::AdjustRow with the sparse inputs
// (one entry per distinct token the bias or penalties touch, the stop ids, the token mask). The
// device then runs Ops::adjust_logits before sampling: no step copies the logits to the host.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/ops.h"
#include "sample/sampler.h"

namespace deepinfer::engine {

struct DeviceSamplePlan {
  std::vector<ops::Ops::SampleRow> rows;          // [logit rows]
  int32_t n_top = -1;                             // most top logprobs a row asks for; -1: no logprobs
  std::vector<ops::Ops::AdjustRow> adjust_rows;   // [logit rows] when some row has steps 1-4, else empty
  std::vector<ops::Ops::AdjustEntry> entries;
  std::vector<int32_t> stops;
  std::vector<uint32_t> masks;                    // [masked rows, ceil(V / 32)]
  // The ids the step before sampled, where they are (ForwardBatch::token_source), when a row with
  // penalties decodes one of them (AdjustRow::pending); else empty.
  tensor::TensorView pending_ids;

  bool adjusts() const { return !adjust_rows.empty(); }
  // Empties the plan for the next step, keeping the vectors' memory (a step's entries run to
  // hundreds of KB at large batch: fresh vectors each step cost more in page faults than filling).
  void clear();
  // Row `row` (rows must be added in any order, each once) from the host sampler's input: its
  // SampleRow, and its adjustments when steps 1-4 change anything. `config`: the sampler's
  // vocabulary and EOS ids (min_tokens suppresses them unless ignore_eos). pending >= 0: the row's
  // input token is pending_ids[pending], which `in`'s history does not hold yet (a step planned
  // ahead): the penalties count it on the device.
  void add(size_t row, const sample::RowInput& in, const sample::SamplerConfig& config, int32_t pending = -1);
  // Rows with nothing to adjust in a step where others have: identity rows (a plain sanitised copy).
  void finish(size_t n_rows);
};

}  // namespace deepinfer::engine
