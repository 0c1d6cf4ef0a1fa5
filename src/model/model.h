// model::Model — the DeepSeek-V4(-Flash) forward pass, written once against ops::Ops
// (model_v4_flash.md §4). One forward() call runs a batch of sequences, each with any number of
// new tokens (prefill chunks and decode tokens mixed), reading and updating their KvState slots
// and history blocks. Chunked prefill followed by decode yields the same logits as one forward
// over the whole sequence (exactly, on the CPU backend).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "loader/model_config.h"
#include "loader/weights.h"
#include "model/forward_batch.h"
#include "model/kv_state.h"
#include "model/language_model.h"
#include "ops/ops.h"

namespace deepinfer::model {

class Model final : public LanguageModel {
 public:
  Model(loader::ModelConfig config, loader::ModelWeights weights, ops::Ops* ops, ModelOptions options);

  const loader::ModelConfig& config() const override { return config_; }
  const ModelOptions& options() const override { return options_; }
  tensor::DType act_dtype() const override;
  // The weights as this model holds them, with the copies its backend prepared (LinearWeight::
  // prepared): a second Model over the same backend (the bench's per-op breakdown, through a
  // decorating Ops) built from these runs the same launches as this one.
  const loader::ModelWeights& weights() const { return weights_; }

  // Runs every main layer over the batch and the LM head over batch.logit_rows.
  // Errors (never crashes) for malformed batches: ids outside the vocabulary, non-contiguous
  // positions, block tables that do not cover the positions.
  Result<ForwardResult> forward(const ForwardBatch& batch, KvState& state, Capture* capture = nullptr) override;
  bool takes_device_tokens() const override { return true; }

  // The MTP block `mtp.0` (§4.11): hidden [n, hc, D] final main-model states at positions
  // batch.positions, batch.token_ids = the tokens that follow them. Uses the MTP layer's window in
  // `state`. Returns logits [n, vocab] F32 predicting the token after the next.
  Result<ForwardResult> mtp_forward(const ForwardBatch& batch, const tensor::TensorView& hidden,
                                    KvState& state) override;

 private:
  struct Step;
  // history: the batch's block tables must cover its positions (the main stack's compressed
  // layers; the MTP block is window-only and reads none).
  Status validate(const ForwardBatch& batch, const KvState& state, bool history = true) const;
  // `fixed`: shapes that depend only on the batch's token and sequence counts (emission plans
  // padded to one row per token, block tables to step_graph::kTableQuantum columns), as graph replay
  // needs. The results are the same either way.
  Step make_step(const ForwardBatch& batch, const KvState& state, bool fixed);
  // One pass of forward() over a validated batch (after begin_step()).
  ForwardResult run(const ForwardBatch& batch, KvState& state, Capture* capture, bool fixed);
  // One pass of mtp_forward() over a validated batch (after begin_step()).
  ForwardResult run_mtp(const ForwardBatch& batch, const tensor::TensorView& hidden, KvState& state, bool fixed);
  // Runs `pass` (begin_step() done) as forward() does (step_graph::run): from a recorded step graph
  // where the backend has one for its launches and `batch` is graph-shaped, else eagerly. `key`:
  // the persistent buffers the pass reads besides the weights (the KV state, a hidden-state input).
  ForwardResult run_step(const ForwardBatch& batch, uint64_t key, const std::function<ForwardResult(bool fixed)>& pass);
  // Runs one block in place on the HC streams x [T, hc, D]; scratch is a second buffer of the same
  // shape. Every temporary of the block is released when it returns.
  void block(const loader::BlockWeights& w, int64_t layer, LayerState& state, Step& step, const tensor::TensorView& x,
             const tensor::TensorView& scratch);
  // a [T, D]: the sublayer input; aq: its FP8-quantised copy for the FP8 projections (official
  // numerics; empty otherwise). moe's b and bq likewise.
  tensor::TensorView attention(const loader::BlockWeights& w, int64_t layer, LayerState& state, Step& step,
                               const tensor::TensorView& a, const ops::QuantCopy& aq);
  void compressor(const tensor::CompressorWeights& w, const CompressorState& cs, int ratio, int64_t dc, bool indexer,
                  Step& step, const tensor::TensorView& a, const tensor::TensorView& pool);
  tensor::TensorView moe(const loader::BlockWeights& w, Step& step, const tensor::TensorView& b,
                         const ops::QuantCopy& bq);
  tensor::TensorView head(const tensor::TensorView& x, const tensor::HcHeadWeights& hc_head,
                          const tensor::TensorView& norm, std::span<const int32_t> rows);
  ops::LinearOptions fp8_act() const;
  // An FP8 projection's input: x's quantised copy, taken as it is, where there is one; else x,
  // quantised by the GEMM as fp8_act() says.
  struct Fp8Input {
    tensor::TensorView x;
    ops::LinearOptions options;
  };
  Fp8Input fp8_input(const tensor::TensorView& x, const ops::QuantCopy& q) const {
    return q.empty() ? Fp8Input{x, fp8_act()} : Fp8Input{q.out, {0, q.block}};
  }

  loader::ModelConfig config_;
  loader::ModelWeights weights_;
  ops::Ops* ops_;
  ModelOptions options_;
  ops::HcParams hc_params_;
  tensor::TensorView inv_freq_main_;      // [r/2] F32 on the device
  tensor::TensorView inv_freq_compress_;  // [r/2] F32 on the device
};

}  // namespace deepinfer::model
