// The host-side description of one forward step and its results, shared by every model family:
// which tokens of which sequences run, where their state and history live, which rows need logits.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/batch.h"
#include "tensor/tensor.h"

namespace deepinfer::model {

// Which numerics to reproduce (model_v4_flash.md §3).
enum class Numerics {
  // The official reference contract: BF16 activations and KV, FP8 activation quantisation before
  // every FP8/FP4 GEMM, FP8 KV fake-quant, Hadamard + FP4 indexer fake-quant.
  kOfficial,
  // Plain dequantised math in F32: no activation or KV quantisation (what transformers computes).
  kPlain,
};

struct ModelOptions {
  Numerics numerics = Numerics::kOfficial;
};

// A step's batch on the host (the runner builds it from the scheduler's plan).
struct ForwardBatch {
  std::vector<int32_t> token_ids;     // [n_tokens]
  std::vector<int32_t> positions;     // [n_tokens]
  std::vector<ops::SeqSpan> seqs;     // tokens of a sequence are contiguous, in position order
  int32_t max_blocks = 0;
  std::vector<int32_t> block_tables;  // [n_seqs * max_blocks] history block ids (-1 unused)
  std::vector<int32_t> logit_rows;    // token rows whose logits are wanted, in output order
  bool keep_hidden = false;           // also return the final HC state of the logit rows (MTP input)
};

struct ForwardResult {
  tensor::TensorView logits;  // [n_logit_rows, vocab] F32 on the ops' device, valid until the next call
  tensor::TensorView hidden;  // [n_logit_rows, hc, D] when keep_hidden
};

// Per-layer hidden states for golden comparisons (host copies, F32).
struct Capture {
  std::vector<std::vector<float>> after_layer;  // [layer] -> [n_tokens, hc, D]
};

}  // namespace deepinfer::model
