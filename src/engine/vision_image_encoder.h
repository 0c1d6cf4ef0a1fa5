// The DeepSeek-V4.1 vision stage behind engine::ImageEncoder (image_inputs.h): an image file
// decoded and sized (vision/preprocess.h), then the ViT + aligner (vision/vision_encoder.h) on a
// CPU backend of its own over host-resident vision weights — the vision ops have no device
// kernels yet, and the encoder's output is host rows either way (the text model uploads them with
// the span's prefill chunk).
#pragma once

#include <memory>
#include <mutex>
#include <string_view>

#include "engine/image_inputs.h"
#include "loader/model_config.h"
#include "loader/weights_v41.h"
#include "model/forward_batch.h"
#include "ops/ops.h"
#include "vision/vision_encoder.h"

namespace deepinfer::engine {

class VisionImageEncoder final : public ImageEncoder {
 public:
  // `weights`: host views into the checkpoint, which must outlive the encoder (LoadedModel keeps
  // both). Errors when the config and the weights do not make a tower that can run.
  static Result<std::unique_ptr<VisionImageEncoder>> create(const loader::ModelConfig& config,
                                                            loader::VisionWeights weights, model::Numerics numerics);
  int64_t hidden() const override { return config_.hidden_size; }
  // Thread-safe (requests are accepted on their callers' threads): one image at a time.
  Result<EncodedImage> encode(std::string_view bytes) const override;

 private:
  VisionImageEncoder() = default;
  loader::ModelConfig config_;
  loader::VisionWeights weights_;
  std::unique_ptr<ops::Ops> ops_;
  std::unique_ptr<vision::VisionEncoder> encoder_;
  mutable std::mutex mu_;
};

}  // namespace deepinfer::engine
