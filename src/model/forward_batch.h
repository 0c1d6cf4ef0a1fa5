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

// V4.1 CED prefill (model_v41_flash.md §2.3): which prompt rows the decoder layers run on.
enum class PrefillMode {
  kExact,    // every row through every layer (the reference's oracle mode)
  kCompact,  // decoder layers only on each prompt's last keep_tokens rows, their windows floored
             // at the kept tail (DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact)
};

struct ModelOptions {
  Numerics numerics = Numerics::kOfficial;
  // V4.1 only (V4 ignores these).
  PrefillMode prefill_mode = PrefillMode::kExact;
  int32_t keep_tokens = 140;    // DEEPINFER_YOCO_PREFILL_KEEP_TOKENS: window + max rewind depth
  bool seed_draft_rings = true; // forward() appends the DSpark stages' ring entries (§7.2)
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
  // Return the final HC state of every row instead ([n_tokens, hc, D]): the MTP drafter's input
  // for each position the step runs (V4; V4.1 seeds its DSpark rings inside forward()).
  bool keep_hidden_all = false;
  // Asynchronous scheduling (optional; LanguageModel::takes_device_tokens): rows whose token an
  // earlier step sampled on the device and the host has not seen yet. token_from[t] >= 0: row t's
  // id is token_source[token_from[t]] (token_ids[t] is then a placeholder, any id of the
  // vocabulary); -1: token_ids[t]. Empty: every id is in token_ids.
  std::vector<int32_t> token_from;    // [n_tokens] or empty
  tensor::TensorView token_source;    // [n] I32 on the model's device (with token_from)
  // V4.1 (optional, per sequence; empty = not given):
  // Prompt length of each sequence: with PrefillMode::kCompact the decoder layers skip prompt
  // positions below n_prompt - keep_tokens (unknown or 0: no truncation).
  std::vector<int32_t> n_prompt;
  // Engram look-back: the token ids at positions start_pos - n_back .. start_pos - 1 of each
  // sequence, n_back = engram_max_ngram_size - 1 per sequence (-1 = unknown). Needed after a
  // replay from a cold slot; otherwise the slot's own history is used.
  std::vector<int32_t> engram_lookback;
  // Image spans (§8): the batch rows inside an image span (its IMAGE rows and delimiters; distinct,
  // ascending) and their rows from the vision encoder, [image_rows.size(), hidden] F32 in that
  // order, which replace the token embedding. These rows are DEAD for Engram (gate 0; an n-gram
  // reaching one is blocked there) and select experts with the gate's bias_vl. V4: must be empty.
  std::vector<int32_t> image_rows;
  std::vector<float> image_embeds;
};

// An engram_lookback entry for a position inside an image span (DEAD: blocks the n-grams there).
inline constexpr int32_t kEngramLookbackImage = -2;

struct ForwardResult {
  tensor::TensorView logits;  // [n_logit_rows, vocab] F32 on the ops' device, valid until the next call
  tensor::TensorView hidden;  // [n_logit_rows, hc, D] when keep_hidden; [n_tokens, hc, D] when keep_hidden_all
  // V4.1 DSpark draft (mtp_forward), one entry per batch row: the greedy Markov-chained draft
  // token of the row and its confidence logit (sigmoid = estimated acceptance probability).
  std::vector<int32_t> draft_tokens;
  std::vector<float> confidence;
};

// Per-layer hidden states for golden comparisons (host copies, F32).
struct Capture {
  std::vector<std::vector<float>> after_layer;  // [layer] -> [n_tokens, hc, D]
};

}  // namespace deepinfer::model
