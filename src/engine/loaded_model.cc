#include "engine/loaded_model.h"

#include <cstdlib>
#include <string>

#include "loader/engram_layout.h"
#include "loader/weight_binding.h"
#include "engine/vision_image_encoder.h"
#include "loader/weights_v41.h"
#include "model/model.h"
#include "model/v41/model_v41.h"
#include "engine/device_backend.h"

namespace deepinfer::engine {

Result<model::Numerics> parse_numerics(const std::string& name) {
  if (name == "official") return model::Numerics::kOfficial;
  if (name == "plain") return model::Numerics::kPlain;
  return invalid_argument("numerics '{}' must be 'official' or 'plain'", name);
}

namespace {

// DeepSeek-V4.1: its own weights, the Engram token-map sidecar and ModelV41. On a device backend
// every tensor but the Engram tables is copied to the device.
Result<std::unique_ptr<LoadedModel>> load_v41(std::unique_ptr<LoadedModel> lm, const loader::TensorSource& host_source,
                                              const LoadOptions& options) {
  std::unique_ptr<DeviceTensorSource> device_source;
  if (lm->ops->device() != tensor::Device::kCpu) {
    // The Engram tables and the vision stage stay in host memory: the model gathers table rows on
    // the host (§4) and the vision tower runs on a CPU backend of its own.
    device_source = std::make_unique<DeviceTensorSource>(host_source, lm->ops.get(), [](const std::string& name) {
      return loader::is_engram_table(name) || loader::is_vision_tensor(name);
    });
  }
  const loader::TensorSource& source = device_source ? *device_source : host_source;
  auto weights = loader::bind_weights_v41(lm->config, source);
  if (!weights.is_ok()) return weights.status().with_context(lm->dir);
  loader::EngramTokenMap engram;
  if (!lm->config.engram_layer_ids.empty()) {
    auto map = loader::load_engram_sidecar(lm->config, lm->dir);
    if (!map.is_ok()) return map.status().with_context(lm->dir);
    engram = std::move(map).value();
  }
  model::ModelOptions mo;
  mo.numerics = options.numerics;
  mo.prefill_mode = options.prefill_mode;
  mo.keep_tokens = options.keep_tokens;
  // The vision weights (host-resident views, see above) go to the encoder; the text model does not
  // read them.
  if (weights->vision) {
    DI_ASSIGN_OR_RETURN(lm->image_encoder,
                        VisionImageEncoder::create(lm->config, std::move(*weights->vision), options.numerics));
    weights->vision.reset();
  }
  lm->model = std::make_unique<model::ModelV41>(lm->config, std::move(weights).value(), std::move(engram),
                                                lm->ops.get(), mo);
  return lm;
}

}  // namespace

Result<std::unique_ptr<LoadedModel>> load_model(const std::string& dir, const LoadOptions& options) {
  auto lm = std::make_unique<LoadedModel>();
  lm->dir = dir;
  DI_ASSIGN_OR_RETURN(lm->config, loader::load_model_config(dir));
  DI_ASSIGN_OR_RETURN(loader::Checkpoint ckpt, loader::Checkpoint::open(dir));
  lm->checkpoint = std::make_unique<loader::Checkpoint>(std::move(ckpt));
  lm->device = resolve_device(options.device, /*device_capable=*/true);  // V4 and V4.1 (since session 58)
  DI_ASSIGN_OR_RETURN(lm->ops, make_ops(lm->device));
  loader::CheckpointSource host_source(*lm->checkpoint);
  if (lm->config.family == loader::ModelFamily::kV41) return load_v41(std::move(lm), host_source, options);
  // On a device backend, weights are copied once into device memory; the CPU reads the mapping.
  std::unique_ptr<DeviceTensorSource> device_source;
  if (lm->ops->device() != tensor::Device::kCpu) {
    device_source = std::make_unique<DeviceTensorSource>(host_source, lm->ops.get());
  }
  const loader::TensorSource& source = device_source ? *device_source : static_cast<const loader::TensorSource&>(host_source);
  auto weights = loader::bind_weights(lm->config, source);
  if (!weights.is_ok()) return weights.status().with_context(dir);
  lm->model = std::make_unique<model::Model>(lm->config, std::move(weights).value(), lm->ops.get(),
                                             model::ModelOptions{options.numerics});
  return lm;
}

}  // namespace deepinfer::engine
