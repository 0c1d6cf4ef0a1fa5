#include "loader/model_config.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "loader/config_reader.h"

namespace deepinfer::loader {
namespace detail {

using json = nlohmann::json;

Status parse_quant(const json& config, const std::string& label, QuantConfig* q) {
  auto it = config.find("quantization_config");
  if (it == config.end() || it->is_null()) {
    q->fp8 = false;
  } else {
    if (!it->is_object()) return invalid_argument("{}: 'quantization_config' must be an object", label);
    KeyReader r(*it, label + ": quantization_config");
    const std::string method = r.string("quant_method");
    const std::string scale_fmt = r.string("scale_fmt", "ue8m0");
    const std::string fmt = r.string("fmt", "e4m3");
    const std::vector<int> block = r.int_list("weight_block_size", false);
    DI_RETURN_IF_ERROR(r.status());
    if (method != "fp8") {
      return unimplemented("{}: quantization_config.quant_method '{}' is not supported (only fp8)", label, method);
    }
    if (fmt != "e4m3") return unimplemented("{}: quantization_config.fmt '{}' is not supported (only e4m3)", label, fmt);
    if (block.size() != 2 || block[0] <= 0 || block[1] <= 0) {
      return invalid_argument("{}: quantization_config.weight_block_size must be two positive integers", label);
    }
    q->fp8 = true;
    q->block_out = block[0];
    q->block_in = block[1];
    q->ue8m0_scales = scale_fmt == "ue8m0";
    if (it->contains("expert_dtype")) {
      KeyReader e(*it, label + ": quantization_config");
      const std::string ed = e.string("expert_dtype");
      DI_RETURN_IF_ERROR(e.status());
      if (ed != "fp4" && ed != "fp8") return invalid_argument("{}: quantization_config.expert_dtype '{}' must be fp4 or fp8", label, ed);
      q->experts_fp4 = ed == "fp4";
    }
  }
  // V4 puts expert_dtype at the top level (current revision); absent means FP4.
  if (config.contains("expert_dtype") && !config["expert_dtype"].is_null()) {
    if (!config["expert_dtype"].is_string()) return invalid_argument("{}: 'expert_dtype' must be a string", label);
    const std::string ed = config["expert_dtype"].get<std::string>();
    if (ed != "fp4" && ed != "fp8") return invalid_argument("{}: 'expert_dtype' '{}' must be fp4 or fp8", label, ed);
    q->experts_fp4 = ed == "fp4";
  }
  return Status::ok();
}

Status parse_rope_scaling(const json& config, const std::string& label, RopeScaling* rs) {
  auto it = config.find("rope_scaling");
  if (it == config.end() || it->is_null()) return Status::ok();
  if (!it->is_object()) return invalid_argument("{}: 'rope_scaling' must be an object", label);
  KeyReader r(*it, label + ": rope_scaling");
  std::string type = r.string("type", "");
  if (type.empty()) type = r.string("rope_type", "");
  rs->factor = r.number("factor", 1.0);
  rs->original_max_position_embeddings = r.integer("original_max_position_embeddings", 0);
  rs->beta_fast = r.number("beta_fast", 32.0);
  rs->beta_slow = r.number("beta_slow", 1.0);
  DI_RETURN_IF_ERROR(r.status());
  if (type != "yarn") return unimplemented("{}: rope_scaling type '{}' is not supported (only yarn)", label, type);
  if (rs->factor < 1.0) return invalid_argument("{}: rope_scaling.factor must be >= 1", label);
  if (rs->original_max_position_embeddings <= 0) {
    return invalid_argument("{}: rope_scaling.original_max_position_embeddings must be positive", label);
  }
  rs->yarn = true;
  return Status::ok();
}

}  // namespace detail

using json = nlohmann::json;
using detail::KeyReader;

const char* model_family_name(ModelFamily family) {
  return family == ModelFamily::kV4 ? "deepseek_v4" : "deepseek_v41";
}

int ModelConfig::max_ratio() const {
  int m = 1;
  for (int r : compress_ratios) m = std::max(m, r);
  return m;
}

Result<ModelConfig> parse_model_config(const json& config, const std::string& label) {
  if (!config.is_object()) return invalid_argument("{}: not a JSON object", label);
  ModelConfig c;
  KeyReader top(config, label);
  c.model_type = top.string("model_type");
  DI_RETURN_IF_ERROR(top.status());
  if (c.model_type == "deepseek_v41" || c.model_type == "deepseek_v41_text") {
    return parse_model_config_v41(config, label);
  }
  if (c.model_type != "deepseek_v4") {
    return invalid_argument("{}: 'model_type' is '{}', expected deepseek_v4 or deepseek_v41", label, c.model_type);
  }
  c.family = ModelFamily::kV4;
  KeyReader r(config, label);
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  const int64_t n_kv_heads = r.integer("num_key_value_heads", 1);
  c.head_dim = r.integer("head_dim");
  c.qk_rope_head_dim = r.integer("qk_rope_head_dim");
  c.q_lora_rank = r.integer("q_lora_rank");
  c.o_groups = r.integer("o_groups");
  c.o_lora_rank = r.integer("o_lora_rank");
  c.n_routed_experts = r.integer("n_routed_experts");
  c.num_experts_per_tok = r.integer("num_experts_per_tok");
  c.n_shared_experts = r.integer("n_shared_experts", 1);
  c.moe_intermediate_size = r.integer("moe_intermediate_size");
  c.num_hash_layers = r.integer("num_hash_layers", 0);
  c.routed_scaling_factor = r.number("routed_scaling_factor", 1.0);
  c.swiglu_limit = r.number("swiglu_limit", 0.0);
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  const std::string scoring = r.string("scoring_func", "sqrtsoftplus");
  const std::string topk_method = r.string("topk_method", "noaux_tc");
  const std::string act = r.string("hidden_act", "silu");
  c.sliding_window = r.integer("sliding_window");
  c.compress_ratios = r.int_list("compress_ratios", false);
  c.rope_theta = r.number("rope_theta", 10000.0);
  c.compress_rope_theta = r.number("compress_rope_theta", 160000.0);
  c.index_n_heads = r.integer("index_n_heads");
  c.index_head_dim = r.integer("index_head_dim");
  c.index_topk = r.integer("index_topk");
  c.hc_mult = r.integer("hc_mult");
  c.hc_sinkhorn_iters = r.integer("hc_sinkhorn_iters");
  c.hc_eps = r.number("hc_eps", 1e-6);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.num_nextn_predict_layers = r.integer("num_nextn_predict_layers", 0);
  c.max_position_embeddings = r.integer("max_position_embeddings");
  c.bos_token_id = r.integer("bos_token_id", 0);
  c.eos_token_id = r.integer("eos_token_id", 1);
  c.dspark_block_size = r.integer("dspark_block_size", 0);
  c.dspark_markov_rank = r.integer("dspark_markov_rank", 0);
  c.dspark_noise_token_id = r.integer("dspark_noise_token_id", -1);
  c.dspark_target_layer_ids = r.int_list("dspark_target_layer_ids", true);
  const bool tie = r.boolean("tie_word_embeddings", false);
  DI_RETURN_IF_ERROR(r.status());
  if (n_kv_heads != 1) return unimplemented("{}: 'num_key_value_heads' must be 1 (one shared latent), got {}", label, n_kv_heads);
  if (scoring != "sqrtsoftplus") return unimplemented("{}: 'scoring_func' '{}' is not supported (sqrtsoftplus)", label, scoring);
  if (topk_method != "noaux_tc") return unimplemented("{}: 'topk_method' '{}' is not supported (noaux_tc)", label, topk_method);
  if (act != "silu") return unimplemented("{}: 'hidden_act' '{}' is not supported (silu)", label, act);
  if (tie) return unimplemented("{}: 'tie_word_embeddings' true is not supported (V4 has a separate head)", label);
  if (config.contains("n_group") && config["n_group"].is_number_integer() && config["n_group"].get<int64_t>() > 1) {
    return unimplemented("{}: group-limited routing ('n_group' > 1) is not part of DeepSeek-V4", label);
  }
  DI_RETURN_IF_ERROR(detail::parse_rope_scaling(config, label, &c.rope_scaling));
  DI_RETURN_IF_ERROR(detail::parse_quant(config, label, &c.quant));
  c.n_mtp_layers = static_cast<int64_t>(c.compress_ratios.size()) - c.num_hidden_layers;
  DI_RETURN_IF_ERROR(validate_model_config(c, label));
  return c;
}

Result<ModelConfig> load_model_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  DI_ASSIGN_OR_RETURN(std::string text, read_file(path));
  json config = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return invalid_argument("{}: not valid JSON", path);
  return parse_model_config(config, path);
}

}  // namespace deepinfer::loader
