// LanguageModel: what the engine needs from a model family's forward pass. DeepSeek-V4 (Model,
// model.h) and V4.1 implement it; the engine holds one through engine::LoadedModel and never
// branches on the family.
#pragma once

#include "loader/model_config.h"
#include "model/forward_batch.h"
#include "model/kv_state.h"

namespace deepinfer::model {

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual const loader::ModelConfig& config() const = 0;
  virtual const ModelOptions& options() const = 0;
  // Activation (and KV) dtype the numerics imply (BF16 official, F32 plain).
  virtual tensor::DType act_dtype() const = 0;
  // Runs the main layers over the batch and the LM head over batch.logit_rows; errors for
  // malformed batches, never a crash.
  virtual Result<ForwardResult> forward(const ForwardBatch& batch, KvState& state, Capture* capture = nullptr) = 0;
  // Whether forward() honours ForwardBatch::token_from (input tokens read on the device). A family
  // whose forward needs every id on the host (V4.1's Engram n-gram hashes and DSpark chain) says
  // no, and the engine then never schedules a step before the last one's tokens are back.
  virtual bool takes_device_tokens() const { return false; }
  // The MTP / draft module over `hidden` (see the family's documentation).
  virtual Result<ForwardResult> mtp_forward(const ForwardBatch& batch, const tensor::TensorView& hidden,
                                            KvState& state) = 0;
};

}  // namespace deepinfer::model
