// ModelConfig: the DeepSeek-V4 family configuration parsed from an HF `config.json`
// (model_v4_flash.md §2, model_v41_flash.md §1), validated once with errors that name the key.
// Every dimension is a runtime value: the same code runs the tiny test models and the full ones.
// V4.1 fields are part of the struct from the start so later layers (cross-layer KV reuse,
// Engram, single-pass mHC) fit without reshaping it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace deepinfer::loader {

enum class ModelFamily { kV4, kV41 };
const char* model_family_name(ModelFamily family);

struct RopeScaling {
  bool yarn = false;  // false: plain RoPE even on compressed layers
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

// `quantization_config` (+ top-level `expert_dtype`).
struct QuantConfig {
  bool fp8 = false;             // quant_method == "fp8": dense linears are FP8 E4M3 blocks
  int block_out = 128;          // weight_block_size[0]
  int block_in = 128;           // weight_block_size[1]
  bool ue8m0_scales = true;     // scale_fmt == "ue8m0" (activation scales are powers of two)
  bool experts_fp4 = true;      // expert_dtype == "fp4" (absent in the initial V4 revision: FP4)
};

enum class LayerKind { kSlidingWindow, kCompressed };

// V4.1 `vision_config` (model_v41_flash.md §1, §8). Parsed and validated so the composite config
// and the vision tensors bind; src/vision runs the tower (docs/v41.md, "Vision").
struct VisionConfig {
  int64_t num_hidden_layers = 0;  // 0: no vision tower
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t intermediate_size = 0;
  int64_t patch_size = 0;
  double rope_theta = 10000.0;
  int64_t downsample_ratio = 0;
  int64_t max_image_tokens = 0;
  int64_t min_pixels = 0;
  double max_wh_ratio = 0.0;      // 0: null (no aspect cap)
};

// A V4.1 layer's CSA2 role (model_v41_flash.md §2.1).
enum class Csa2Role : uint8_t {
  kWindowOnly,  // ratio 0: sliding window only
  kFull,        // KV source: owns the compressor and the index keys (+ its own indexer)
  kReindex,     // index source without a compressor: re-scores its group's keys
  kReuse,       // reads its group's compressed KV and the latest top-k
};

struct ModelConfig {
  ModelFamily family = ModelFamily::kV4;
  std::string model_type;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;            // D
  int64_t num_hidden_layers = 0;      // L (main stack)
  int64_t num_attention_heads = 0;    // H
  int64_t head_dim = 0;               // d: K = V latent width
  int64_t qk_rope_head_dim = 0;       // r: RoPE dims at the tail of each head
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;

  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_shared_experts = 0;
  int64_t moe_intermediate_size = 0;
  int64_t num_hash_layers = 0;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;          // 0: no clamp
  bool norm_topk_prob = true;

  int64_t sliding_window = 0;         // W
  std::vector<int> compress_ratios;   // L + n_mtp entries
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  RopeScaling rope_scaling;

  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  int64_t hc_mult = 0;
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;

  int64_t num_nextn_predict_layers = 0;
  int64_t n_mtp_layers = 0;           // draft blocks present: len(compress_ratios) - L
  int64_t max_position_embeddings = 0;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;

  // DSpark (V4-Flash-0731, V4.1): absent -> 0 / empty.
  int64_t dspark_block_size = 0;
  int64_t dspark_markov_rank = 0;
  int64_t dspark_noise_token_id = -1;
  std::vector<int> dspark_target_layer_ids;

  QuantConfig quant;

