// The tensor inventory of a DeepSeek-V4 checkpoint derived from its config (model_v4_flash.md §5.3,
// §9.2 for DSpark stages): every parameter with its official name, storage format, shape and the
// synthetic initialisation the generator uses. The binder validates checkpoints against it and the
// generator writes it, so the two can never disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loader/model_config.h"
#include "tensor/dtype.h"
#include "tensor/linear_weight.h"

namespace deepinfer::loader {

// How the synthetic generator fills a parameter (model_v4_flash.md §5.8 step 3).
enum class InitKind : uint8_t {
  kNormal,      // N(0, stddev)
  kNormWeight,  // 1 + N(0, stddev): RMSNorm gains (not exactly 1, so a dropped gain is detectable)
  kHcBase,      // N(0, stddev) plus +2 on the comb diagonal (identity-favouring mixing)
  kHcScale,     // 1 + N(0, stddev)
  kTid2eid,     // k distinct experts per token id
};

struct ParamSpec {
  std::string name;  // main tensor name; a quantized linear's scale is `<name without .weight>.scale`
  bool is_linear = false;
  // Linear parameters:
  tensor::WeightFormat format = tensor::WeightFormat::kBF16;
  int64_t out = 0, in = 0;
  int block_out = 1, block_in = 1;
  // Plain tensors:
  tensor::DType dtype = tensor::DType::kF32;
  std::vector<int64_t> shape;
  InitKind init = InitKind::kNormal;
  float stddev = 0.0f;
  int64_t hc_mult = 0;    // kHcBase: where the comb diagonal lies
  int64_t n_experts = 0;  // kTid2eid: experts to choose from

  std::string scale_name() const;
};

struct FileTensorSpec {
  std::string name;
  tensor::DType dtype;
  std::vector<int64_t> shape;
};

// Every parameter of the model described by `config`, in a stable order (globals, layers, mtp).
// V4.1 configs dispatch to param_inventory_v41.
std::vector<ParamSpec> param_inventory(const ModelConfig& config);
// The V4.1-Flash inventory (model_v41_flash.md §9): 32x32-block FP8 dense weights, CSA2 roles
// (compressor/indexer keys only at KV sources), bias_vl, Engram tables, DSpark stages with Markov
// and confidence heads, the vision tower, aligner and image delimiter embeddings.
std::vector<ParamSpec> param_inventory_v41(const ModelConfig& config);
// The file tensors (1 for plain tensors and BF16 linears, 2 for quantized linears) of a parameter.
std::vector<FileTensorSpec> file_tensors(const ParamSpec& param);

// Name prefix of main layer `i` ("layers.i.") and of draft/MTP block `j` ("mtp.j.").
std::string layer_prefix(int64_t layer);
std::string mtp_prefix(int64_t block);

}  // namespace deepinfer::loader
