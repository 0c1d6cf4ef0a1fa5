// Private to src/loader: the parameter-spec primitives both inventories (V4: inventory.cc, V4.1:
// inventory_v41.cc) are built from — FP8-block / BF16 / expert linears in the config's storage
// format, plain tensors, norms and mHC parameter triples.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "loader/inventory.h"

namespace deepinfer::loader::detail {

using tensor::DType;
using tensor::WeightFormat;

class InventoryBuilder {
 public:
  explicit InventoryBuilder(const ModelConfig& c) : c_(c) {}
  std::vector<ParamSpec> params;

  // A dense linear that the release stores as FP8 blocks (BF16 without quantization_config).
  void fp8_linear(const std::string& name, int64_t out, int64_t in) {
    ParamSpec p = linear(name, out, in);
    if (c_.quant.fp8) {
      p.format = WeightFormat::kFp8Block;
      p.block_out = c_.quant.block_out;
      p.block_in = c_.quant.block_in;
    }
    params.push_back(p);
  }
  void bf16_linear(const std::string& name, int64_t out, int64_t in) { params.push_back(linear(name, out, in)); }
  void expert_linear(const std::string& name, int64_t out, int64_t in) {
    ParamSpec p = linear(name, out, in);
    if (c_.quant.experts_fp4) {
      p.format = WeightFormat::kFp4Block;
      p.block_out = 1;
      p.block_in = 32;
    } else if (c_.quant.fp8) {
      p.format = WeightFormat::kFp8Block;
      p.block_out = c_.quant.block_out;
      p.block_in = c_.quant.block_in;
    }
    params.push_back(p);
  }
  void plain(const std::string& name, DType dtype, std::vector<int64_t> shape, InitKind init, float stddev) {
    ParamSpec p;
    p.name = name;
    p.dtype = dtype;
    p.shape = std::move(shape);
    p.init = init;
    p.stddev = stddev;
    p.hc_mult = c_.hc_mult;
    params.push_back(p);
  }
  void norm(const std::string& name, int64_t n) { plain(name, DType::kBF16, {n}, InitKind::kNormWeight, 0.1f); }

  void hc(const std::string& prefix, const std::string& which) {
    const int64_t mix = (2 + c_.hc_mult) * c_.hc_mult;
    plain(prefix + "hc_" + which + "_fn", DType::kF32, {mix, c_.hc_mult * c_.hidden_size}, InitKind::kNormal, 0.01f);
    plain(prefix + "hc_" + which + "_base", DType::kF32, {mix}, InitKind::kHcBase, 0.1f);
    plain(prefix + "hc_" + which + "_scale", DType::kF32, {3}, InitKind::kHcScale, 0.1f);
  }
  void hc_head(const std::string& prefix) {
    plain(prefix + "hc_head_fn", DType::kF32, {c_.hc_mult, c_.hc_mult * c_.hidden_size}, InitKind::kNormal, 0.01f);
    plain(prefix + "hc_head_base", DType::kF32, {c_.hc_mult}, InitKind::kNormal, 0.1f);
    plain(prefix + "hc_head_scale", DType::kF32, {1}, InitKind::kHcScale, 0.1f);
  }
 protected:
  ParamSpec linear(const std::string& name, int64_t out, int64_t in) {
    ParamSpec p;
    p.name = name;
    p.is_linear = true;
    p.format = WeightFormat::kBF16;
    p.out = out;
    p.in = in;
    p.stddev = 1.0f / std::sqrt(static_cast<float>(in));
    return p;
  }
  const ModelConfig& c_;
};

}  // namespace deepinfer::loader::detail
