// Cross-field validation of ModelConfig and its inverse serialisation to HF config.json.
#include <nlohmann/json.hpp>

#include "loader/config_reader.h"
#include "loader/model_config.h"

namespace deepinfer::loader {

Status validate_model_config(const ModelConfig& c, const std::string& label) {
  auto positive = [&](const char* key, int64_t v) -> Status {
    if (v <= 0) return invalid_argument("{}: '{}' must be positive, got {}", label, key, v);
    return Status::ok();
  };
  DI_RETURN_IF_ERROR(positive("vocab_size", c.vocab_size));
  DI_RETURN_IF_ERROR(positive("hidden_size", c.hidden_size));
  DI_RETURN_IF_ERROR(positive("num_hidden_layers", c.num_hidden_layers));
  DI_RETURN_IF_ERROR(positive("num_attention_heads", c.num_attention_heads));
  DI_RETURN_IF_ERROR(positive("head_dim", c.head_dim));
  DI_RETURN_IF_ERROR(positive("qk_rope_head_dim", c.qk_rope_head_dim));
  DI_RETURN_IF_ERROR(positive("q_lora_rank", c.q_lora_rank));
  DI_RETURN_IF_ERROR(positive("o_groups", c.o_groups));
  DI_RETURN_IF_ERROR(positive("o_lora_rank", c.o_lora_rank));
  DI_RETURN_IF_ERROR(positive("n_routed_experts", c.n_routed_experts));
  DI_RETURN_IF_ERROR(positive("num_experts_per_tok", c.num_experts_per_tok));
  DI_RETURN_IF_ERROR(positive("moe_intermediate_size", c.moe_intermediate_size));
  DI_RETURN_IF_ERROR(positive("sliding_window", c.sliding_window));
  DI_RETURN_IF_ERROR(positive("index_n_heads", c.index_n_heads));
  DI_RETURN_IF_ERROR(positive("index_head_dim", c.index_head_dim));
  DI_RETURN_IF_ERROR(positive("index_topk", c.index_topk));
  DI_RETURN_IF_ERROR(positive("hc_mult", c.hc_mult));
  DI_RETURN_IF_ERROR(positive("hc_sinkhorn_iters", c.hc_sinkhorn_iters));
  DI_RETURN_IF_ERROR(positive("max_position_embeddings", c.max_position_embeddings));
  if (c.qk_rope_head_dim % 2 != 0 || c.qk_rope_head_dim > c.head_dim) {
    return invalid_argument("{}: 'qk_rope_head_dim' ({}) must be even and at most 'head_dim' ({})", label,
                            c.qk_rope_head_dim, c.head_dim);
  }
  if (c.qk_rope_head_dim > c.index_head_dim) {
    return invalid_argument("{}: 'index_head_dim' ({}) must hold the {} RoPE dims", label, c.index_head_dim,
                            c.qk_rope_head_dim);
  }
  if (c.family == ModelFamily::kV4 && (c.index_head_dim & (c.index_head_dim - 1)) != 0) {
    return invalid_argument("{}: 'index_head_dim' ({}) must be a power of two (Hadamard transform)", label,
                            c.index_head_dim);
  }
  if (c.num_attention_heads % c.o_groups != 0) {
    return invalid_argument("{}: 'num_attention_heads' ({}) must be divisible by 'o_groups' ({})", label,
                            c.num_attention_heads, c.o_groups);
  }
  if (c.num_experts_per_tok > c.n_routed_experts) {
    return invalid_argument("{}: 'num_experts_per_tok' ({}) exceeds 'n_routed_experts' ({})", label,
                            c.num_experts_per_tok, c.n_routed_experts);
  }
  if (c.n_shared_experts < 0 || c.n_shared_experts > 1) {
    return unimplemented("{}: 'n_shared_experts' must be 0 or 1, got {}", label, c.n_shared_experts);
  }
  if (c.num_hash_layers < 0 || c.num_hash_layers > c.num_hidden_layers) {
    return invalid_argument("{}: 'num_hash_layers' ({}) must be within [0, num_hidden_layers]", label,
                            c.num_hash_layers);
  }
  if (c.n_mtp_layers < 0) {
    return invalid_argument("{}: 'compress_ratios' has {} entries, fewer than num_hidden_layers ({})", label,
                            c.compress_ratios.size(), c.num_hidden_layers);
  }
  if (c.n_mtp_layers < c.num_nextn_predict_layers) {
    return invalid_argument(
        "{}: 'compress_ratios' has {} entries but num_hidden_layers + num_nextn_predict_layers = {}", label,
        c.compress_ratios.size(), c.num_hidden_layers + c.num_nextn_predict_layers);
  }
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    const int m = c.compress_ratios[i];
    if (m < 0) return invalid_argument("{}: 'compress_ratios'[{}] is negative", label, i);
    if (static_cast<int64_t>(i) >= c.num_hidden_layers && m != 0) {
      return invalid_argument("{}: 'compress_ratios'[{}] belongs to an MTP/draft layer and must be 0, got {}",
                              label, i, m);
    }
  }
  if (c.hc_eps <= 0 || c.rms_norm_eps <= 0) {
    return invalid_argument("{}: 'hc_eps' and 'rms_norm_eps' must be positive", label);
  }
  if (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size || c.eos_token_id < 0 || c.eos_token_id >= c.vocab_size) {
    return invalid_argument("{}: 'bos_token_id'/'eos_token_id' must be valid token ids", label);
  }
  if (c.quant.experts_fp4 && c.moe_intermediate_size % 32 != 0) {
    return invalid_argument("{}: FP4 experts need 'moe_intermediate_size' ({}) divisible by 32", label,
                            c.moe_intermediate_size);
  }
  if (c.quant.experts_fp4 && c.hidden_size % 32 != 0) {
    return invalid_argument("{}: FP4 experts need 'hidden_size' ({}) divisible by 32", label, c.hidden_size);
  }
  for (int id : c.dspark_target_layer_ids) {
    if (id < 0 || id >= c.num_hidden_layers) {
      return invalid_argument("{}: 'dspark_target_layer_ids' entry {} is not a layer", label, id);
    }
  }
  if (c.family == ModelFamily::kV41) return validate_model_config_v41(c, label);
  return Status::ok();
}

