#include "loader/inventory.h"
#include "loader/inventory_builder.h"

#include <cmath>

#include <fmt/format.h>

namespace deepinfer::loader {
namespace {

using tensor::DType;
using tensor::WeightFormat;

class Builder : public detail::InventoryBuilder {
 public:
  explicit Builder(const ModelConfig& c) : InventoryBuilder(c) {}

  void compressor(const std::string& prefix, int ratio, int64_t dc) {
    const int64_t width = (ratio == 4 ? 2 : 1) * dc;  // overlapped windows need two series
    plain(prefix + "ape", DType::kF32, {ratio, width}, InitKind::kNormal, 0.1f);
    bf16_linear(prefix + "wkv.weight", width, c_.hidden_size);
    bf16_linear(prefix + "wgate.weight", width, c_.hidden_size);
    norm(prefix + "norm.weight", dc);
  }

  // The parameters every V4 block has (main layers, MTP and draft stages).
  void block(const std::string& p, int ratio, bool hash, int64_t n_experts) {
    const int64_t D = c_.hidden_size, H = c_.num_attention_heads, d = c_.head_dim;
    hc(p, "attn");
    hc(p, "ffn");
    norm(p + "attn_norm.weight", D);
    norm(p + "ffn_norm.weight", D);
    plain(p + "attn.attn_sink", DType::kF32, {H}, InitKind::kNormal, 1.0f);
    fp8_linear(p + "attn.wq_a.weight", c_.q_lora_rank, D);
    norm(p + "attn.q_norm.weight", c_.q_lora_rank);
    fp8_linear(p + "attn.wq_b.weight", H * d, c_.q_lora_rank);
    fp8_linear(p + "attn.wkv.weight", d, D);
    norm(p + "attn.kv_norm.weight", d);
    fp8_linear(p + "attn.wo_a.weight", c_.o_groups * c_.o_lora_rank, H * d / c_.o_groups);
    fp8_linear(p + "attn.wo_b.weight", D, c_.o_groups * c_.o_lora_rank);
    if (ratio > 0) compressor(p + "attn.compressor.", ratio, d);
    if (ratio == 4) {
      fp8_linear(p + "attn.indexer.wq_b.weight", c_.index_n_heads * c_.index_head_dim, c_.q_lora_rank);
      bf16_linear(p + "attn.indexer.weights_proj.weight", c_.index_n_heads, D);
      compressor(p + "attn.indexer.compressor.", ratio, c_.index_head_dim);
    }
    bf16_linear(p + "ffn.gate.weight", n_experts, D);
    if (hash) {
      plain(p + "ffn.gate.tid2eid", DType::kI64, {c_.vocab_size, c_.num_experts_per_tok}, InitKind::kTid2eid, 0.0f);
      params.back().n_experts = n_experts;
    } else {
      plain(p + "ffn.gate.bias", DType::kF32, {n_experts}, InitKind::kNormal, 0.01f);
    }
    const int64_t F = c_.moe_intermediate_size;
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

};

}  // namespace

std::string ParamSpec::scale_name() const {
  const std::string suffix = ".weight";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return name.substr(0, name.size() - suffix.size()) + ".scale";
  }
  return name + ".scale";
}

std::string layer_prefix(int64_t layer) { return fmt::format("layers.{}.", layer); }
std::string mtp_prefix(int64_t block) { return fmt::format("mtp.{}.", block); }

std::vector<ParamSpec> param_inventory(const ModelConfig& c) {
  if (c.family == ModelFamily::kV41) return param_inventory_v41(c);
  Builder b(c);
  const int64_t D = c.hidden_size;
  b.plain("embed.weight", DType::kBF16, {c.vocab_size, D}, InitKind::kNormal, 1.0f);
  b.bf16_linear("head.weight", c.vocab_size, D);
  b.norm("norm.weight", D);
  b.hc_head("");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    b.block(layer_prefix(l), c.ratio(l), c.is_hash_layer(l), c.n_routed_experts);
  }
  const bool dspark = c.dspark_block_size > 0;
  for (int64_t j = 0; j < c.n_mtp_layers; ++j) {
    const std::string p = mtp_prefix(j);
    b.block(p, 0, /*hash=*/false, c.n_routed_experts);
    if (!dspark) {  // V3-style MTP block (model_v4_flash.md §4.11)
      b.fp8_linear(p + "e_proj.weight", D, D);
      b.fp8_linear(p + "h_proj.weight", D, D);
      b.norm(p + "enorm.weight", D);
      b.norm(p + "hnorm.weight", D);
      b.norm(p + "norm.weight", D);
      b.hc_head(p);
      continue;
    }
    // DSpark draft stages (model_v4_flash.md §9.2).
    if (j == 0) {
      const int64_t n_targets = static_cast<int64_t>(c.dspark_target_layer_ids.size());
      b.fp8_linear(p + "main_proj.weight", D, n_targets * D);
      b.norm(p + "main_norm.weight", D);
    }
    if (j == c.n_mtp_layers - 1) {
      b.norm(p + "norm.weight", D);
      b.hc_head(p);
      b.plain(p + "markov_head.markov_w1.weight", DType::kBF16, {c.vocab_size, c.dspark_markov_rank},
              InitKind::kNormal, 1.0f);
      b.plain(p + "markov_head.markov_w2.weight", DType::kF32, {c.vocab_size, c.dspark_markov_rank},
              InitKind::kNormal, 1.0f / std::sqrt(static_cast<float>(c.dspark_markov_rank)));
      b.plain(p + "confidence_head.proj.weight", DType::kF32, {1, D + c.dspark_markov_rank},
              InitKind::kNormal, 1.0f / std::sqrt(static_cast<float>(D)));
    }
  }
  return b.params;
}

std::vector<FileTensorSpec> file_tensors(const ParamSpec& p) {
  if (!p.is_linear) return {{p.name, p.dtype, p.shape}};
  switch (p.format) {
    case WeightFormat::kF32: return {{p.name, DType::kF32, {p.out, p.in}}};
    case WeightFormat::kBF16: return {{p.name, DType::kBF16, {p.out, p.in}}};
    case WeightFormat::kFp8Block:
      return {{p.name, DType::kF8E4M3, {p.out, p.in}},
              {p.scale_name(), DType::kF8E8M0,
               {(p.out + p.block_out - 1) / p.block_out, (p.in + p.block_in - 1) / p.block_in}}};
    case WeightFormat::kFp4Block:
      return {{p.name, DType::kI8, {p.out, p.in / 2}}, {p.scale_name(), DType::kF8E8M0, {p.out, p.in / 32}}};
  }
  return {};
}

}  // namespace deepinfer::loader
