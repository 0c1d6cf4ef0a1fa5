// V4.1 cross-field validation (model_v41_flash.md §1 "derived invariants", §2.3 Engram placement,
// §13 quantization multiples), the CSA2 role helpers of ModelConfig, and the two writers: the
// nested HF config.json and the flat reference inference/config.json.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "loader/config_reader.h"
#include "loader/engram_layout.h"
#include "loader/model_config.h"

namespace deepinfer::loader {
namespace {

bool contains(const std::vector<int>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Nearest element of the ascending list `v` at or before `layer`, or -1.
int nearest_at_or_before(const std::vector<int>& v, int64_t layer) {
  int best = -1;
  for (int x : v)
    if (x <= layer) best = x;
  return best;
}

Status check_layer_list(const std::vector<int>& v, const char* key, int64_t n_layers, const std::string& label) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= n_layers) return invalid_argument("{}: '{}' entry {} is not a layer of [0, {})", label, key, v[i], n_layers);
    if (i > 0 && v[i] <= v[i - 1]) return invalid_argument("{}: '{}' must be strictly ascending", label, key);
  }
  return Status::ok();
}

Status validate_sources(const ModelConfig& c, const std::string& label) {
  const int64_t L = c.num_hidden_layers;
  DI_RETURN_IF_ERROR(check_layer_list(c.kv_source_layer_ids, "kv_source_layer_ids", L, label));
  DI_RETURN_IF_ERROR(check_layer_list(c.index_source_layer_ids, "index_source_layer_ids", L, label));
  for (int s : c.kv_source_layer_ids) {
    if (c.ratio(s) == 0) return invalid_argument("{}: KV source layer {} has compress ratio 0", label, s);
  }
  for (int64_t l = 0; l < L; ++l) {
    if (c.ratio(l) == 0) continue;
    const int src = c.kv_source_of(l);
    if (src < 0) return invalid_argument("{}: layer {} has compress ratio {} but no KV source at or before it", label, l, c.ratio(l));
    for (int64_t k = src; k <= l; ++k) {
      if (c.ratio(k) != c.ratio(l)) {
        return invalid_argument("{}: layer {} (ratio {}) reads KV source {} across layer {} of ratio {} "
                                "(a source serves only its own ratio run)", label, l, c.ratio(l), src, k, c.ratio(k));
      }
    }
    const int idx = c.index_source_of(l);
    if (idx < src) {
      return invalid_argument("{}: layer {} has no index source in its KV group (source {}); its top-k would "
                              "index another group's entries", label, l, src);
    }
  }
  for (int s : c.index_source_layer_ids) {
    if (c.ratio(s) == 0) return invalid_argument("{}: index source layer {} has compress ratio 0", label, s);
  }
  if (c.candidate_source_layer_id >= 0) {
    if (!contains(c.index_source_layer_ids, c.candidate_source_layer_id)) {
      return invalid_argument("{}: 'candidate_source_layer_id' {} is not an index source", label, c.candidate_source_layer_id);
    }
    if (c.candidate_topk_blocks <= 0 || c.candidate_block_size <= 0) {
      return invalid_argument("{}: 'candidate_topk_blocks' and 'candidate_block_size' must be positive", label);
    }
    const int group = c.kv_source_of(c.candidate_source_layer_id);
    for (int s : c.index_source_layer_ids) {
      if (s > c.candidate_source_layer_id && c.kv_source_of(s) != group) {
        return invalid_argument("{}: index source {} follows the candidate source {} but reads another KV group; "
                                "the candidate mask would not apply", label, s, c.candidate_source_layer_id);
      }
    }
  }
  return Status::ok();
}

