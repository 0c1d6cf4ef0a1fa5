#include "loader/weight_binding.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "loader/binder.h"
#include "loader/inventory.h"

namespace deepinfer::loader {
namespace {

using detail::Binder;
using detail::bind_expert;
using detail::bind_hc;

HcHeadWeights bind_hc_head(const Binder& b, const std::string& p) {
  return {b.tensor(p + "hc_head_fn"), b.tensor(p + "hc_head_base"), b.tensor(p + "hc_head_scale")};
}

CompressorWeights bind_compressor(const Binder& b, const std::string& p) {
  return {b.tensor(p + "ape"), b.linear(p + "wkv.weight"), b.linear(p + "wgate.weight"), b.tensor(p + "norm.weight")};
}

BlockWeights bind_block(const Binder& b, const ModelConfig& c, const std::string& p, int ratio, bool hash) {
  BlockWeights w;
  w.ratio = ratio;
  w.hc_attn = bind_hc(b, p, "attn");
  w.hc_ffn = bind_hc(b, p, "ffn");
  w.attn_norm = b.tensor(p + "attn_norm.weight");
  w.ffn_norm = b.tensor(p + "ffn_norm.weight");
  AttentionWeights& a = w.attn;
  a.sink = b.tensor(p + "attn.attn_sink");
  a.wq_a = b.linear(p + "attn.wq_a.weight");
  a.q_norm = b.tensor(p + "attn.q_norm.weight");
  a.wq_b = b.linear(p + "attn.wq_b.weight");
  a.wkv = b.linear(p + "attn.wkv.weight");
  a.kv_norm = b.tensor(p + "attn.kv_norm.weight");
  a.wo_a = b.linear(p + "attn.wo_a.weight");
  a.wo_b = b.linear(p + "attn.wo_b.weight");
  if (ratio > 0) a.compressor = bind_compressor(b, p + "attn.compressor.");
  if (ratio == 4) {
    a.indexer = IndexerWeights{b.linear(p + "attn.indexer.wq_b.weight"),
                               b.linear(p + "attn.indexer.weights_proj.weight"),
                               bind_compressor(b, p + "attn.indexer.compressor.")};
  }
  MoeWeights& m = w.ffn;
  m.gate = b.linear(p + "ffn.gate.weight");
  if (hash) {
    m.tid2eid = b.tensor(p + "ffn.gate.tid2eid");
  } else {
    m.bias = b.tensor(p + "ffn.gate.bias");
  }
  for (int64_t e = 0; e < c.n_routed_experts; ++e) {
    m.experts.push_back(bind_expert(b, fmt::format("{}ffn.experts.{}.", p, e)));
  }
  if (c.n_shared_experts > 0) m.shared = bind_expert(b, p + "ffn.shared_experts.");
  return w;
}

}  // namespace

std::optional<TensorView> CheckpointSource::get(const std::string& name) const {
  auto ref = ckpt_.find(name);
  if (!ref) return std::nullopt;
  const TensorInfo& info = *ref->info;
  return TensorView::contiguous(const_cast<uint8_t*>(ref->data), info.dtype, info.shape.data(),
                                static_cast<int>(info.shape.size()));
}

std::string CheckpointSource::where(const std::string& name) const {
  auto ref = ckpt_.find(name);
  return ref ? ref->file->path() : "";
}

Result<ModelWeights> bind_weights(const ModelConfig& c, const TensorSource& source) {
  if (c.family != ModelFamily::kV4) {
    return invalid_argument("bind_weights: {} checkpoints bind with bind_weights_v41", model_family_name(c.family));
  }
  Binder b(c, source);
  DI_RETURN_IF_ERROR(b.check());
  ModelWeights w;
  w.embed = b.tensor("embed.weight");
  w.head = b.linear("head.weight");
  w.norm = b.tensor("norm.weight");
  w.hc_head = bind_hc_head(b, "");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    w.layers.push_back(bind_block(b, c, layer_prefix(l), c.ratio(l), c.is_hash_layer(l)));
  }
  const bool dspark = c.dspark_block_size > 0;
  for (int64_t j = 0; j < c.n_mtp_layers; ++j) {
    const std::string p = mtp_prefix(j);
    MtpWeights m;
    m.block = bind_block(b, c, p, 0, /*hash=*/false);
    if (!dspark) {
      m.e_proj = b.linear(p + "e_proj.weight");
      m.h_proj = b.linear(p + "h_proj.weight");
      m.enorm = b.tensor(p + "enorm.weight");
      m.hnorm = b.tensor(p + "hnorm.weight");
      m.norm = b.tensor(p + "norm.weight");
      m.hc_head = bind_hc_head(b, p);
    } else {
      if (j == 0) {
        m.main_proj = b.linear(p + "main_proj.weight");
        m.main_norm = b.tensor(p + "main_norm.weight");
      }
      if (j == c.n_mtp_layers - 1) {
        m.norm = b.tensor(p + "norm.weight");
        m.hc_head = bind_hc_head(b, p);
        m.markov_w1 = b.tensor(p + "markov_head.markov_w1.weight");
        m.markov_w2 = b.tensor(p + "markov_head.markov_w2.weight");
        m.confidence_proj = b.tensor(p + "confidence_head.proj.weight");
      }
    }
    w.mtp.push_back(std::move(m));
  }
  return w;
}

}  // namespace deepinfer::loader