  // ---- V4.1-Flash (model_v41_flash.md §1); empty / 0 / -1 for V4 ----
  std::vector<int> kv_source_layer_ids;     // layers owning a compressor (CSA2 Full), ascending
  std::vector<int> index_source_layer_ids;  // layers running an indexer (Full or Reindex), ascending
  int64_t candidate_source_layer_id = -1;   // publishes the two-level candidate blocks; -1: off
  int64_t candidate_topk_blocks = 0;        // candidate blocks kept per query
  int64_t candidate_block_size = 0;         // compressed entries per candidate block
  std::vector<int> engram_layer_ids;        // layers with an Engram lookup before the block
  std::vector<int64_t> engram_num_embeddings;  // table rows per Engram layer (= sum of its primes)
  int64_t engram_max_ngram_size = 0;        // n-grams 2..N are hashed
  int64_t engram_vocab_size = 0;            // where the prime search starts
  int64_t engram_n_heads = 0;               // hash heads per n-gram size
  int64_t engram_head_dim = 0;              // table row width
  int64_t engram_pad_token_id = 2;          // token id whose compressed id fills blocked slots
  int64_t engram_compressed_vocab_size = 0; // tokenizer-derived compressed vocabulary (multipliers)
  int64_t dspark_n_routed_experts = 0;      // DSpark stages' own MoE (V4.1)
  int64_t dspark_num_experts_per_tok = 0;
  double gate_temp = 1.0;                   // router temperature (logits / gate_temp)
  int64_t image_token_id = -1;              // top-level image placeholder id (V4.1)
  VisionConfig vision;

  // ---- derived helpers ----
  int ratio(int64_t layer) const { return compress_ratios.at(static_cast<size_t>(layer)); }
  // The overlapped (two-series) compressor and the lightning indexer exist iff the ratio is 4
  // (the official rule; the tiny-short variant keeps it with other window/ratio sizes).
  bool is_overlapped(int64_t layer) const { return ratio(layer) == 4; }
  bool has_indexer(int64_t layer) const { return ratio(layer) == 4; }
  bool is_hash_layer(int64_t layer) const { return layer < num_hash_layers; }
  int64_t n_nope_dims() const { return head_dim - qk_rope_head_dim; }
  int64_t n_heads_per_group() const { return num_attention_heads / o_groups; }
  // Largest compression ratio in the stack (history blocks are multiples of it).
  int max_ratio() const;

  // ---- V4.1 layer roles (valid after validation; see model_v41_flash.md §2.1) ----
  bool is_v41() const { return family == ModelFamily::kV41; }
  Csa2Role csa2_role(int64_t layer) const;
  bool is_kv_source(int64_t layer) const;
  bool is_index_source(int64_t layer) const;
  bool is_engram_layer(int64_t layer) const;
  // The KV source whose compressed cache layer `layer` reads (nearest source at or before it),
  // or -1 for window-only layers.
  int kv_source_of(int64_t layer) const;
  // The index source whose top-k layer `layer` uses (nearest at or before it), or -1.
  int index_source_of(int64_t layer) const;
  // First layer of the CED decoder: the last KV source (its global KV is a projection of the
  // encoder output, model_v41_flash.md §2.1). Layers from here on may run on a kept tail only.
  int decoder_begin_layer() const;
  // Position of `layer` in engram_layer_ids, or -1.
  int engram_index(int64_t layer) const;
};

// Parses an HF config.json object. Errors name the key (e.g. "config.json: 'hidden_size' ...").
Result<ModelConfig> parse_model_config(const nlohmann::json& config, const std::string& label);
// Reads `<dir>/config.json`.
Result<ModelConfig> load_model_config(const std::string& dir);
// Cross-field validation (shapes that must divide, ratios, ranges). Called by parse_model_config.
Status validate_model_config(const ModelConfig& config, const std::string& label);
// The HF config.json text for `config` (inverse of parse_model_config, used by the generator).
// V4.1 configs are written nested (text_config + vision_config).
std::string model_config_to_json(const ModelConfig& config);

// V4.1 (model_config_v41.cc): the nested HF config (text_config + vision_config, HF or reference
// key spellings inside) or a flat reference-style object (inference/config.json names: dim,
// n_layers, kv_source_layers, ...). Fills derived defaults the way the released configs imply
// (compress_ratios padded with 0 for the DSpark stages) and validates.
Result<ModelConfig> parse_model_config_v41(const nlohmann::json& config, const std::string& label);
// Cross-field rules of V4.1 (roles, sources, Engram, DSpark, vision); called by validate_model_config.
Status validate_model_config_v41(const ModelConfig& config, const std::string& label);
// The flat reference-runner `inference/config.json` text of a V4.1 config.
std::string model_config_v41_inference_json(const ModelConfig& config);

}  // namespace deepinfer::loader
