// The dense FP8 projections a model offers its backend to keep prepared (ops::Ops::prepare_linear),
// after the LM head and in layer order until the backend's budget is spent: the CUDA backend keeps
// them as the FP8-order large-M kernel's blocks when DEEPINFER_GEMM_FP8_ORDER=1 (so launches of
// more than the decode kernel's rows, 16 by default, read them instead of re-laying the weight
// out per launch) and declines otherwise. BF16 weights are not offered: their packed copies are
// for the LM head's budget.
// Works on V4 and V4.1 layer weights alike (attn.{wq_a, wkv, wq_b, wo_b}, attn.indexer->wq_b,
// ffn.shared->{w1, w3, w2}).
#pragma once

#include "ops/ops.h"
#include "tensor/linear_weight.h"

namespace deepinfer::model {

template <typename Layers>
void prepare_projections(ops::Ops& ops, Layers& layers) {
  auto offer = [&](tensor::LinearWeight& w) {
    if (w.format == tensor::WeightFormat::kFp8Block) ops.prepare_linear(w);
  };
  for (auto& l : layers) {
    for (tensor::LinearWeight* w : {&l.attn.wq_a, &l.attn.wkv, &l.attn.wq_b, &l.attn.wo_b}) offer(*w);
    if (l.attn.indexer) offer(l.attn.indexer->wq_b);
    if (l.ffn.shared) {
      for (tensor::LinearWeight* w : {&l.ffn.shared->w1, &l.ffn.shared->w3, &l.ffn.shared->w2}) offer(*w);
    }
  }
}

}  // namespace deepinfer::model
