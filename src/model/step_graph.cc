#include "model/step_graph.h"

#include <algorithm>

namespace deepinfer::model::step_graph {

bool shaped(const ForwardBatch& b) {
  // keep_hidden_all (the MTP drafter's steps) adds no launch: the result views the streams' buffer.
  if (b.token_ids.size() > static_cast<size_t>(kMaxTokens)) return false;
  for (const ops::SeqSpan& s : b.seqs)
    if (s.n_tokens > kMaxSeqTokens) return false;
  return true;
}

int32_t pad_tables(const std::vector<int32_t>& tables, int64_t n_seqs, int32_t cols, std::vector<int32_t>* padded) {
  const int32_t wide = (cols + kTableQuantum - 1) / kTableQuantum * kTableQuantum;
  padded->assign(static_cast<size_t>(n_seqs * wide), -1);
  for (int64_t s = 0; s < n_seqs; ++s)
    std::copy_n(tables.begin() + s * cols, cols, padded->begin() + s * wide);
  return wide;
}

ForwardResult run(ops::Ops& ops, uint64_t key, bool graphed, const std::function<ForwardResult(bool fixed)>& pass) {
  if (!graphed || !ops.graphs_enabled()) {
    ops.begin_step();
    return pass(/*fixed=*/false);
  }
  // A host-only pass first; its results are valid once the backend replays the graph recorded for
  // its launches. Otherwise the pass runs again, recorded or eager — in the same fixed shapes, so a
  // step's numbers never depend on which way it ran.
  ops.begin_step();
  ops.graph_prepare(key);
  ForwardResult r = pass(/*fixed=*/true);
  const ops::Ops::GraphStep how = ops.graph_replay();
  if (how == ops::Ops::GraphStep::kReplayed) return r;
  if (how == ops::Ops::GraphStep::kCapture) {
    ops.begin_step();
    ops.graph_capture_begin();
    r = pass(/*fixed=*/true);
    if (ops.graph_capture_end()) return r;
  }
  ops.begin_step();
  return pass(/*fixed=*/true);
}

}  // namespace deepinfer::model::step_graph
