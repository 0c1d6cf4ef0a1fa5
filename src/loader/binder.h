// Private to src/loader: the Binder that validates a TensorSource against a config's inventory
// (missing/extra tensors listed, dtype/shape/scale-grid checks naming the file) and hands out
// views and LinearWeights by official name. Shared by the V4 and V4.1 bindings.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "loader/inventory.h"
#include "loader/weight_binding.h"

namespace deepinfer::loader::detail {

using tensor::DType;
using tensor::WeightFormat;

inline std::string list_names(const std::vector<std::string>& names) {
  constexpr size_t kMaxListed = 12;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMaxListed; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kMaxListed) out += fmt::format(", ... ({} in all)", names.size());
  return out;
}

inline std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", s[i]);
  return out + "]";
}

class Binder {
 public:
  Binder(const ModelConfig& c, const TensorSource& src) : c_(c), src_(src) {}

  Status check() {
    std::set<std::string> expected;
    for (const ParamSpec& p : param_inventory(c_)) {
      params_[p.name] = p;
      for (const FileTensorSpec& f : file_tensors(p)) {
        expected.insert(f.name);
        files_[f.name] = f;
      }
    }
    std::vector<std::string> missing, extra;
    const std::vector<std::string> present = src_.names();
    const std::set<std::string> present_set(present.begin(), present.end());
    for (const std::string& n : expected)
      if (!present_set.count(n)) missing.push_back(n);
    for (const std::string& n : present)
      if (!expected.count(n)) extra.push_back(n);
    if (!missing.empty()) {
      return not_found("checkpoint lacks {} tensor(s) the config requires: {}", missing.size(), list_names(missing));
    }
    if (!extra.empty()) {
      return invalid_argument("checkpoint has {} tensor(s) the config does not use: {}", extra.size(),
                              list_names(extra));
    }
    for (const auto& [name, spec] : files_) DI_RETURN_IF_ERROR(check_tensor(spec));
    return Status::ok();
  }

  TensorView tensor(const std::string& name) const { return *src_.get(name); }

  LinearWeight linear(const std::string& name) const {
    const ParamSpec& p = params_.at(name);
    LinearWeight w;
    w.format = p.format;
    w.out = p.out;
    w.in = p.in;
    w.block_out = p.block_out;
    w.block_in = p.block_in;
    w.weight = *src_.get(name);
    if (p.format == WeightFormat::kFp8Block || p.format == WeightFormat::kFp4Block) w.scale = *src_.get(p.scale_name());
    w.fp4_device_layout = p.format == WeightFormat::kFp4Block && src_.fp4_device_layout();
    return w;
  }

 private:
  Status check_tensor(const FileTensorSpec& spec) const {
    const TensorView v = *src_.get(spec.name);
    const std::string where = src_.where(spec.name);
    const std::string at = where.empty() ? "" : " in " + where;
    const bool is_scale = spec.dtype == DType::kF8E8M0;
    // Flash-Base stores FP8 block scales as F32 instead of UE8M0 (model_v4_flash.md §5.4).
    const bool dtype_ok = v.dtype == spec.dtype || (is_scale && v.dtype == DType::kF32);
    if (!dtype_ok) {
      return invalid_argument("tensor '{}'{} has dtype {}, expected {}", spec.name, at, tensor::dtype_name(v.dtype),
                              tensor::dtype_name(spec.dtype));
    }
    std::vector<int64_t> shape(v.shape.begin(), v.shape.begin() + v.rank);
    if (shape != spec.shape) {
      return invalid_argument("tensor '{}'{} has shape {}, expected {}", spec.name, at, shape_str(shape),
                              shape_str(spec.shape));
    }
    if (is_scale && v.dtype == DType::kF8E8M0 && v.device == tensor::Device::kCpu) {
      const uint8_t* b = v.as<const uint8_t>();
      for (int64_t i = 0; i < v.numel(); ++i) {
        if (b[i] == 0xff) return invalid_argument("tensor '{}'{}: scale byte {} is 0xFF (NaN)", spec.name, at, i);
      }
    }
    return Status::ok();
  }

  const ModelConfig& c_;
  const TensorSource& src_;
  std::map<std::string, ParamSpec> params_;
  std::map<std::string, FileTensorSpec> files_;
};

// The mHC mixing parameters of a sublayer (`which` = "attn" | "ffn") under prefix `p`.
inline HcWeights bind_hc(const Binder& b, const std::string& p, const std::string& which) {
  return {b.tensor(p + "hc_" + which + "_fn"), b.tensor(p + "hc_" + which + "_base"),
          b.tensor(p + "hc_" + which + "_scale")};
}

// One SwiGLU expert (routed or shared) under prefix `p`.
inline ExpertWeights bind_expert(const Binder& b, const std::string& p) {
  return {b.linear(p + "w1.weight"), b.linear(p + "w2.weight"), b.linear(p + "w3.weight")};
}


}  // namespace deepinfer::loader::detail
