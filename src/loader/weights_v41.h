// ModelWeightsV41: every parameter of a DeepSeek-V4.1(-Flash) checkpoint as views, organised the
// way the V4.1 forward uses them (model_v41_flash.md §2-§9). Produced only by bind_weights_v41,
// which validates names, dtypes, shapes and scale grids against param_inventory_v41. The Engram
// tables stay where the source put them (host memory for a mapped checkpoint): the forward
// gathers rows on the host and never needs the tables on the device (§4.3).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loader/weight_binding.h"
#include "loader/weights.h"

namespace deepinfer::loader {

struct CompressorWeightsV41 {
  LinearWeight wkv;    // [d, D] BF16
  LinearWeight wgate;  // [d, D] BF16; empty at ratio 1 (no pooling)
  TensorView norm;     // [d] BF16
};

struct IndexKeyWeights {  // KV sources: index keys from the pre-RoPE latent
  LinearWeight wk;        // [di, d] BF16
  TensorView k_norm;      // [di] BF16
};

struct IndexerWeightsV41 {  // index sources (Full and Reindex)
  LinearWeight wq_b;          // [Hi*di, q_lora_rank] FP8
  LinearWeight weights_proj;  // [Hi, D] BF16
};

struct AttentionWeightsV41 {
  TensorView sink;     // [H] F32
  LinearWeight wq_a;   // [q_lora_rank, D]
  TensorView q_norm;   // [q_lora_rank] BF16
  LinearWeight wq_b;   // [H*d, q_lora_rank] (no per-head q norm in V4.1)
  LinearWeight wkv;    // [d, D]
  TensorView kv_norm;  // [d] BF16
  LinearWeight wo_a;   // [G*R, H*d/G]
  LinearWeight wo_b;   // [D, G*R]
  std::optional<CompressorWeightsV41> compressor;  // KV sources
  std::optional<IndexKeyWeights> index_keys;       // KV sources
  std::optional<IndexerWeightsV41> indexer;        // index sources
};

struct MoeWeightsV41 {
  LinearWeight gate;  // router [E, D] BF16
  TensorView bias;    // [E] F32: selection bias of text tokens
  TensorView bias_vl; // [E] F32: selection bias inside image spans
  std::vector<ExpertWeights> experts;
  std::optional<ExpertWeights> shared;
};

struct EngramWeights {
  LinearWeight table;    // [rows, engram_head_dim] FP8 E4M3, UE8M0 per 32 of a row (host-resident)
  LinearWeight wkv;      // [D*(hc+1), n_cols*engram_head_dim] FP8
  TensorView q_weight;   // [hc, D] F32 (used only as q_weight * k_weight)
  TensorView k_weight;   // [hc, D] F32
};

struct BlockWeightsV41 {
  int64_t layer = -1;  // backbone layer id, or -1 for a DSpark stage
  HcWeights hc_attn, hc_ffn;
  TensorView attn_norm;  // [D] BF16
  TensorView ffn_norm;   // [D] BF16
  AttentionWeightsV41 attn;
  MoeWeightsV41 ffn;
  std::optional<EngramWeights> engram;
};

struct DsparkStageWeights {
  BlockWeightsV41 block;
  LinearWeight main_proj;        // stage 0: [D, n_targets*D] FP8
  TensorView main_norm;          // stage 0: [D]
  TensorView norm;               // last stage: [D]
  TensorView markov_embed;       // last stage: [vocab, rank] BF16 (row lookup)
  LinearWeight markov_head;      // last stage: [vocab, rank] BF16
  LinearWeight confidence_proj;  // last stage: [1, D + rank] BF16
};

struct VisionBlockWeights {
  TensorView norm1, norm2;            // [Vd]
  LinearWeight wqkv;                  // [3*Vd, Vd]
  TensorView wqkv_bias;               // [3*Vd]
  LinearWeight wo;                    // [Vd, Vd]
  TensorView wo_bias;                 // [Vd]
  LinearWeight w1;                    // [2*I, Vd] fused gate | up
  LinearWeight w2;                    // [Vd, I]
};

// Read by vision::VisionEncoder (src/vision); the text forward does not read it.
struct VisionWeights {
  LinearWeight patch_embed;           // [Vd, 3*patch*patch]
  TensorView patch_embed_bias;        // [Vd]
  std::vector<VisionBlockWeights> blocks;
  TensorView norm;                    // [Vd]
  LinearWeight aligner_w1;            // [D, Vd*ds*ds]
  TensorView aligner_b1;              // [D]
  LinearWeight aligner_w2;            // [D, D]
  TensorView aligner_b2;              // [D]
  TensorView image_start, image_end, image_newline;  // [D] BF16
};

struct ModelWeightsV41 {
  TensorView embed;   // [vocab, D] BF16
  LinearWeight head;  // [vocab, D] BF16
  TensorView norm;    // [D] BF16
  std::vector<BlockWeightsV41> layers;
  std::vector<DsparkStageWeights> dspark;
  std::optional<VisionWeights> vision;
};

// Validates every tensor of `source` against param_inventory_v41(config) and returns the views.
Result<ModelWeightsV41> bind_weights_v41(const ModelConfig& config, const TensorSource& source);

// Whether a checkpoint tensor is an Engram table (layers.N.engram.embed.{weight, scale}): read row
// by row on the host (ModelV41::engram), so a device backend leaves it in host memory (§4).
inline bool is_engram_table(const std::string& name) { return name.find(".engram.embed.") != std::string::npos; }
// Whether a checkpoint tensor belongs to the vision stage (vision tower, aligner, the span
// delimiters): its encoder runs on the host (engine/vision_image_encoder.h), so a device backend
// leaves these in host memory too.
inline bool is_vision_tensor(const std::string& name) {
  return name.starts_with("vision.") || name.starts_with("aligner.") || name == "image_start" ||
         name == "image_end" || name == "image_newline";
}

}  // namespace deepinfer::loader
