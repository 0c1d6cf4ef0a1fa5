// V4.1 config parsing (model_v41_flash.md §1, §13): the nested HF config and the flat reference
// spellings, derived CSA2 roles, the released config's tensor count, and one error per rule, each
// naming the key or layer at fault.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "loader/inventory.h"
#include "loader/model_config.h"
#include "loader/synthetic.h"

namespace deepinfer::loader {
namespace {

using json = nlohmann::json;

// The §13 tiny config, verbatim.
json spec_tiny() {
  return json::parse(R"({
  "architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
  "image_token_id": 510,
  "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
    "weight_block_size": [32, 32], "scale_fmt": "ue8m0", "expert_dtype": "fp4"},
  "text_config": {
    "model_type": "deepseek_v41_text", "vocab_size": 512, "hidden_size": 128,
    "moe_intermediate_size": 64, "num_hidden_layers": 12, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 64, "qk_rope_head_dim": 16, "q_lora_rank": 64,
    "o_lora_rank": 32, "o_groups": 2, "hidden_act": "silu", "swiglu_limit": 10.0,
    "rms_norm_eps": 1e-20, "tie_word_embeddings": false, "max_position_embeddings": 4096,
    "rope_theta": 10000, "compress_rope_theta": 160000,
    "rope_scaling": {"rope_type": "yarn", "factor": 4, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 32},
    "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
    "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "norm_topk_prob": true,
    "routed_scaling_factor": 1.5, "sliding_window": 8,
    "compress_ratios": [0,0,2,2,2,2,1,1,1,1,1,1,0,0,0],
    "kv_source_layer_ids": [2,4,6], "index_source_layer_ids": [2,4,6,8,10],
    "index_n_heads": 4, "index_head_dim": 32, "index_topk": 4,
    "candidate_source_layer_id": 6, "candidate_topk_blocks": 3, "candidate_block_size": 2,
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06,
    "engram_layer_ids": [1,4], "engram_num_embeddings": [660, 864],
    "engram_max_ngram_size": 4, "engram_vocab_size": 101, "engram_n_heads": 2,
    "engram_head_dim": 32, "engram_pad_token_id": 2, "engram_compressed_vocab_size": 256,
    "num_nextn_predict_layers": 3, "dspark_block_size": 5, "dspark_noise_token_id": 500,
    "dspark_target_layer_ids": [9,10,11], "dspark_markov_rank": 16,
    "dspark_n_routed_experts": 4, "dspark_num_experts_per_tok": 2
  },
  "vision_config": {
    "model_type": "deepseek_v41_vision", "num_hidden_layers": 2, "hidden_size": 64,
    "num_attention_heads": 2, "intermediate_size": 128, "patch_size": 14, "rope_theta": 10000,
    "downsample_ratio": 3, "max_image_tokens": 32, "min_pixels": 7056, "max_wh_ratio": null
  }})");
}

