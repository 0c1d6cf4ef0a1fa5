#include "engine/loaded_model.h"

#include "loader/engram_layout.h"
#include "loader/weight_binding.h"
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

// DeepSeek-V4.1: its own weights, the Engram token-map sidecar and ModelV41. The CPU reference
// runs it; device backends do not implement the V4.1 ops yet (docs/v41.md).
Result<std::unique_ptr<LoadedModel>> load_v41(std::unique_ptr<LoadedModel> lm, const loader::TensorSource& source,
                                              const LoadOptions& options) {
  if (lm->ops->device() != tensor::Device::kCpu) {
    return unimplemented("{}: DeepSeek-V4.1 runs on the CPU reference only in this build (device '{}')", lm->dir,
                         lm->device);
  }
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
  lm->device = resolve_device(options.device, lm->config.family != loader::ModelFamily::kV41);
  DI_ASSIGN_OR_RETURN(lm->ops, make_ops(lm->device));
  loader::CheckpointSource host_source(*lm->checkpoint);
  // (Before any device copy: V4.1 refuses device backends, and should not upload the checkpoint first.)
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
