// Step graphs for a model's forward pass (ops.h, "step graphs"), shared by Model (V4) and
// ModelV41: which batches a backend may replay from a recorded graph, the fixed shapes such a step
// takes, and the prepare / replay / capture / eager sequence that runs one.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/forward_batch.h"
#include "ops/ops.h"

namespace deepinfer::model::step_graph {

// Steps a backend may replay as a recorded graph: decode and short verification steps.
inline constexpr int kMaxTokens = 512;
inline constexpr int kMaxSeqTokens = 16;
// Block-table columns of a fixed-shape step are a multiple of this: a replayable step keeps its
// shape while its sequences grow by this many blocks.
inline constexpr int32_t kTableQuantum = 16;

bool shaped(const ForwardBatch& batch);

// `tables` [n_seqs, cols] rows re-laid as [n_seqs, cols rounded up to kTableQuantum], -1 padded.
// Returns the padded column count.
int32_t pad_tables(const std::vector<int32_t>& tables, int64_t n_seqs, int32_t cols, std::vector<int32_t>* padded);

// Runs `pass` — one forward pass that starts from an empty step workspace and only launches (and
// uploads): every host-side state change belongs before or after it — as a step: where `graphed`
// and the backend records graphs, a host-only prepare pass first, then the graph recorded for its
// launches replayed, or the pass recorded and launched, or run eagerly; otherwise once, eagerly.
// `fixed` tells the pass to take fixed shapes (the results are the same either way). `key` names
// the persistent buffers the pass reads besides the weights (the model, its KV state, an input).
ForwardResult run(ops::Ops& ops, uint64_t key, bool graphed, const std::function<ForwardResult(bool fixed)>& pass);

}  // namespace deepinfer::model::step_graph
