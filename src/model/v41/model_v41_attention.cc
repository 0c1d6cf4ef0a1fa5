// ModelV41 CSA2 attention (model_v41_flash.md §3): the KV-source update (compressor without APE,
// ratio 2 pooled / ratio 1 per token, index keys from the pre-RoPE latent, FP4 quantizers), and
// each layer's attention: query, FP8 window KV, the indexer (Full / Reindex, two-level candidates)
// or the reused top-k, sparse attention over window + the group's entries, grouped output.
#include <cmath>

#include "model/v41/model_v41.h"
#include "model/v41/step_v41.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

// Runs on every row of the step (also under compact prefill): the group's compressed KV and index
// keys must exist for every position.
void ModelV41::source_update(const loader::BlockWeightsV41& w, int64_t layer, KvState& state, Step& step,
                             const TensorView& a) {
  const loader::CompressorWeightsV41& cw = *w.attn.compressor;
  const loader::IndexKeyWeights& kw = *w.attn.index_keys;
  const int ratio = config_.ratio(layer);
  const int64_t T = step.full.n(), d = config_.head_dim, di = config_.index_head_dim;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  LayerState& ls = state.layer(layer);
  const ops::EmitPlan& plan = step.emit.at(ratio);
  TensorView latent;
  if (ratio > 1) {
    // Projections in F32 (the reference promotes ratio-2 compressor weights), softmax pooling of
    // each non-overlapping group per channel; an odd token waits in the slot's state.
    TensorView kv = ops_->alloc(DType::kF32, {T, d});
    TensorView score = ops_->alloc(DType::kF32, {T, d});
    ops_->linear_pair(a, cw.wkv, cw.wgate, kv, score, {});
    TensorView pooled = ops_->alloc(DType::kF32, {std::max<int64_t>(plan.n_emit, 1), d});
    ops_->compress(kv, score, zero_ape_.slice0(0, ratio), step.full.batch, plan, ops::CompressParams{ratio, false, d},
                   ls.comp.kv, ls.comp.score, pooled);
    if (plan.n_emit == 0) return;
    latent = alloc_act({plan.n_emit, d});
    ops_->convert(pooled.slice0(0, plan.n_emit), latent);
  } else {
    latent = alloc_act({T, d});  // ratio 1: every token is a group, in row order
    ops_->linear(a, cw.wkv, latent, {});
  }
  ops_->rms_norm(latent, cw.norm, eps, latent);
  const TensorView positions = step.emit_positions.at(ratio).slice0(0, plan.n_emit);
  ops::RopeParams rope{inv_freq_compress_, static_cast<int>(config_.qk_rope_head_dim)};
  // Index keys from the pre-RoPE latent (§3.2): k_norm(wk(latent)), RoPE, FP4 with UE8M0 / 32.
  TensorView keys = alloc_act({plan.n_emit, di});
  ops_->linear(latent, kw.wk, keys, {});
  ops_->rms_norm(keys, kw.k_norm, eps, keys);
  ops_->rope(keys, positions, rope);
  ops_->kv_fake_quant(keys, ops::KvQuantFormat::kFp4Pow2x32);
  ops_->store_rows(keys, plan, ls.idx_keys);
  // Main entries: RoPE at the group's first position, then FP4 with E4M3 / 16 (RoPE first, §3.4).
  ops_->rope(latent, positions, rope);
  ops_->kv_fake_quant(latent, ops::KvQuantFormat::kFp4E4m3x16);
  ops_->store_rows(latent, plan, ls.comp_rows);
}