std::string model_config_to_json(const ModelConfig& c) {
  if (c.family == ModelFamily::kV41) return detail::model_config_v41_to_json(c);
  nlohmann::ordered_json j;
  j["architectures"] = {"DeepseekV4ForCausalLM"};
  j["model_type"] = c.model_type.empty() ? "deepseek_v4" : c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_hash_layers"] = c.num_hash_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = c.head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["q_lora_rank"] = c.q_lora_rank;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["n_routed_experts"] = c.n_routed_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["n_shared_experts"] = c.n_shared_experts;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["scoring_func"] = "sqrtsoftplus";
  j["topk_method"] = "noaux_tc";
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["swiglu_limit"] = c.swiglu_limit;
  j["hidden_act"] = "silu";
  j["sliding_window"] = c.sliding_window;
  j["compress_ratios"] = c.compress_ratios;
  j["compress_rope_theta"] = c.compress_rope_theta;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.yarn) {
    j["rope_scaling"] = {{"type", "yarn"},
                         {"factor", c.rope_scaling.factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings},
                         {"beta_fast", c.rope_scaling.beta_fast},
                         {"beta_slow", c.rope_scaling.beta_slow}};
  }
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["tie_word_embeddings"] = false;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["torch_dtype"] = "bfloat16";
  if (c.dspark_block_size > 0) {
    j["dspark_block_size"] = c.dspark_block_size;
    j["dspark_markov_rank"] = c.dspark_markov_rank;
    j["dspark_noise_token_id"] = c.dspark_noise_token_id;
    j["dspark_target_layer_ids"] = c.dspark_target_layer_ids;
  }
  j["expert_dtype"] = c.quant.experts_fp4 ? "fp4" : "fp8";
  if (c.quant.fp8) {
    j["quantization_config"] = {{"quant_method", "fp8"},
                                {"fmt", "e4m3"},
                                {"scale_fmt", c.quant.ue8m0_scales ? "ue8m0" : "float"},
                                {"activation_scheme", "dynamic"},
                                {"weight_block_size", {c.quant.block_out, c.quant.block_in}}};
  }
  return j.dump(2);
}

}  // namespace deepinfer::loader
