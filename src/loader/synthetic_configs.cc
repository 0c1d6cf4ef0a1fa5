// The tiny synthetic configurations of model_v4_flash.md §10.2 and §10.5.
#include "loader/synthetic.h"

namespace deepinfer::loader {

ModelConfig tiny_v4_flash_config() {
  ModelConfig c;
  c.family = ModelFamily::kV4;
  c.model_type = "deepseek_v4";
  c.vocab_size = 129280;
  c.hidden_size = 256;
  c.num_hidden_layers = 7;
  c.num_hash_layers = 3;
  c.num_attention_heads = 4;
  c.head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 128;
  c.o_groups = 2;
  c.o_lora_rank = 128;
  c.n_routed_experts = 16;
  c.num_experts_per_tok = 4;
  c.n_shared_experts = 1;
  c.moe_intermediate_size = 128;
  c.routed_scaling_factor = 1.5;
  c.swiglu_limit = 10.0;
  c.norm_topk_prob = true;
  c.sliding_window = 128;
  c.compress_ratios = {0, 0, 4, 128, 4, 128, 4, 0};
  c.compress_rope_theta = 160000;
  c.rope_theta = 10000;
  c.rope_scaling = RopeScaling{true, 16.0, 65536, 32.0, 1.0};
  c.index_n_heads = 4;
  c.index_head_dim = 128;
  c.index_topk = 16;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.rms_norm_eps = 1e-6;
  c.num_nextn_predict_layers = 1;
  c.n_mtp_layers = 1;
  c.max_position_embeddings = 1048576;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  c.quant = QuantConfig{true, 128, 128, true, true};
  return c;
}

ModelConfig tiny_short_config() {
  ModelConfig c = tiny_v4_flash_config();
  c.sliding_window = 16;
  c.compress_ratios = {0, 0, 4, 16, 4, 16, 4, 0};
  c.index_topk = 4;
  return c;
}

ModelConfig micro_config() {
  ModelConfig c = tiny_short_config();
  c.vocab_size = 512;
  c.hidden_size = 128;
  c.q_lora_rank = 128;
  c.o_groups = 1;
  return c;
}

Result<ModelConfig> named_test_config(const std::string& name) {
  if (name == "tiny-v4f") return tiny_v4_flash_config();
  if (name == "tiny-short") return tiny_short_config();
  if (name == "micro") return micro_config();
  return invalid_argument("unknown test config '{}' (expected tiny-v4f, tiny-short or micro)", name);
}

}  // namespace deepinfer::loader