TensorView ModelV41::attention(const loader::BlockWeightsV41& w, int64_t layer, KvState& state, Step& step,
                               const Rows& rows, const TensorView& a) {
  const loader::AttentionWeightsV41& aw = w.attn;
  const int64_t T = rows.n(), H = config_.num_attention_heads, d = config_.head_dim, Q = config_.q_lora_rank;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const int ratio = config_.ratio(layer);
  ops::RopeParams rope{ratio == 0 ? inv_freq_main_ : inv_freq_compress_, static_cast<int>(config_.qk_rope_head_dim)};

  // Query (no per-head norm in V4.1); q_lat also feeds the indexer query.
  TensorView q_lat = alloc_act({T, Q});
  ops_->linear(a, aw.wq_a, q_lat, fp8_act());
  ops_->rms_norm(q_lat, aw.q_norm, eps, q_lat);
  TensorView q = alloc_act({T, H, d});
  ops_->linear(q_lat, aw.wq_b, q.reshape({T, H * d}), fp8_act());
  ops_->rope(q, rows.batch.positions, rope);
  // Window KV: FP8 with UE8M0 per 32 over all dims, RoPE included (§3.4).
  TensorView kv = alloc_act({T, d});
  ops_->linear(a, aw.wkv, kv, fp8_act());
  ops_->norm_rope(kv, aw.kv_norm, eps, rows.batch.positions, rope);
  ops_->kv_fake_quant(kv, ops::KvQuantFormat::kFp8Pow2x32);

  ops::AttentionParams ap;
  ap.window = config_.sliding_window;
  ap.softmax_scale = 1.0f / std::sqrt(static_cast<float>(d));
  TensorView comp;
  if (ratio > 0) {
    const int src = config_.kv_source_of(layer);
    const LayerState& pool = state.layer(src);
    const int32_t rows_per_block = rows.batch.block_tokens / ratio;
    if (aw.indexer) {
      const int64_t Hi = config_.index_n_heads, di = config_.index_head_dim;
      TensorView qi = alloc_act({T, Hi, di});
      ops_->linear(q_lat, aw.indexer->wq_b, qi.reshape({T, Hi * di}), fp8_act());
      ops_->rope(qi, rows.batch.positions, rope);
      ops_->kv_fake_quant(qi.reshape({T * Hi, di}), ops::KvQuantFormat::kFp4Pow2x32);
      TensorView wi = alloc_act({T, Hi});
      ops_->linear(a, aw.indexer->weights_proj, wi, {});  // plain BF16 GEMM in the reference
      ops::IndexerV41Params ip;
      ip.ratio = ratio;
      ip.rows_per_block = rows_per_block;
      ip.score_scale = 1.0f / std::sqrt(static_cast<float>(di));
      ip.weight_scale = 1.0f / std::sqrt(static_cast<float>(Hi));
      const int64_t cand = config_.candidate_source_layer_id;
      if (cand >= 0 && layer >= cand) {
        ip.candidates = layer == cand ? ops::IndexerV41Params::Candidates::kPublish
                                      : ops::IndexerV41Params::Candidates::kRestrict;
        ip.candidate_topk_blocks = static_cast<int32_t>(config_.candidate_topk_blocks);
        ip.candidate_block_size = static_cast<int32_t>(config_.candidate_block_size);
        if (layer == cand) step.candidates = ops_->alloc(DType::kI32, {T, config_.candidate_topk_blocks});
      }
      step.topk = ops_->alloc(DType::kI32, {T, config_.index_topk});
      ops_->indexer_topk_v41(qi, wi, pool.idx_keys, rows.batch, ip, step.candidates, step.topk);
    }
    // Reuse layers read the latest index source's top-k (validated to be of the same group).
    ap.ratio = ratio;
    ap.rows_per_block = rows_per_block;
    comp = pool.comp_rows;
  }
  TensorView o = alloc_act({T, H, d});
  LayerState& ls = state.layer(layer);
  ops_->sparse_attention(q, kv, ls.window, comp, ratio > 0 ? step.topk : TensorView{}, aw.sink, rows.batch, ap, o);
  ops_->window_store(kv, rows.batch, ls.window);
  return project_out(aw, rows, o, rope);
}

// De-rotate the value's RoPE part at the query position, then the grouped low-rank output.
TensorView ModelV41::project_out(const loader::AttentionWeightsV41& aw, const Rows& rows, TensorView o,
                                 const ops::RopeParams& rope) {
  const int64_t T = rows.n(), H = config_.num_attention_heads, d = config_.head_dim;
  const int64_t G = config_.o_groups, R = config_.o_lora_rank, D = config_.hidden_size;
  ops::RopeParams inverse = rope;
  inverse.inverse = true;
  ops_->rope(o, rows.batch.positions, inverse);
  TensorView z = alloc_act({T, G, R});
  ops_->linear_grouped(o.reshape({T, G, H / G * d}), aw.wo_a, z, {});  // reference: BF16 wo_a, no act quant
  TensorView out = alloc_act({T, D});
  ops_->linear(z.reshape({T, G * R}), aw.wo_b, out, fp8_act());
  return out;
}

}  // namespace deepinfer::model
