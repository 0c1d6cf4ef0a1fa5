#include "engine/vision_image_encoder.h"

#include <span>

#include "ops/cpu/cpu_ops.h"
#include "vision/preprocess.h"

namespace deepinfer::engine {

Result<std::unique_ptr<VisionImageEncoder>> VisionImageEncoder::create(const loader::ModelConfig& config,
                                                                       loader::VisionWeights weights,
                                                                       model::Numerics numerics) {
  std::unique_ptr<VisionImageEncoder> e(new VisionImageEncoder());
  e->config_ = config;
  e->weights_ = std::move(weights);
  e->ops_ = std::make_unique<ops::cpu::CpuOps>();
  e->encoder_ = std::make_unique<vision::VisionEncoder>(e->config_, e->weights_, e->ops_.get(), numerics);
  if (!e->encoder_->status().is_ok()) return e->encoder_->status();
  return e;
}

Result<EncodedImage> VisionImageEncoder::encode(std::string_view bytes) const {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  DI_ASSIGN_OR_RETURN(vision::PreparedImage image,
                      vision::prepare_image_bytes(std::span<const uint8_t>(data, bytes.size()), config_.vision));
  std::lock_guard<std::mutex> lock(mu_);
  DI_ASSIGN_OR_RETURN(vision::ImageEmbedding embedding, encoder_->encode(image));
  EncodedImage out;
  out.n_rows = static_cast<int32_t>(embedding.span_len);
  out.rows = std::move(embedding.rows);
  return out;
}

}  // namespace deepinfer::engine