Status validate_engram(const ModelConfig& c, const std::string& label) {
  if (c.engram_layer_ids.empty()) return Status::ok();
  DI_RETURN_IF_ERROR(check_layer_list(c.engram_layer_ids, "engram_layer_ids", c.num_hidden_layers, label));
  if (c.engram_num_embeddings.size() != c.engram_layer_ids.size()) {
    return invalid_argument("{}: 'engram_num_embeddings' has {} entries for {} Engram layers", label,
                            c.engram_num_embeddings.size(), c.engram_layer_ids.size());
  }
  if (c.engram_head_dim <= 0 || c.engram_head_dim % 32 != 0) {
    return invalid_argument("{}: 'engram_head_dim' ({}) must be a positive multiple of 32 (one scale per 32)", label,
                            c.engram_head_dim);
  }
  if (c.engram_pad_token_id < 0 || c.engram_pad_token_id >= c.vocab_size) {
    return invalid_argument("{}: 'engram_pad_token_id' {} is not a token id", label, c.engram_pad_token_id);
  }
  if (c.engram_compressed_vocab_size > c.vocab_size) {
    return invalid_argument("{}: 'engram_compressed_vocab_size' {} exceeds vocab_size {}", label,
                            c.engram_compressed_vocab_size, c.vocab_size);
  }
  // Engram rows depend on the whole n-gram history; a decoder-side Engram would break the CED
  // prefill truncation (model_v41_flash.md §2.3).
  for (int l : c.engram_layer_ids) {
    if (l > c.decoder_begin_layer()) {
      return invalid_argument("{}: Engram layer {} sits after the last KV source {} (the CED decoder)", label, l,
                              c.decoder_begin_layer());
    }
  }
  auto layout = make_engram_layout(c);
  if (!layout.is_ok()) return invalid_argument("{}: {}", label, layout.status().message());
  return Status::ok();
}

Status validate_dspark_vision(const ModelConfig& c, const std::string& label) {
  if (c.num_nextn_predict_layers > 0) {
    if (c.dspark_block_size <= 0 || c.dspark_markov_rank <= 0) {
      return invalid_argument("{}: DSpark stages need positive 'dspark_block_size' and 'dspark_markov_rank'", label);
    }
    if (c.dspark_n_routed_experts <= 0 || c.dspark_num_experts_per_tok <= 0 ||
        c.dspark_num_experts_per_tok > c.dspark_n_routed_experts) {
      return invalid_argument("{}: 'dspark_num_experts_per_tok' ({}) must be in [1, dspark_n_routed_experts = {}]",
                              label, c.dspark_num_experts_per_tok, c.dspark_n_routed_experts);
    }
    if (c.dspark_target_layer_ids.empty()) return invalid_argument("{}: 'dspark_target_layer_ids' is empty", label);
    if (c.dspark_noise_token_id < 0 || c.dspark_noise_token_id >= c.vocab_size) {
      return invalid_argument("{}: 'dspark_noise_token_id' {} is not a token id", label, c.dspark_noise_token_id);
    }
  }
  const VisionConfig& v = c.vision;
  if (v.num_hidden_layers < 0) return invalid_argument("{}: vision num_hidden_layers is negative", label);
  if (v.num_hidden_layers > 0) {
    if (v.hidden_size <= 0 || v.num_attention_heads <= 0 || v.hidden_size % v.num_attention_heads != 0 ||
        v.intermediate_size <= 0 || v.patch_size <= 0 || v.downsample_ratio <= 0) {
      return invalid_argument("{}: vision_config needs positive hidden_size (a multiple of num_attention_heads), "
                              "intermediate_size, patch_size and downsample_ratio", label);
    }
  }
  if (c.image_token_id >= c.vocab_size) return invalid_argument("{}: 'image_token_id' {} is not a token id", label, c.image_token_id);
  return Status::ok();
}

}  // namespace

