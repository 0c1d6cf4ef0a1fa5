// read_dequantized (include/deepinfer/model.h): one checkpoint tensor as exact F32 values.
#include <algorithm>

#include "deepinfer/model.h"
#include "loader/checkpoint.h"
#include "loader/inventory.h"
#include "loader/weight_binding.h"
#include "tensor/number_formats.h"

namespace deepinfer {

Result<DequantizedTensor> read_dequantized(const std::string& model_dir, const std::string& name, int64_t max_rows) {
  DI_ASSIGN_OR_RETURN(const loader::ModelConfig config, loader::load_model_config(model_dir));
  DI_ASSIGN_OR_RETURN(const loader::Checkpoint ckpt, loader::Checkpoint::open(model_dir));
  const loader::CheckpointSource source(ckpt);
  for (const loader::ParamSpec& p : loader::param_inventory(config)) {
    if (p.name != name) continue;
    DequantizedTensor out;
    if (p.is_linear) {
      tensor::LinearWeight w;
      w.format = p.format;
      w.out = p.out;
      w.in = p.in;
      w.block_out = p.block_out;
      w.block_in = p.block_in;
      auto weight = source.get(p.name);
      if (!weight) return not_found("{}: tensor '{}' is missing", model_dir, p.name);
      w.weight = *weight;
      if (w.is_quantized()) {
        auto scale = source.get(p.scale_name());
        if (!scale) return not_found("{}: tensor '{}' is missing", model_dir, p.scale_name());
        w.scale = *scale;
      }
      const int64_t rows = max_rows > 0 ? std::min(max_rows, p.out) : p.out;
      out.shape = {rows, p.in};
      out.values.resize(static_cast<size_t>(rows * p.in));
      for (int64_t r = 0; r < rows; ++r) w.dequantize_row(r, &out.values[r * p.in]);
      return out;
    }
    auto v = source.get(p.name);
    if (!v) return not_found("{}: tensor '{}' is missing", model_dir, p.name);
    out.shape.assign(v->shape.begin(), v->shape.begin() + v->rank);
    int64_t n = v->numel();
    if (max_rows > 0 && v->rank > 0 && max_rows < v->shape[0]) {
      n = n / v->shape[0] * max_rows;
      out.shape[0] = max_rows;
    }
    out.values.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      switch (v->dtype) {
        case tensor::DType::kF32: out.values[i] = v->as<const float>()[i]; break;
        case tensor::DType::kBF16: out.values[i] = tensor::bf16_to_f32(v->as<const uint16_t>()[i]); break;
        case tensor::DType::kI64: out.values[i] = static_cast<float>(v->as<const int64_t>()[i]); break;
        default: return unimplemented("read_dequantized: dtype {} of '{}'", tensor::dtype_name(v->dtype), name);
      }
    }
    return out;
  }
  return not_found("'{}' is not a parameter of the model in {}", name, model_dir);
}

}  // namespace deepinfer
