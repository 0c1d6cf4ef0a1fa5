// ModelConfig parsing and validation: every error names the key at fault.
#include "loader/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "loader/synthetic.h"

namespace deepinfer::loader {
namespace {

using json = nlohmann::json;

json tiny_json() { return json::parse(model_config_to_json(tiny_v4_flash_config())); }

std::string error_of(const json& j) {
  auto r = parse_model_config(j, "config.json");
  return r.is_ok() ? "" : r.status().message();
}

TEST(ModelConfigTest, TinyConfigRoundTrips) {
  auto c = parse_model_config(tiny_json(), "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->hidden_size, 256);
  EXPECT_EQ(c->num_hidden_layers, 7);
  EXPECT_EQ(c->n_mtp_layers, 1);
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 0, 4, 128, 4, 128, 4, 0}));
  EXPECT_TRUE(c->rope_scaling.yarn);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 65536);
  EXPECT_TRUE(c->quant.fp8);
  EXPECT_EQ(c->quant.block_out, 128);
  EXPECT_TRUE(c->quant.experts_fp4);
  EXPECT_TRUE(c->is_hash_layer(2));
  EXPECT_FALSE(c->is_hash_layer(3));
  EXPECT_TRUE(c->has_indexer(4));
  EXPECT_FALSE(c->has_indexer(5));
  EXPECT_EQ(c->max_ratio(), 128);
}

TEST(ModelConfigTest, ParsesTheOfficialV4FlashKeys) {
  // The real V4-Flash config shape (model_v4_flash.md §2.1), incl. quantization_config.
  json j = tiny_json();
  j["hidden_size"] = 4096;
  j["num_hidden_layers"] = 43;
  j["num_attention_heads"] = 64;
  j["head_dim"] = 512;
  j["q_lora_rank"] = 1024;
  j["o_groups"] = 8;
  j["o_lora_rank"] = 1024;
  j["n_routed_experts"] = 256;
  j["num_experts_per_tok"] = 6;
  j["moe_intermediate_size"] = 2048;
  j["index_n_heads"] = 64;
  j["index_topk"] = 512;
  std::vector<int> ratios = {0, 0};
  for (int i = 0; i < 20; ++i) ratios.insert(ratios.end(), {4, 128});
  ratios.insert(ratios.end(), {4, 0});
  j["compress_ratios"] = ratios;
  j.erase("expert_dtype");  // initial revision: absent means FP4
  auto c = parse_model_config(j, "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->n_mtp_layers, 1);
  EXPECT_EQ(c->n_heads_per_group(), 8);
  EXPECT_TRUE(c->quant.experts_fp4);
}

TEST(ModelConfigTest, DSparkKeysAndThreeDraftStages) {
  json j = tiny_json();
  j["compress_ratios"] = {0, 0, 4, 128, 4, 128, 4, 0, 0, 0};
  j["dspark_block_size"] = 5;
  j["dspark_markov_rank"] = 16;
  j["dspark_target_layer_ids"] = {4, 5, 6};
  j["dspark_noise_token_id"] = 128799;
  auto c = parse_model_config(j, "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->n_mtp_layers, 3);
  EXPECT_EQ(c->dspark_target_layer_ids, (std::vector<int>{4, 5, 6}));
}

TEST(ModelConfigTest, ErrorsNameTheKey) {
  struct Case {
    std::function<void(json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("hidden_size"); }, "'hidden_size'"},
      {[](json& j) { j["hidden_size"] = "big"; }, "'hidden_size' must be an integer"},
      {[](json& j) { j["hidden_size"] = 0; }, "'hidden_size' must be positive"},
      {[](json& j) { j["compress_ratios"] = {0, 0}; }, "'compress_ratios'"},
      {[](json& j) { j["compress_ratios"].back() = 4; }, "MTP/draft layer"},
      {[](json& j) { j["o_groups"] = 3; }, "'o_groups'"},
      {[](json& j) { j["scoring_func"] = "softmax"; }, "'scoring_func'"},
      {[](json& j) { j["num_key_value_heads"] = 8; }, "'num_key_value_heads'"},
      {[](json& j) { j["qk_rope_head_dim"] = 63; }, "'qk_rope_head_dim'"},
      {[](json& j) { j["index_head_dim"] = 96; }, "'index_head_dim'"},
      {[](json& j) { j["num_experts_per_tok"] = 17; }, "'num_experts_per_tok'"},
      {[](json& j) { j["rope_scaling"]["type"] = "linear"; }, "rope_scaling type 'linear'"},
      {[](json& j) { j["quantization_config"]["weight_block_size"] = {128}; }, "weight_block_size"},
      {[](json& j) { j["quantization_config"]["quant_method"] = "gptq"; }, "quant_method"},
      {[](json& j) { j["model_type"] = "llama"; }, "'model_type'"},
      {[](json& j) { j["expert_dtype"] = "int4"; }, "'expert_dtype'"},
      {[](json& j) { j["num_hash_layers"] = 9; }, "'num_hash_layers'"},
      {[](json& j) { j["eos_token_id"] = 200000; }, "'eos_token_id'"},
  };
  for (const Case& c : cases) {
    json j = tiny_json();
    c.edit(j);
    const std::string err = error_of(j);
    EXPECT_NE(err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << err;
    EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  }
}

TEST(ModelConfigTest, V41ModelTypeGoesToTheV41Parser) {
  // A V4 config relabelled deepseek_v41 is parsed by the V4.1 rules, which reject hash layers.
  json j = tiny_json();
  j["model_type"] = "deepseek_v41";
  const std::string err = error_of(j);
  EXPECT_NE(err.find("no hash-routed layers"), std::string::npos) << err;
}

}  // namespace
}  // namespace deepinfer::loader
