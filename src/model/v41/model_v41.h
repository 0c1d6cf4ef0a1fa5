// model::ModelV41 — the DeepSeek-V4.1(-Flash) forward pass (model_v41_flash.md §2-§7), written once
// against ops::Ops: CED encoder/decoder with CSA2 roles (Full / Reindex / Reuse), the two-level
// indexer, V4.1's KV quantizers, single-pass mHC, 384-expert MoE without hash layers, Engram
// (hashed on the host, table rows gathered from host memory), DSpark ring seeding and the draft
// forward. One forward() runs prefill chunks and decode tokens of many sequences; in exact prefill
// mode chunked prefill + decode equals one forward over the whole sequence (bit for bit on the CPU
// backend). Compact mode runs the decoder layers only on each prompt's kept tail (§2.3).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loader/engram_layout.h"
#include "loader/model_config.h"
#include "loader/weights_v41.h"
#include "model/forward_batch.h"
#include "model/kv_state.h"
#include "model/language_model.h"
#include "ops/ops.h"

namespace deepinfer::model {

class ModelV41 final : public LanguageModel {
 public:
  // `engram` is the tokenizer-derived token map (load_engram_sidecar); required iff the config
  // has Engram layers.
  ModelV41(loader::ModelConfig config, loader::ModelWeightsV41 weights, loader::EngramTokenMap engram,
           ops::Ops* ops, ModelOptions options);

  const loader::ModelConfig& config() const override { return config_; }
  const ModelOptions& options() const override { return options_; }
  tensor::DType act_dtype() const override;

  // Main layers over the batch, LM head over batch.logit_rows, DSpark rings seeded for every row
  // the decoder ran on. Errors (never crashes) for malformed batches, and for logit rows that
  // compact prefill dropped.
  Result<ForwardResult> forward(const ForwardBatch& batch, KvState& state, Capture* capture = nullptr) override;

  // DSpark draft (§7.2): each sequence's rows are one draft block [t, noise, ...] at positions
  // start_pos.. (its ring holds the target positions below). Returns logits of every row (base +
  // Markov bias of the greedy chain), draft_tokens and confidence logits. `hidden` is unused.
  Result<ForwardResult> mtp_forward(const ForwardBatch& batch, const tensor::TensorView& hidden,
                                    KvState& state) override;

  // Decoder rows of each sequence this step would keep (compact prefill), for tests and the bench:
  // the first position the decoder layers run on.
  int32_t decoder_begin(int32_t n_prompt) const;

 private:
  struct Rows;
  struct Step;
  // `history`: the batch reads/writes history blocks (forward); the draft forward does not.
  Status validate(const ForwardBatch& batch, const KvState& state, bool history) const;
  // The host's part of a step (rows, decoder tail, emission plans), reading `state` only.
  // `fixed`: shapes that depend only on the batch's token and sequence counts (emission plans
  // padded to one row per token, block tables to step_graph::kTableQuantum columns), as graph
  // replay needs; the results are the same either way.
  void make_step(const ForwardBatch& batch, const KvState& state, bool history, bool fixed, Step& step);
  void make_decoder_rows(const KvState& state, Step& step);
  // A pass's uploads of the planned step (its row sets and emission plans), after begin_step().
  void upload_step(Step& step);
  void upload_rows(Rows& rows);
  // One pass of forward() over a planned step (after begin_step()): uploads and launches only.
  ForwardResult run(Step& step, KvState& state, std::span<const int32_t> logit_rows, Capture* capture);

  // Layers (model_v41_block.cc).
  tensor::TensorView run_layers(Step& step, KvState& state, tensor::TensorView x, tensor::TensorView& pre,
                                Capture* capture);
  tensor::TensorView block_tail(const loader::BlockWeightsV41& w, int64_t layer, KvState& state, Step& step,
                                const Rows& rows, const tensor::TensorView& x, const tensor::TensorView& a,
                                tensor::TensorView& pre);
  tensor::TensorView moe(const loader::MoeWeightsV41& w, int64_t n_experts_per_tok, const Rows& rows,
                         const tensor::TensorView& b);
  tensor::TensorView head(const tensor::TensorView& x, const tensor::TensorView& pre, const tensor::TensorView& norm,
                          std::span<const int32_t> rows);

  // Attention (model_v41_attention.cc).
  void source_update(const loader::BlockWeightsV41& w, int64_t layer, KvState& state, Step& step,
                     const tensor::TensorView& a);
  tensor::TensorView attention(const loader::BlockWeightsV41& w, int64_t layer, KvState& state, Step& step,
                               const Rows& rows, const tensor::TensorView& a);
  tensor::TensorView project_out(const loader::AttentionWeightsV41& w, const Rows& rows, tensor::TensorView o,
                                 const ops::RopeParams& rope);

  // Engram (model_v41_engram.cc).
  void hash_engram(Step& step, KvState& state);
  tensor::TensorView engram(const loader::EngramWeights& w, int64_t layer, Step& step, const tensor::TensorView& x);

  // DSpark (model_v41_dspark.cc).
  void capture_draft_input(int64_t layer, Step& step, const tensor::TensorView& x);
  void seed_draft_rings(Step& step, KvState& state);
  void markov_heads(const ForwardBatch& batch, const tensor::TensorView& h, std::vector<float>& logits,
                    ForwardResult& result);
  tensor::TensorView draft_attention(const loader::BlockWeightsV41& w, int stage, KvState& state, const Rows& rows,
                                     const tensor::TensorView& a);

  ops::LinearOptions fp8_act() const;
  bool official() const { return options_.numerics == Numerics::kOfficial; }
  tensor::TensorView alloc_act(std::initializer_list<int64_t> shape);

  loader::ModelConfig config_;
  loader::ModelWeightsV41 weights_;
  loader::EngramTokenMap engram_map_;
  loader::EngramLayout engram_layout_;
  ops::Ops* ops_;
  ModelOptions options_;
  ops::HcParams hc_params_;
  tensor::TensorView inv_freq_main_;      // [r/2] F32
  tensor::TensorView inv_freq_compress_;  // [r/2] F32 (YaRN; attention factor 1)
  tensor::TensorView zero_ape_;           // [max ratio, head_dim] F32 zeros: V4.1 pools without APE
};

}  // namespace deepinfer::model
