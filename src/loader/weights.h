// ModelWeights: every parameter of a DeepSeek-V4 model as views (into a mapped checkpoint, or into
// device memory after upload), organised the way the forward pass uses them. Produced only by
// bind_weights (weight_binding.h), which validates names, dtypes and shapes against the inventory.
#pragma once

#include <optional>
#include <vector>

#include "tensor/linear_weight.h"
#include "tensor/tensor.h"
#include "tensor/weight_bundles.h"

namespace deepinfer::loader {

using tensor::CompressorWeights;
using tensor::ExpertWeights;
using tensor::HcHeadWeights;
using tensor::HcWeights;
using tensor::LinearWeight;
using tensor::TensorView;

struct IndexerWeights {
  LinearWeight wq_b;          // [Hi*di, q_lora_rank] FP8
  LinearWeight weights_proj;  // [Hi, D] BF16
  CompressorWeights compressor;
};

struct AttentionWeights {
  TensorView sink;            // [H] F32
  LinearWeight wq_a;          // [q_lora_rank, D]
  TensorView q_norm;          // [q_lora_rank] BF16
  LinearWeight wq_b;          // [H*d, q_lora_rank]
  LinearWeight wkv;           // [d, D]
  TensorView kv_norm;         // [d] BF16
  LinearWeight wo_a;          // [G*R, H*d/G] (group g uses rows g*R..g*R+R-1)
  LinearWeight wo_b;          // [D, G*R]
  std::optional<CompressorWeights> compressor;  // ratio > 0
  std::optional<IndexerWeights> indexer;        // ratio == 4
};

struct MoeWeights {
  LinearWeight gate;         // router [E, D] BF16
  TensorView bias;           // [E] F32 (biased top-k layers), empty on hash layers
  TensorView tid2eid;        // [vocab, k] I64 (hash layers), empty otherwise
  std::vector<ExpertWeights> experts;
  std::optional<ExpertWeights> shared;
};

struct BlockWeights {
  int ratio = 0;
  HcWeights hc_attn, hc_ffn;
  TensorView attn_norm;  // [D] BF16
  TensorView ffn_norm;   // [D] BF16
  AttentionWeights attn;
  MoeWeights ffn;
};

// V3-style MTP block (mtp.j with e_proj/h_proj) or a DSpark draft stage.
struct MtpWeights {
  BlockWeights block;
  LinearWeight e_proj, h_proj;  // [D, D] (MTP only)
  TensorView enorm, hnorm;      // [D] (MTP only)
  TensorView norm;              // [D] (MTP, or the last DSpark stage)
  std::optional<HcHeadWeights> hc_head;
  // DSpark extras:
  LinearWeight main_proj;       // [D, n_targets*D] (stage 0)
  TensorView main_norm;         // [D] (stage 0)
  TensorView markov_w1;         // [vocab, rank] (last stage)
  TensorView markov_w2;         // [vocab, rank] (last stage)
  TensorView confidence_proj;   // [1, D + rank] (last stage)
};

struct ModelWeights {
  TensorView embed;       // [vocab, D] BF16
  LinearWeight head;      // [vocab, D] BF16
  TensorView norm;        // [D] BF16
  HcHeadWeights hc_head;
  std::vector<BlockWeights> layers;
  std::vector<MtpWeights> mtp;
};

}  // namespace deepinfer::loader
