// LoadedModel: a checkpoint opened, validated and bound to a backend's ops, with its Model.
// The one place that decides the backend (CPU reference or CUDA) and keeps the mapped
// checkpoint alive as long as weights point into it.
#pragma once

#include <memory>
#include <string>

#include "loader/checkpoint.h"
#include "loader/weight_binding.h"
#include "loader/model_config.h"
#include "engine/image_inputs.h"
#include "model/language_model.h"
#include "ops/ops.h"

namespace deepinfer::engine {

struct LoadOptions {
  model::Numerics numerics = model::Numerics::kOfficial;
  std::string device = "cpu";
  // V4.1 CED prefill (model_v41_flash.md §2.3); V4 ignores these.
  model::PrefillMode prefill_mode = model::PrefillMode::kExact;
  int32_t keep_tokens = 140;
};

struct LoadedModel {
  std::string dir;
  std::string device;  // the backend the model runs on (LoadOptions::device, "auto" resolved)
  loader::ModelConfig config;
  std::unique_ptr<loader::Checkpoint> checkpoint;
  // Weights generated on the device instead (benchmarks: synthetic_loaded_model, bench_model.h).
  std::unique_ptr<loader::TensorSource> synthetic;
  std::unique_ptr<ops::Ops> ops;
  std::unique_ptr<model::LanguageModel> model;
  // Vision models: the image encoder (null: the model takes no images).
  std::unique_ptr<ImageEncoder> image_encoder;
};

Result<std::unique_ptr<LoadedModel>> load_model(const std::string& dir, const LoadOptions& options);
Result<model::Numerics> parse_numerics(const std::string& name);

}  // namespace deepinfer::engine