Status validate_model_config_v41(const ModelConfig& c, const std::string& label) {
  if (c.gate_temp != 1.0) return unimplemented("{}: 'gate_temp' {} is not supported (1.0)", label, c.gate_temp);
  if (c.num_hash_layers != 0) return invalid_argument("{}: V4.1 has no hash-routed layers ('num_hash_layers' {})", label, c.num_hash_layers);
  if (c.n_mtp_layers != c.num_nextn_predict_layers) {
    return invalid_argument("{}: 'compress_ratios' has {} entries, expected num_hidden_layers + num_nextn_predict_layers = {}",
                            label, c.compress_ratios.size(), c.num_hidden_layers + c.num_nextn_predict_layers);
  }
  // §13: FP8 window KV is scaled per 32 channels, FP4 main KV per 16, index keys per 32.
  if (c.head_dim % 32 != 0 || c.index_head_dim % 32 != 0) {
    return invalid_argument("{}: V4.1 KV quantizers need 'head_dim' ({}) and 'index_head_dim' ({}) divisible by 32",
                            label, c.head_dim, c.index_head_dim);
  }
  DI_RETURN_IF_ERROR(validate_sources(c, label));
  DI_RETURN_IF_ERROR(validate_engram(c, label));
  return validate_dspark_vision(c, label);
}

// ---- roles ----

Csa2Role ModelConfig::csa2_role(int64_t layer) const {
  if (ratio(layer) == 0) return Csa2Role::kWindowOnly;
  if (is_kv_source(layer)) return Csa2Role::kFull;
  if (is_index_source(layer)) return Csa2Role::kReindex;
  return Csa2Role::kReuse;
}
bool ModelConfig::is_kv_source(int64_t layer) const { return contains(kv_source_layer_ids, layer); }
bool ModelConfig::is_index_source(int64_t layer) const { return contains(index_source_layer_ids, layer); }
bool ModelConfig::is_engram_layer(int64_t layer) const { return contains(engram_layer_ids, layer); }
int ModelConfig::kv_source_of(int64_t layer) const {
  return ratio(layer) == 0 ? -1 : nearest_at_or_before(kv_source_layer_ids, layer);
}
int ModelConfig::index_source_of(int64_t layer) const {
  return ratio(layer) == 0 ? -1 : nearest_at_or_before(index_source_layer_ids, layer);
}
int ModelConfig::decoder_begin_layer() const {
  return kv_source_layer_ids.empty() ? static_cast<int>(num_hidden_layers) : kv_source_layer_ids.back();
}
int ModelConfig::engram_index(int64_t layer) const {
  auto it = std::find(engram_layer_ids.begin(), engram_layer_ids.end(), layer);
  return it == engram_layer_ids.end() ? -1 : static_cast<int>(it - engram_layer_ids.begin());
}

// ---- writers ----

