// The V4.1-Flash tensor inventory (model_v41_flash.md §9 names, dtypes and scale grids), derived
// from the config for any size. For the released config it lists exactly the 96,085 tensors the
// headers show; that count also settles that DSpark stages carry `ffn.gate.bias_vl` like the
// backbone (96,082 without it).
#include <fmt/format.h>

#include "loader/inventory.h"
#include "loader/inventory_builder.h"

namespace deepinfer::loader {
namespace {

using tensor::DType;

class V41Builder : public detail::InventoryBuilder {
 public:
  explicit V41Builder(const ModelConfig& c) : InventoryBuilder(c) {}

  // An FP8 E4M3 row table with one UE8M0 scale per 32 values of a row (Engram, §4.2): stored
  // like a 1 x 32 block-scaled linear, so binding and dequantisation reuse LinearWeight.
  void fp8_row_table(const std::string& name, int64_t rows, int64_t width) {
    ParamSpec p = linear(name, rows, width);
    p.format = tensor::WeightFormat::kFp8Block;
    p.block_out = 1;
    p.block_in = 32;
    p.stddev = 1.0f;
    params.push_back(p);
  }

  void attention(const std::string& p, int64_t layer) {
    const int64_t D = c_.hidden_size, H = c_.num_attention_heads, d = c_.head_dim, Q = c_.q_lora_rank;
    plain(p + "attn.attn_sink", DType::kF32, {H}, InitKind::kNormal, 1.0f);
    fp8_linear(p + "attn.wq_a.weight", Q, D);
    norm(p + "attn.q_norm.weight", Q);
    fp8_linear(p + "attn.wq_b.weight", H * d, Q);
    fp8_linear(p + "attn.wkv.weight", d, D);
    norm(p + "attn.kv_norm.weight", d);
    fp8_linear(p + "attn.wo_a.weight", c_.o_groups * c_.o_lora_rank, H * d / c_.o_groups);
    fp8_linear(p + "attn.wo_b.weight", D, c_.o_groups * c_.o_lora_rank);
    if (layer < 0) return;  // DSpark stage: window-only
    if (c_.is_kv_source(layer)) {
      bf16_linear(p + "attn.compressor.wkv.weight", d, D);
      if (c_.ratio(layer) > 1) bf16_linear(p + "attn.compressor.wgate.weight", d, D);  // ratio 1: no pooling
      norm(p + "attn.compressor.norm.weight", d);
    }
    if (c_.is_index_source(layer)) {
      fp8_linear(p + "attn.indexer.wq_b.weight", c_.index_n_heads * c_.index_head_dim, Q);
      bf16_linear(p + "attn.indexer.weights_proj.weight", c_.index_n_heads, D);
    }
    if (c_.is_kv_source(layer)) {  // index keys derive from the source's own latent
      bf16_linear(p + "attn.indexer.wk.weight", c_.index_head_dim, d);
      norm(p + "attn.indexer.k_norm.weight", c_.index_head_dim);
    }
  }

  void moe(const std::string& p, int64_t n_experts) {
    const int64_t D = c_.hidden_size, F = c_.moe_intermediate_size;
    bf16_linear(p + "ffn.gate.weight", n_experts, D);
    plain(p + "ffn.gate.bias", DType::kF32, {n_experts}, InitKind::kNormal, 0.01f);
    plain(p + "ffn.gate.bias_vl", DType::kF32, {n_experts}, InitKind::kNormal, 0.01f);
    for (int64_t e = 0; e < n_experts; ++e) {
      const std::string ep = fmt::format("{}ffn.experts.{}.", p, e);
      expert_linear(ep + "w1.weight", F, D);
      expert_linear(ep + "w2.weight", D, F);
      expert_linear(ep + "w3.weight", F, D);
    }
    if (c_.n_shared_experts > 0) {
      fp8_linear(p + "ffn.shared_experts.w1.weight", F, D);
      fp8_linear(p + "ffn.shared_experts.w2.weight", D, F);
      fp8_linear(p + "ffn.shared_experts.w3.weight", F, D);
    }
  }

