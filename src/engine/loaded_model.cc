#include "engine/loaded_model.h"

#include "loader/weight_binding.h"
#include "model/model.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::engine {

Result<model::Numerics> parse_numerics(const std::string& name) {
  if (name == "official") return model::Numerics::kOfficial;
  if (name == "plain") return model::Numerics::kPlain;
  return invalid_argument("numerics '{}' must be 'official' or 'plain'", name);
}

Result<std::unique_ptr<LoadedModel>> load_model(const std::string& dir, const LoadOptions& options) {
  auto lm = std::make_unique<LoadedModel>();
  lm->dir = dir;
  DI_ASSIGN_OR_RETURN(lm->config, loader::load_model_config(dir));
  DI_ASSIGN_OR_RETURN(loader::Checkpoint ckpt, loader::Checkpoint::open(dir));
  lm->checkpoint = std::make_unique<loader::Checkpoint>(std::move(ckpt));
  if (options.device != "cpu") {
    return unimplemented("device '{}' is not available in this build (use cpu)", options.device);
  }
  lm->ops = std::make_unique<ops::cpu::CpuOps>();
  loader::CheckpointSource source(*lm->checkpoint);
  auto weights = loader::bind_weights(lm->config, source);
  if (!weights.is_ok()) return weights.status().with_context(dir);
  lm->model = std::make_unique<model::Model>(lm->config, std::move(weights).value(), lm->ops.get(),
                                             model::ModelOptions{options.numerics});
  return lm;
}

}  // namespace deepinfer::engine
