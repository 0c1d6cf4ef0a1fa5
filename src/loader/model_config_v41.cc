// The V4.1-Flash config parser (model_v41_flash.md §1): the nested HF config.json (text_config +
// vision_config) or a flat reference-style object (inference/config.json), each text key under its
// HF or its reference spelling. Absent CSA2 schedules are derived the way the HF config derives
// them; everything else that is absent is an error naming the key. Validation: model_config_v41_validate.cc.
#include <algorithm>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "loader/config_reader.h"
#include "loader/model_config.h"

namespace deepinfer::loader {
namespace {

using json = nlohmann::json;
using detail::KeyReader;

// The first spelling of `names` present in `r`'s object, else the first one (so a missing
// required key is reported under its HF name).
const char* pick(const KeyReader& r, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (r.has(n)) return n;
  return *names.begin();
}

Status parse_v41_rope(const json& text, KeyReader& r, RopeScaling* rs) {
  if (r.has("rope_scaling")) return detail::parse_rope_scaling(text, r.label(), rs);
  if (!r.has("rope_factor") && !r.has("original_seq_len")) return Status::ok();  // no YaRN
  rs->factor = r.number("rope_factor", 1.0);
  rs->original_max_position_embeddings = r.integer("original_seq_len");
  rs->beta_fast = r.number("beta_fast", 32.0);
  rs->beta_slow = r.number("beta_slow", 1.0);
  DI_RETURN_IF_ERROR(r.status());
  if (rs->factor < 1.0 || rs->original_max_position_embeddings <= 0) {
    return invalid_argument("{}: rope_factor must be >= 1 and original_seq_len positive", r.label());
  }
  rs->yarn = true;
  return Status::ok();
}

// Quantization: HF `quantization_config` at the top level (expert_dtype inside), or the reference's
// flat dtype / scale_fmt / expert_dtype (V4.1 weight blocks are 32 x 32 there).
Status parse_v41_quant(const json& top, const json& text, const std::string& label, QuantConfig* q) {
  if (top.contains("quantization_config") && !top["quantization_config"].is_null()) {
    return detail::parse_quant(top, label, q);
  }
  KeyReader r(text, label);
  const std::string dtype = r.string("dtype", "bf16");
  const std::string scale_fmt = r.string("scale_fmt", "ue8m0");
  const std::string experts = r.string("expert_dtype", "fp4");
  DI_RETURN_IF_ERROR(r.status());
  const bool unquantized = dtype == "bf16" || dtype == "bfloat16" || dtype == "float32" || dtype == "float16";
  if (dtype != "fp8" && !unquantized) return unimplemented("{}: 'dtype' '{}' must be fp8 or bf16", label, dtype);
  if (experts != "fp4" && experts != "fp8") return invalid_argument("{}: 'expert_dtype' '{}' must be fp4 or fp8", label, experts);
  *q = QuantConfig{dtype == "fp8", 32, 32, scale_fmt == "ue8m0", experts == "fp4"};
  return Status::ok();
}

Status parse_vision(const json& top, const json& text, const std::string& label, VisionConfig* v) {
  if (const auto it = top.find("vision_config"); it != top.end() && it->is_object()) {
    KeyReader r(*it, label + ": vision_config");
    v->num_hidden_layers = r.integer("num_hidden_layers");
    v->hidden_size = r.integer("hidden_size");
    v->num_attention_heads = r.integer("num_attention_heads");
    v->intermediate_size = r.integer("intermediate_size");
    v->patch_size = r.integer("patch_size");
    v->rope_theta = r.number("rope_theta", 10000.0);
    v->downsample_ratio = r.integer("downsample_ratio");
    v->max_image_tokens = r.integer("max_image_tokens");
    v->min_pixels = r.integer("min_pixels");
    v->max_wh_ratio = r.number("max_wh_ratio", 0.0);
    return r.status();
  }
  KeyReader r(text, label);
  if (!r.has("vision_n_layers")) return Status::ok();  // text-only config
  v->num_hidden_layers = r.integer("vision_n_layers");
  v->hidden_size = r.integer("vision_dim");
  v->num_attention_heads = r.integer("vision_n_heads");
  v->intermediate_size = r.integer("vision_inter_dim");
  v->patch_size = r.integer("vision_patch_size");
  v->rope_theta = r.number("vision_rope_theta", 10000.0);
  v->downsample_ratio = r.integer("vision_downsample_ratio");
  v->max_image_tokens = r.integer("vision_max_n_token");
  v->min_pixels = r.integer("vision_min_pixels");
  v->max_wh_ratio = r.number("vision_max_wh_ratio", 0.0);
  return r.status();
}

void read_dims(KeyReader& r, ModelConfig& c) {
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer(pick(r, {"hidden_size", "dim"}));
  c.moe_intermediate_size = r.integer(pick(r, {"moe_intermediate_size", "moe_inter_dim"}));
  c.num_hidden_layers = r.integer(pick(r, {"num_hidden_layers", "n_layers"}));
  c.num_attention_heads = r.integer(pick(r, {"num_attention_heads", "n_heads"}));
  c.head_dim = r.integer("head_dim");
  c.qk_rope_head_dim = r.integer(pick(r, {"qk_rope_head_dim", "rope_head_dim"}));
  c.q_lora_rank = r.integer("q_lora_rank");
  c.o_lora_rank = r.integer("o_lora_rank");
  c.o_groups = r.integer("o_groups");
  c.swiglu_limit = r.number("swiglu_limit", 0.0);
  c.rms_norm_eps = r.number(pick(r, {"rms_norm_eps", "norm_eps"}), 1e-20);
  c.max_position_embeddings = r.integer(pick(r, {"max_position_embeddings", "max_seq_len"}), 1048576);
  c.rope_theta = r.number("rope_theta", 10000.0);
  c.compress_rope_theta = r.number("compress_rope_theta", 160000.0);
  c.n_routed_experts = r.integer("n_routed_experts");
  c.n_shared_experts = r.integer("n_shared_experts", 1);
  c.num_experts_per_tok = r.integer(pick(r, {"num_experts_per_tok", "n_activated_experts"}));
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.routed_scaling_factor = r.number(pick(r, {"routed_scaling_factor", "route_scale"}), 1.0);
  c.gate_temp = r.number("gate_temp", 1.0);
  c.sliding_window = r.integer(pick(r, {"sliding_window", "window_size"}));
  c.compress_ratios = r.int_list("compress_ratios", false);
  c.index_n_heads = r.integer("index_n_heads");
  c.index_head_dim = r.integer("index_head_dim");
  c.index_topk = r.integer("index_topk");
  c.hc_mult = r.integer("hc_mult");
  c.hc_sinkhorn_iters = r.integer("hc_sinkhorn_iters");
  c.hc_eps = r.number("hc_eps", 1e-6);
  c.bos_token_id = r.integer("bos_token_id", 0);
  c.eos_token_id = r.integer("eos_token_id", 1);
}

void read_v41_keys(KeyReader& r, ModelConfig& c) {
  c.kv_source_layer_ids = r.int_list(pick(r, {"kv_source_layer_ids", "kv_source_layers"}), true);
  c.index_source_layer_ids = r.int_list(pick(r, {"index_source_layer_ids", "index_source_layers"}), true);
  const char* cand = pick(r, {"candidate_source_layer_id", "candidate_source_layer"});
  c.candidate_source_layer_id = r.has(cand) ? r.integer(cand) : -2;  // -2: absent, derived below
  c.candidate_topk_blocks = r.integer("candidate_topk_blocks", 0);
  c.candidate_block_size = r.integer("candidate_block_size", 0);
  c.engram_layer_ids = r.int_list("engram_layer_ids", true);
  c.engram_num_embeddings = r.int64_list("engram_num_embeddings", true);
  c.engram_max_ngram_size = r.integer("engram_max_ngram_size", 0);
  c.engram_vocab_size = r.integer("engram_vocab_size", 0);
  c.engram_n_heads = r.integer("engram_n_heads", 0);
  c.engram_head_dim = r.integer("engram_head_dim", 0);
  c.engram_pad_token_id = r.integer(pick(r, {"engram_pad_token_id", "engram_pad_id"}), 2);
  c.engram_compressed_vocab_size = r.integer("engram_compressed_vocab_size", 0);
  c.num_nextn_predict_layers = r.integer(pick(r, {"num_nextn_predict_layers", "n_mtp_layers"}), 0);
  c.dspark_block_size = r.integer("dspark_block_size", 0);
  c.dspark_noise_token_id = r.integer("dspark_noise_token_id", -1);
  c.dspark_target_layer_ids = r.int_list("dspark_target_layer_ids", true);
  c.dspark_markov_rank = r.integer("dspark_markov_rank", 0);
  c.dspark_n_routed_experts = r.integer("dspark_n_routed_experts", 0);
  c.dspark_num_experts_per_tok = r.integer(pick(r, {"dspark_num_experts_per_tok", "dspark_n_activated_experts"}), 0);
}

// The schedules HF derives when a config omits them (configuration_deepseek_v41.py semantics):
// sources = first layer of each same-ratio run; index sources = the KV sources; candidate source
// = the last KV source; DSpark targets = the last three non-source layers.
void derive_schedules(ModelConfig& c) {
  const int64_t L = c.num_hidden_layers;
  if (c.kv_source_layer_ids.empty()) {
    for (int64_t i = 0; i < L && i < static_cast<int64_t>(c.compress_ratios.size()); ++i) {
      if (c.compress_ratios[i] > 0 && (i == 0 || c.compress_ratios[i - 1] != c.compress_ratios[i])) {
        c.kv_source_layer_ids.push_back(static_cast<int>(i));
      }
    }
  }
  if (c.index_source_layer_ids.empty()) c.index_source_layer_ids = c.kv_source_layer_ids;
  if (c.candidate_source_layer_id == -2) {
    c.candidate_source_layer_id = c.kv_source_layer_ids.empty() ? -1 : c.kv_source_layer_ids.back();
  }
  if (c.candidate_source_layer_id < 0) c.candidate_source_layer_id = -1;
  if (c.dspark_target_layer_ids.empty() && c.num_nextn_predict_layers > 0) {
    std::vector<int> rest;
    for (int64_t i = 0; i < L; ++i)
      if (!c.is_kv_source(i)) rest.push_back(static_cast<int>(i));
    c.dspark_target_layer_ids.assign(rest.end() - std::min<size_t>(3, rest.size()), rest.end());
  }
  // DSpark stages are window-only: a list of L .. L + n_nextn entries is padded with 0 (HF does
  // the same); longer lists fail validation.
  const int64_t n_ratios = static_cast<int64_t>(c.compress_ratios.size());
  if (n_ratios >= L && n_ratios < L + c.num_nextn_predict_layers) {
    c.compress_ratios.resize(static_cast<size_t>(L + c.num_nextn_predict_layers), 0);
  }
  c.n_mtp_layers = static_cast<int64_t>(c.compress_ratios.size()) - L;
}

}  // namespace

Result<ModelConfig> parse_model_config_v41(const json& config, const std::string& label) {
  if (!config.is_object()) return invalid_argument("{}: not a JSON object", label);
  const auto tc = config.find("text_config");
  const bool nested = tc != config.end() && tc->is_object();
  const json& text = nested ? *tc : config;
  const std::string text_label = nested ? label + ": text_config" : label;
  ModelConfig c;
  c.family = ModelFamily::kV41;
  c.model_type = "deepseek_v41";
  KeyReader top(config, label);
  c.image_token_id = top.integer("image_token_id", -1);
  const bool top_tie = top.boolean("tie_word_embeddings", false);
  DI_RETURN_IF_ERROR(top.status());
  KeyReader r(text, text_label);
  if (nested && r.has("model_type")) {
    const std::string mt = r.string("model_type");
    if (mt != "deepseek_v41_text") {
      return invalid_argument("{}: 'model_type' is '{}', expected deepseek_v41_text", text_label, mt);
    }
  }
  read_dims(r, c);
  read_v41_keys(r, c);
  const int64_t n_kv_heads = r.integer("num_key_value_heads", 1);
  const std::string scoring = r.string(pick(r, {"scoring_func", "score_func"}), "sqrtsoftplus");
  const std::string topk_method = r.string("topk_method", "noaux_tc");
  const std::string act = r.string("hidden_act", "silu");
  const bool tie = r.boolean("tie_word_embeddings", false);
  c.num_hash_layers = r.integer(pick(r, {"num_hash_layers", "n_hash_layers"}), 0);
  DI_RETURN_IF_ERROR(r.status());
  if (n_kv_heads != 1) return unimplemented("{}: 'num_key_value_heads' must be 1, got {}", text_label, n_kv_heads);
  if (scoring != "sqrtsoftplus") return unimplemented("{}: scoring function '{}' is not supported (sqrtsoftplus)", text_label, scoring);
  if (topk_method != "noaux_tc") return unimplemented("{}: 'topk_method' '{}' is not supported (noaux_tc)", text_label, topk_method);
  if (act != "silu") return unimplemented("{}: 'hidden_act' '{}' is not supported (silu)", text_label, act);
  if (tie || top_tie) return unimplemented("{}: 'tie_word_embeddings' true is not supported (separate head)", text_label);
  DI_RETURN_IF_ERROR(parse_v41_rope(text, r, &c.rope_scaling));
  DI_RETURN_IF_ERROR(parse_v41_quant(config, text, label, &c.quant));
  DI_RETURN_IF_ERROR(parse_vision(config, text, label, &c.vision));
  derive_schedules(c);
  DI_RETURN_IF_ERROR(validate_model_config(c, label));
  return c;
}

}  // namespace deepinfer::loader