  void engram(const std::string& p, int64_t layer) {
    const int idx = c_.engram_index(layer);
    if (idx < 0) return;
    const int64_t D = c_.hidden_size, hc = c_.hc_mult;
    const int64_t n_cols = (c_.engram_max_ngram_size - 1) * c_.engram_n_heads;
    fp8_row_table(p + "engram.embed.weight", c_.engram_num_embeddings[static_cast<size_t>(idx)], c_.engram_head_dim);
    fp8_linear(p + "engram.wkv.weight", D * (hc + 1), n_cols * c_.engram_head_dim);
    plain(p + "engram.q_weight", DType::kF32, {hc, D}, InitKind::kNormWeight, 0.1f);
    plain(p + "engram.k_weight", DType::kF32, {hc, D}, InitKind::kNormWeight, 0.1f);
  }

  // layer >= 0: backbone layer; layer < 0: DSpark stage (window-only attention, own MoE size).
  void block(const std::string& p, int64_t layer) {
    const int64_t D = c_.hidden_size;
    hc(p, "attn");
    hc(p, "ffn");
    norm(p + "attn_norm.weight", D);
    norm(p + "ffn_norm.weight", D);
    attention(p, layer);
    moe(p, layer < 0 ? c_.dspark_n_routed_experts : c_.n_routed_experts);
    if (layer >= 0) engram(p, layer);
  }

  void dspark(int64_t j) {
    const int64_t D = c_.hidden_size, V = c_.vocab_size, rank = c_.dspark_markov_rank;
    const std::string p = mtp_prefix(j);
    block(p, -1);
    if (j == 0) {
      fp8_linear(p + "main_proj.weight", D, static_cast<int64_t>(c_.dspark_target_layer_ids.size()) * D);
      norm(p + "main_norm.weight", D);
    }
    if (j == c_.n_mtp_layers - 1) {
      norm(p + "norm.weight", D);
      plain(p + "markov_head.embed.weight", DType::kBF16, {V, rank}, InitKind::kNormal, 1.0f);
      bf16_linear(p + "markov_head.head.weight", V, rank);
      bf16_linear(p + "confidence_head.proj.weight", 1, D + rank);
    }
  }

  void vision() {
    const VisionConfig& v = c_.vision;
    if (v.num_hidden_layers == 0) return;
    const int64_t Vd = v.hidden_size, I = v.intermediate_size, D = c_.hidden_size;
    const int64_t patch = 3 * v.patch_size * v.patch_size;
    bf16_linear("vision.patch_embed.proj.weight", Vd, patch);
    plain("vision.patch_embed.proj.bias", DType::kBF16, {Vd}, InitKind::kNormal, 0.02f);
    for (int64_t i = 0; i < v.num_hidden_layers; ++i) {
      const std::string b = fmt::format("vision.blocks.{}.", i);
      norm(b + "norm1.weight", Vd);
      norm(b + "norm2.weight", Vd);
      bf16_linear(b + "attn.wqkv.weight", 3 * Vd, Vd);
      plain(b + "attn.wqkv.bias", DType::kBF16, {3 * Vd}, InitKind::kNormal, 0.02f);
      bf16_linear(b + "attn.wo.weight", Vd, Vd);
      plain(b + "attn.wo.bias", DType::kBF16, {Vd}, InitKind::kNormal, 0.02f);
      bf16_linear(b + "mlp.w1.weight", 2 * I, Vd);  // fused gate | up
      bf16_linear(b + "mlp.w2.weight", Vd, I);
    }
    norm("vision.norm.weight", Vd);
    const int64_t unshuffled = Vd * v.downsample_ratio * v.downsample_ratio;
    bf16_linear("aligner.w1.weight", D, unshuffled);
    plain("aligner.w1.bias", DType::kBF16, {D}, InitKind::kNormal, 0.02f);
    bf16_linear("aligner.w2.weight", D, D);
    plain("aligner.w2.bias", DType::kBF16, {D}, InitKind::kNormal, 0.02f);
    for (const char* name : {"image_start", "image_end", "image_newline"}) {
      plain(name, DType::kBF16, {D}, InitKind::kNormal, 1.0f);
    }
  }
};

}  // namespace

std::vector<ParamSpec> param_inventory_v41(const ModelConfig& c) {
  V41Builder b(c);
  const int64_t D = c.hidden_size;
  b.plain("embed.weight", DType::kBF16, {c.vocab_size, D}, InitKind::kNormal, 1.0f);
  b.bf16_linear("head.weight", c.vocab_size, D);
  b.norm("norm.weight", D);  // no hc_head: the final collapse uses the last FFN pre (§5)
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) b.block(layer_prefix(l), l);
  for (int64_t j = 0; j < c.n_mtp_layers; ++j) b.dspark(j);
  b.vision();
  return b.params;
}

}  // namespace deepinfer::loader
