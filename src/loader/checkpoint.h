// A checkpoint directory: `model.safetensors.index.json` + shards (the HF release layout), or a
// single `model.safetensors`. Shards are memory-mapped; tensors are found by their official name.
// Consistency between the index and the shards is checked on open (errors name both files).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/safetensors.h"

namespace deepinfer::loader {

struct TensorRef {
  const TensorInfo* info = nullptr;
  const SafetensorsFile* file = nullptr;
  const uint8_t* data = nullptr;  // points into the shard's mapping
};

class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::optional<TensorRef> find(std::string_view name) const;
  // Every tensor name in the checkpoint, sorted.
  std::vector<std::string> tensor_names() const;
  size_t n_shards() const { return shards_.size(); }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, TensorRef, std::less<>> tensors_;
};

}  // namespace deepinfer::loader
