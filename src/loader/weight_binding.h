// Binds checkpoint tensors to ModelWeights by their official names, validating each against the
// inventory (inventory.h): dtype, shape, scale grid; a missing or extra tensor is an error that
// lists them. The source is abstract so the same binding serves the mapped checkpoint (CPU) and
// device copies of it (CUDA backend).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "loader/model_config.h"
#include "loader/weights.h"

namespace deepinfer::loader {

// Name -> view lookup.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual std::optional<TensorView> get(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;
  // Where a tensor lives, for error messages (a shard path).
  virtual std::string where(const std::string& name) const { return ""; }
  // Whether its FP4 code tensors are in the backend's device layout (Ops::to_fp4_device_layout);
  // the LinearWeights bound over them carry it.
  virtual bool fp4_device_layout() const { return false; }
};

// Host views into a mapped checkpoint.
class CheckpointSource : public TensorSource {
 public:
  explicit CheckpointSource(const Checkpoint& ckpt) : ckpt_(ckpt) {}
  std::optional<TensorView> get(const std::string& name) const override;
  std::vector<std::string> names() const override { return ckpt_.tensor_names(); }
  std::string where(const std::string& name) const override;

 private:
  const Checkpoint& ckpt_;
};

// Validates every tensor of `source` against the inventory of `config` and returns the views.
// Errors: missing tensors (listed), unexpected tensors (listed), wrong dtype/shape (named with
// the file), NaN scale bytes (0xFF) in FP8/FP4 scales.
Result<ModelWeights> bind_weights(const ModelConfig& config, const TensorSource& source);

}  // namespace deepinfer::loader
