// bind_weights_v41: ModelWeightsV41 from a TensorSource, by official V4.1 names (model_v41_flash.md
// §9), after the shared Binder validated the whole inventory.
#include <fmt/format.h>

#include "loader/binder.h"
#include "loader/weights_v41.h"

namespace deepinfer::loader {
namespace {

using detail::Binder;
using detail::bind_expert;
using detail::bind_hc;

AttentionWeightsV41 bind_attention(const Binder& b, const ModelConfig& c, const std::string& p, int64_t layer) {
  AttentionWeightsV41 a;
  a.sink = b.tensor(p + "attn.attn_sink");
  a.wq_a = b.linear(p + "attn.wq_a.weight");
  a.q_norm = b.tensor(p + "attn.q_norm.weight");
  a.wq_b = b.linear(p + "attn.wq_b.weight");
  a.wkv = b.linear(p + "attn.wkv.weight");
  a.kv_norm = b.tensor(p + "attn.kv_norm.weight");
  a.wo_a = b.linear(p + "attn.wo_a.weight");
  a.wo_b = b.linear(p + "attn.wo_b.weight");
  if (layer < 0) return a;
  if (c.is_kv_source(layer)) {
    CompressorWeightsV41 cw;
    cw.wkv = b.linear(p + "attn.compressor.wkv.weight");
    if (c.ratio(layer) > 1) cw.wgate = b.linear(p + "attn.compressor.wgate.weight");
    cw.norm = b.tensor(p + "attn.compressor.norm.weight");
    a.compressor = cw;
    a.index_keys = IndexKeyWeights{b.linear(p + "attn.indexer.wk.weight"), b.tensor(p + "attn.indexer.k_norm.weight")};
  }
  if (c.is_index_source(layer)) {
    a.indexer = IndexerWeightsV41{b.linear(p + "attn.indexer.wq_b.weight"),
                                  b.linear(p + "attn.indexer.weights_proj.weight")};
  }
  return a;
}

BlockWeightsV41 bind_block(const Binder& b, const ModelConfig& c, const std::string& p, int64_t layer) {
  BlockWeightsV41 w;
  w.layer = layer;
  w.hc_attn = bind_hc(b, p, "attn");
  w.hc_ffn = bind_hc(b, p, "ffn");
  w.attn_norm = b.tensor(p + "attn_norm.weight");
  w.ffn_norm = b.tensor(p + "ffn_norm.weight");
  w.attn = bind_attention(b, c, p, layer);
  MoeWeightsV41& m = w.ffn;
  m.gate = b.linear(p + "ffn.gate.weight");
  m.bias = b.tensor(p + "ffn.gate.bias");
  m.bias_vl = b.tensor(p + "ffn.gate.bias_vl");
  const int64_t n_experts = layer < 0 ? c.dspark_n_routed_experts : c.n_routed_experts;
  for (int64_t e = 0; e < n_experts; ++e) m.experts.push_back(bind_expert(b, fmt::format("{}ffn.experts.{}.", p, e)));
  if (c.n_shared_experts > 0) m.shared = bind_expert(b, p + "ffn.shared_experts.");
  if (layer >= 0 && c.is_engram_layer(layer)) {
    w.engram = EngramWeights{b.linear(p + "engram.embed.weight"), b.linear(p + "engram.wkv.weight"),
                             b.tensor(p + "engram.q_weight"), b.tensor(p + "engram.k_weight")};
  }
  return w;
}

VisionWeights bind_vision(const Binder& b, const ModelConfig& c) {
  VisionWeights v;
  v.patch_embed = b.linear("vision.patch_embed.proj.weight");
  v.patch_embed_bias = b.tensor("vision.patch_embed.proj.bias");
  for (int64_t i = 0; i < c.vision.num_hidden_layers; ++i) {
    const std::string p = fmt::format("vision.blocks.{}.", i);
    v.blocks.push_back({b.tensor(p + "norm1.weight"), b.tensor(p + "norm2.weight"), b.linear(p + "attn.wqkv.weight"),
                        b.tensor(p + "attn.wqkv.bias"), b.linear(p + "attn.wo.weight"), b.tensor(p + "attn.wo.bias"),
                        b.linear(p + "mlp.w1.weight"), b.linear(p + "mlp.w2.weight")});
  }
  v.norm = b.tensor("vision.norm.weight");
  v.aligner_w1 = b.linear("aligner.w1.weight");
  v.aligner_b1 = b.tensor("aligner.w1.bias");
  v.aligner_w2 = b.linear("aligner.w2.weight");
  v.aligner_b2 = b.tensor("aligner.w2.bias");
  v.image_start = b.tensor("image_start");
  v.image_end = b.tensor("image_end");
  v.image_newline = b.tensor("image_newline");
  return v;
}

}  // namespace

Result<ModelWeightsV41> bind_weights_v41(const ModelConfig& c, const TensorSource& source) {
  if (c.family != ModelFamily::kV41) return invalid_argument("bind_weights_v41: the config is not V4.1");
  Binder b(c, source);
  DI_RETURN_IF_ERROR(b.check());
  ModelWeightsV41 w;
  w.embed = b.tensor("embed.weight");
  w.head = b.linear("head.weight");
  w.norm = b.tensor("norm.weight");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) w.layers.push_back(bind_block(b, c, layer_prefix(l), l));
  for (int64_t j = 0; j < c.n_mtp_layers; ++j) {
    const std::string p = mtp_prefix(j);
    DsparkStageWeights s;
    s.block = bind_block(b, c, p, -1);
    if (j == 0) {
      s.main_proj = b.linear(p + "main_proj.weight");
      s.main_norm = b.tensor(p + "main_norm.weight");
    }
    if (j == c.n_mtp_layers - 1) {
      s.norm = b.tensor(p + "norm.weight");
      s.markov_embed = b.tensor(p + "markov_head.embed.weight");
      s.markov_head = b.linear(p + "markov_head.head.weight");
      s.confidence_proj = b.linear(p + "confidence_head.proj.weight");
    }
    w.dspark.push_back(std::move(s));
  }
  if (c.vision.num_hidden_layers > 0) w.vision = bind_vision(b, c);
  return w;
}

}  // namespace deepinfer::loader