namespace detail {

std::string model_config_v41_to_json(const ModelConfig& c) {
  nlohmann::ordered_json t;
  t["model_type"] = "deepseek_v41_text";
  t["vocab_size"] = c.vocab_size;
  t["hidden_size"] = c.hidden_size;
  t["moe_intermediate_size"] = c.moe_intermediate_size;
  t["num_hidden_layers"] = c.num_hidden_layers;
  t["num_attention_heads"] = c.num_attention_heads;
  t["num_key_value_heads"] = 1;
  t["head_dim"] = c.head_dim;
  t["qk_rope_head_dim"] = c.qk_rope_head_dim;
  t["q_lora_rank"] = c.q_lora_rank;
  t["o_lora_rank"] = c.o_lora_rank;
  t["o_groups"] = c.o_groups;
  t["hidden_act"] = "silu";
  t["swiglu_limit"] = c.swiglu_limit;
  t["rms_norm_eps"] = c.rms_norm_eps;
  t["tie_word_embeddings"] = false;
  t["max_position_embeddings"] = c.max_position_embeddings;
  t["rope_theta"] = c.rope_theta;
  t["compress_rope_theta"] = c.compress_rope_theta;
  if (c.rope_scaling.yarn) {
    t["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", c.rope_scaling.factor},
                         {"beta_fast", c.rope_scaling.beta_fast}, {"beta_slow", c.rope_scaling.beta_slow},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  }
  t["n_routed_experts"] = c.n_routed_experts;
  t["n_shared_experts"] = c.n_shared_experts;
  t["num_experts_per_tok"] = c.num_experts_per_tok;
  t["scoring_func"] = "sqrtsoftplus";
  t["topk_method"] = "noaux_tc";
  t["norm_topk_prob"] = c.norm_topk_prob;
  t["routed_scaling_factor"] = c.routed_scaling_factor;
  t["sliding_window"] = c.sliding_window;
  t["compress_ratios"] = c.compress_ratios;
  t["kv_source_layer_ids"] = c.kv_source_layer_ids;
  t["index_source_layer_ids"] = c.index_source_layer_ids;
  t["index_n_heads"] = c.index_n_heads;
  t["index_head_dim"] = c.index_head_dim;
  t["index_topk"] = c.index_topk;
  t["candidate_source_layer_id"] = c.candidate_source_layer_id;
  t["candidate_topk_blocks"] = c.candidate_topk_blocks;
  t["candidate_block_size"] = c.candidate_block_size;
  t["hc_mult"] = c.hc_mult;
  t["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  t["hc_eps"] = c.hc_eps;
  t["engram_layer_ids"] = c.engram_layer_ids;
  t["engram_num_embeddings"] = c.engram_num_embeddings;
  t["engram_max_ngram_size"] = c.engram_max_ngram_size;
  t["engram_vocab_size"] = c.engram_vocab_size;
  t["engram_n_heads"] = c.engram_n_heads;
  t["engram_head_dim"] = c.engram_head_dim;
  t["engram_pad_token_id"] = c.engram_pad_token_id;
  t["engram_compressed_vocab_size"] = c.engram_compressed_vocab_size;
  t["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  t["dspark_block_size"] = c.dspark_block_size;
  t["dspark_noise_token_id"] = c.dspark_noise_token_id;
  t["dspark_target_layer_ids"] = c.dspark_target_layer_ids;
  t["dspark_markov_rank"] = c.dspark_markov_rank;
  t["dspark_n_routed_experts"] = c.dspark_n_routed_experts;
  t["dspark_num_experts_per_tok"] = c.dspark_num_experts_per_tok;
  t["bos_token_id"] = c.bos_token_id;
  t["eos_token_id"] = c.eos_token_id;
  nlohmann::ordered_json j;
  j["architectures"] = {"DeepseekV41ForCausalLM"};
  j["model_type"] = "deepseek_v41";
  j["image_token_id"] = c.image_token_id;
  j["torch_dtype"] = "bfloat16";
  if (c.quant.fp8) {
    j["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"},
                                {"weight_block_size", {c.quant.block_out, c.quant.block_in}},
                                {"scale_fmt", c.quant.ue8m0_scales ? "ue8m0" : "float"},
                                {"expert_dtype", c.quant.experts_fp4 ? "fp4" : "fp8"}};
  }
  j["text_config"] = t;
  if (c.vision.num_hidden_layers > 0) {
    const VisionConfig& v = c.vision;
    j["vision_config"] = {{"model_type", "deepseek_v41_vision"}, {"num_hidden_layers", v.num_hidden_layers},
                          {"hidden_size", v.hidden_size}, {"num_attention_heads", v.num_attention_heads},
                          {"intermediate_size", v.intermediate_size}, {"patch_size", v.patch_size},
                          {"rope_theta", v.rope_theta}, {"downsample_ratio", v.downsample_ratio},
                          {"max_image_tokens", v.max_image_tokens}, {"min_pixels", v.min_pixels},
                          {"max_wh_ratio", v.max_wh_ratio > 0 ? nlohmann::ordered_json(v.max_wh_ratio) : nullptr}};
  }
  return j.dump(2);
}

}  // namespace detail

std::string model_config_v41_inference_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["vocab_size"] = c.vocab_size;
  j["dim"] = c.hidden_size;
  j["moe_inter_dim"] = c.moe_intermediate_size;
  j["n_layers"] = c.num_hidden_layers;
  j["n_mtp_layers"] = c.num_nextn_predict_layers;
  j["n_heads"] = c.num_attention_heads;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["n_activated_experts"] = c.num_experts_per_tok;
  j["score_func"] = "sqrtsoftplus";
  j["route_scale"] = c.routed_scaling_factor;
  j["swiglu_limit"] = c.swiglu_limit;
  j["q_lora_rank"] = c.q_lora_rank;
  j["head_dim"] = c.head_dim;
  j["rope_head_dim"] = c.qk_rope_head_dim;
  j["norm_eps"] = c.rms_norm_eps;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["window_size"] = c.sliding_window;
  j["max_seq_len"] = c.max_position_embeddings;
  if (c.rope_scaling.yarn) {
    j["original_seq_len"] = c.rope_scaling.original_max_position_embeddings;
    j["rope_factor"] = c.rope_scaling.factor;
    j["beta_fast"] = c.rope_scaling.beta_fast;
    j["beta_slow"] = c.rope_scaling.beta_slow;
  }
  j["rope_theta"] = c.rope_theta;
  j["compress_rope_theta"] = c.compress_rope_theta;
  j["compress_ratios"] = c.compress_ratios;
  j["kv_source_layers"] = c.kv_source_layer_ids;
  j["index_source_layers"] = c.index_source_layer_ids;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["candidate_source_layer"] = c.candidate_source_layer_id;
  j["candidate_topk_blocks"] = c.candidate_topk_blocks;
  j["candidate_block_size"] = c.candidate_block_size;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["engram_layer_ids"] = c.engram_layer_ids;
  j["engram_num_embeddings"] = c.engram_num_embeddings;
  j["engram_max_ngram_size"] = c.engram_max_ngram_size;
  j["engram_vocab_size"] = c.engram_vocab_size;
  j["engram_n_heads"] = c.engram_n_heads;
  j["engram_head_dim"] = c.engram_head_dim;
  j["engram_pad_id"] = c.engram_pad_token_id;
  j["engram_compressed_vocab_size"] = c.engram_compressed_vocab_size;
  j["dspark_block_size"] = c.dspark_block_size;
  j["dspark_noise_token_id"] = c.dspark_noise_token_id;
  j["dspark_target_layer_ids"] = c.dspark_target_layer_ids;
  j["dspark_markov_rank"] = c.dspark_markov_rank;
  j["dspark_n_routed_experts"] = c.dspark_n_routed_experts;
  j["dspark_n_activated_experts"] = c.dspark_num_experts_per_tok;
  j["dtype"] = c.quant.fp8 ? "fp8" : "bf16";
  j["scale_fmt"] = c.quant.ue8m0_scales ? "ue8m0" : "float";
  j["expert_dtype"] = c.quant.experts_fp4 ? "fp4" : "fp8";
  if (c.vision.num_hidden_layers > 0) {
    const VisionConfig& v = c.vision;
    j["vision_n_layers"] = v.num_hidden_layers;
    j["vision_dim"] = v.hidden_size;
    j["vision_n_heads"] = v.num_attention_heads;
    j["vision_inter_dim"] = v.intermediate_size;
    j["vision_patch_size"] = v.patch_size;
    j["vision_downsample_ratio"] = v.downsample_ratio;
    j["vision_max_n_token"] = v.max_image_tokens;
    j["vision_min_pixels"] = v.min_pixels;
    j["vision_max_wh_ratio"] = v.max_wh_ratio > 0 ? nlohmann::ordered_json(v.max_wh_ratio) : nullptr;
    j["vision_rope_theta"] = v.rope_theta;
  }
  return j.dump(2);
}

}  // namespace deepinfer::loader