// The released DeepSeek-V4.1-Flash config (§1 values).
json released() {
  json j = spec_tiny();
  json& t = j["text_config"];
  t.update(json::parse(R"({"vocab_size": 129280, "hidden_size": 5120, "moe_intermediate_size": 2304,
    "num_hidden_layers": 40, "num_attention_heads": 64, "head_dim": 512, "qk_rope_head_dim": 64,
    "q_lora_rank": 1280, "o_lora_rank": 1024, "o_groups": 8, "max_position_embeddings": 1048576,
    "rope_scaling": {"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 65536},
    "n_routed_experts": 384, "num_experts_per_tok": 6, "sliding_window": 128,
    "kv_source_layer_ids": [2, 8, 14, 20], "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36],
    "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512,
    "candidate_source_layer_id": 20, "candidate_topk_blocks": 2048, "candidate_block_size": 8,
    "engram_layer_ids": [1, 14], "engram_num_embeddings": [384006168, 384016682],
    "engram_vocab_size": 16000000, "engram_n_heads": 8, "engram_head_dim": 256,
    "engram_compressed_vocab_size": 99092, "dspark_noise_token_id": 128799,
    "dspark_target_layer_ids": [37, 38, 39], "dspark_markov_rank": 256,
    "dspark_n_routed_experts": 128, "dspark_num_experts_per_tok": 3})"));
  std::vector<int> ratios = {0, 0};
  for (int i = 0; i < 18; ++i) ratios.push_back(2);
  for (int i = 0; i < 20; ++i) ratios.push_back(1);
  for (int i = 0; i < 3; ++i) ratios.push_back(0);
  t["compress_ratios"] = ratios;
  j["image_token_id"] = 129264;
  j["vision_config"].update(json::parse(R"({"num_hidden_layers": 32, "hidden_size": 1024,
    "num_attention_heads": 16, "intermediate_size": 2816, "max_image_tokens": 1024, "min_pixels": 295936})"));
  return j;
}

std::string error_of(const json& j) {
  auto r = parse_model_config(j, "config.json");
  return r.is_ok() ? "" : r.status().message();
}

TEST(ModelConfigV41Test, SpecTinyConfigParsesToTheNamedTestConfig) {
  auto c = parse_model_config(spec_tiny(), "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const ModelConfig t = tiny_v41_config();
  EXPECT_EQ(c->family, ModelFamily::kV41);
  EXPECT_EQ(c->hidden_size, t.hidden_size);
  EXPECT_EQ(c->compress_ratios, t.compress_ratios);
  EXPECT_EQ(c->n_mtp_layers, 3);
  EXPECT_EQ(c->kv_source_layer_ids, t.kv_source_layer_ids);
  EXPECT_EQ(c->index_source_layer_ids, t.index_source_layer_ids);
  EXPECT_EQ(c->candidate_source_layer_id, 6);
  EXPECT_EQ(c->engram_num_embeddings, t.engram_num_embeddings);
  EXPECT_EQ(c->rms_norm_eps, 1e-20);
  EXPECT_EQ(c->quant.block_out, 32);
  EXPECT_EQ(c->quant.block_in, 32);
  EXPECT_TRUE(c->quant.experts_fp4);
  EXPECT_EQ(c->rope_scaling.factor, 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 32);
  EXPECT_EQ(c->vision.num_hidden_layers, 2);
  EXPECT_EQ(c->vision.max_wh_ratio, 0.0);
  EXPECT_EQ(c->image_token_id, 510);
  EXPECT_EQ(c->dspark_n_routed_experts, 4);
  EXPECT_EQ(c->max_ratio(), 2);
  EXPECT_EQ(c->decoder_begin_layer(), 6);
}

TEST(ModelConfigV41Test, RolesMatchTheSpecTable) {
  const ModelConfig c = tiny_v41_config();
  using R = Csa2Role;
  const std::vector<R> want = {R::kWindowOnly, R::kWindowOnly, R::kFull, R::kReuse, R::kFull, R::kReuse,
                               R::kFull,       R::kReuse,      R::kReindex, R::kReuse, R::kReindex, R::kReuse};
  for (int64_t l = 0; l < 12; ++l) EXPECT_EQ(c.csa2_role(l), want[l]) << "layer " << l;
  EXPECT_EQ(c.kv_source_of(3), 2);
  EXPECT_EQ(c.kv_source_of(11), 6);
  EXPECT_EQ(c.index_source_of(9), 8);
  EXPECT_EQ(c.index_source_of(7), 6);
  EXPECT_EQ(c.kv_source_of(1), -1);
  EXPECT_EQ(c.engram_index(4), 1);
}

TEST(ModelConfigV41Test, WriterRoundTripsAndFlatReferenceSpellingsParse) {
  const ModelConfig t = tiny_v41_config();
  auto nested = parse_model_config(json::parse(model_config_to_json(t)), "config.json");
  ASSERT_TRUE(nested.is_ok()) << nested.status().to_string();
  auto flat = parse_model_config_v41(json::parse(model_config_v41_inference_json(t)), "inference/config.json");
  ASSERT_TRUE(flat.is_ok()) << flat.status().to_string();
  for (const ModelConfig* c : {&*nested, &*flat}) {
    EXPECT_EQ(c->hidden_size, 128);
    EXPECT_EQ(c->num_hidden_layers, 12);
    EXPECT_EQ(c->num_experts_per_tok, 2);
    EXPECT_EQ(c->sliding_window, 8);
    EXPECT_EQ(c->kv_source_layer_ids, t.kv_source_layer_ids);
    EXPECT_EQ(c->index_source_layer_ids, t.index_source_layer_ids);
    EXPECT_EQ(c->candidate_source_layer_id, 6);
    EXPECT_EQ(c->engram_pad_token_id, 2);
    EXPECT_EQ(c->dspark_num_experts_per_tok, 2);
    EXPECT_EQ(c->routed_scaling_factor, 1.5);
    EXPECT_EQ(c->rms_norm_eps, 1e-20);
    EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 32);
    EXPECT_EQ(c->quant.block_in, 32);
    EXPECT_EQ(c->vision.hidden_size, 64);
    EXPECT_EQ(c->compress_ratios, t.compress_ratios);
  }
}

TEST(ModelConfigV41Test, AbsentSchedulesAreDerivedLikeTransformers) {
  json j = spec_tiny();
  json& t = j["text_config"];
  for (const char* k : {"kv_source_layer_ids", "index_source_layer_ids", "candidate_source_layer_id",
                        "dspark_target_layer_ids"}) {
    t.erase(k);
  }
  t["compress_ratios"] = {0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1};  // DSpark entries padded with 0
  auto c = parse_model_config(j, "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->kv_source_layer_ids, (std::vector<int>{2, 6}));  // first layer of each ratio run
  EXPECT_EQ(c->index_source_layer_ids, (std::vector<int>{2, 6}));
  EXPECT_EQ(c->candidate_source_layer_id, 6);
  EXPECT_EQ(c->dspark_target_layer_ids, (std::vector<int>{9, 10, 11}));
  EXPECT_EQ(c->compress_ratios.size(), 15u);
}

TEST(ModelConfigV41Test, ReleasedConfigHasThe96085TensorsOfTheHeaders) {
  auto c = parse_model_config(released(), "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  int64_t n_tensors = 0;
  for (const ParamSpec& p : param_inventory(*c)) n_tensors += static_cast<int64_t>(file_tensors(p).size());
  EXPECT_EQ(n_tensors, 96085);  // §9 (header count); 96,082 would mean DSpark stages lack bias_vl
  // Scale grids: 32x32 dense blocks, UE8M0 per 32 for experts and Engram rows.
  for (const ParamSpec& p : param_inventory(*c)) {
    if (p.name == "layers.0.attn.wq_a.weight") {
      EXPECT_EQ(file_tensors(p)[1].shape, (std::vector<int64_t>{40, 160}));
    } else if (p.name == "layers.0.attn.wo_a.weight") {
      EXPECT_EQ(file_tensors(p)[1].shape, (std::vector<int64_t>{256, 128}));
    } else if (p.name == "layers.0.ffn.experts.0.w2.weight") {
      EXPECT_EQ(file_tensors(p)[0].shape, (std::vector<int64_t>{5120, 1152}));
      EXPECT_EQ(file_tensors(p)[1].shape, (std::vector<int64_t>{5120, 72}));
    } else if (p.name == "layers.14.engram.embed.weight") {
      EXPECT_EQ(file_tensors(p)[1].shape, (std::vector<int64_t>{384016682, 8}));
    } else if (p.name == "layers.14.engram.wkv.weight") {
      EXPECT_EQ(file_tensors(p)[1].shape, (std::vector<int64_t>{800, 192}));
    } else if (p.name == "mtp.0.main_proj.weight") {
      EXPECT_EQ(file_tensors(p)[0].shape, (std::vector<int64_t>{5120, 15360}));
    }
  }
}

TEST(ModelConfigV41Test, EveryRuleFailsWithTheKeyOrLayerAtFault) {
  struct Case {
    std::function<void(json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["text_config"].erase("hidden_size"); }, "missing required key 'hidden_size'"},
      {[](json& j) { j["text_config"]["model_type"] = "llama"; }, "expected deepseek_v41_text"},
      {[](json& j) { j["text_config"]["kv_source_layer_ids"] = {1, 4, 6}; }, "KV source layer 1 has compress ratio 0"},
      {[](json& j) {
         j["text_config"]["kv_source_layer_ids"] = {2, 6};
         j["text_config"]["compress_ratios"][4] = 1;
         j["text_config"]["compress_ratios"][5] = 1;
       },
       "layer 4 (ratio 1) reads KV source 2 across layer 2 of ratio 2"},
      {[](json& j) { j["text_config"]["index_source_layer_ids"] = {2, 6, 8, 10}; }, "layer 4 has no index source"},
      {[](json& j) { j["text_config"]["candidate_source_layer_id"] = 7; }, "'candidate_source_layer_id' 7 is not an index source"},
      {[](json& j) { j["text_config"]["candidate_source_layer_id"] = 2; }, "follows the candidate source 2"},
      {[](json& j) { j["text_config"]["engram_layer_ids"] = {1, 8}; }, "Engram layer 8 sits after the last KV source"},
      {[](json& j) { j["text_config"]["engram_num_embeddings"] = {660, 865}; }, "the primes of Engram layer 4 sum to 864"},
      {[](json& j) { j["text_config"]["engram_num_embeddings"] = {660}; }, "'engram_num_embeddings' has 1 entries"},
      {[](json& j) { j["text_config"]["head_dim"] = 48; j["text_config"]["qk_rope_head_dim"] = 16; }, "divisible by 32"},
      {[](json& j) { j["text_config"]["gate_temp"] = 2.0; }, "'gate_temp'"},
      {[](json& j) { j["text_config"]["compress_ratios"].push_back(0); }, "expected num_hidden_layers + num_nextn_predict_layers"},
      {[](json& j) { j["text_config"]["num_hash_layers"] = 3; }, "no hash-routed layers"},
      {[](json& j) { j["text_config"]["dspark_num_experts_per_tok"] = 5; }, "'dspark_num_experts_per_tok' (5)"},
      {[](json& j) { j["text_config"]["dspark_noise_token_id"] = 600; }, "'dspark_noise_token_id' 600"},
      {[](json& j) { j["text_config"]["tie_word_embeddings"] = true; }, "'tie_word_embeddings'"},
      {[](json& j) { j["vision_config"]["num_attention_heads"] = 3; }, "vision_config needs"},
      {[](json& j) { j["quantization_config"]["quant_method"] = "awq"; }, "quant_method 'awq'"},
  };
  for (const Case& c : cases) {
    json j = spec_tiny();
    c.edit(j);
    const std::string err = error_of(j);
    EXPECT_NE(err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << err;
    EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace deepinfer::loader
