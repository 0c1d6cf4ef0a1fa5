// The tiny synthetic configurations of model_v4_flash.md §10.2 and §10.5, and tiny-v41
// (model_v41_flash.md §13).
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

// tiny-v41 (model_v41_flash.md §13): 12 layers split 6/6, two ratio-2 KV sources with Reuse
// followers, the decoder's Full + candidate source, two Reindex groups, Engram at an SWA layer and
// at an encoder KV source, 3 DSpark stages with their own MoE size, a vision tower.
ModelConfig tiny_v41_config() {
  ModelConfig c;
  c.family = ModelFamily::kV41;
  c.model_type = "deepseek_v41";
  c.image_token_id = 510;
  c.quant = QuantConfig{true, 32, 32, true, true};
  c.vocab_size = 512;
  c.hidden_size = 128;
  c.moe_intermediate_size = 64;
  c.num_hidden_layers = 12;
  c.num_attention_heads = 4;
  c.head_dim = 64;
  c.qk_rope_head_dim = 16;
  c.q_lora_rank = 64;
  c.o_lora_rank = 32;
  c.o_groups = 2;
  c.swiglu_limit = 10.0;
  c.rms_norm_eps = 1e-20;
  c.max_position_embeddings = 4096;
  c.rope_theta = 10000;
  c.compress_rope_theta = 160000;
  c.rope_scaling = RopeScaling{true, 4.0, 32, 32.0, 1.0};
  c.n_routed_experts = 8;
  c.n_shared_experts = 1;
  c.num_experts_per_tok = 2;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 1.5;
  c.sliding_window = 8;
  c.compress_ratios = {0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0};
  c.kv_source_layer_ids = {2, 4, 6};
  c.index_source_layer_ids = {2, 4, 6, 8, 10};
  c.index_n_heads = 4;
  c.index_head_dim = 32;
  c.index_topk = 4;
  c.candidate_source_layer_id = 6;
  c.candidate_topk_blocks = 3;
  c.candidate_block_size = 2;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.engram_layer_ids = {1, 4};
  c.engram_num_embeddings = {660, 864};
  c.engram_max_ngram_size = 4;
  c.engram_vocab_size = 101;
  c.engram_n_heads = 2;
  c.engram_head_dim = 32;
  c.engram_pad_token_id = 2;
  c.engram_compressed_vocab_size = 256;
  c.num_nextn_predict_layers = 3;
  c.n_mtp_layers = 3;
  c.dspark_block_size = 5;
  c.dspark_noise_token_id = 500;
  c.dspark_target_layer_ids = {9, 10, 11};
  c.dspark_markov_rank = 16;
  c.dspark_n_routed_experts = 4;
  c.dspark_num_experts_per_tok = 2;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  c.vision = VisionConfig{2, 64, 2, 128, 14, 10000.0, 3, 32, 7056, 0.0};
  return c;
}

Result<ModelConfig> named_test_config(const std::string& name) {
  if (name == "tiny-v4f") return tiny_v4_flash_config();
  if (name == "tiny-short") return tiny_short_config();
  if (name == "micro") return micro_config();
  if (name == "tiny-v41") return tiny_v41_config();
  return invalid_argument("unknown test config '{}' (expected tiny-v4f, tiny-short, micro or tiny-v41)", name);
}

}  // namespace deepinfer::loader
