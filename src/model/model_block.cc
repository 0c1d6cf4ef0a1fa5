// One DeepSeek-V4 block (model_v4_flash.md §4.1): mHC-wrapped attention and MoE sublayers.
// Shape comments use T = tokens in the step, D = hidden, hc = streams.
#include <cmath>

#include "model/model.h"
#include "model/step.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

void Model::block(const loader::BlockWeights& w, int64_t layer, LayerState& state, Step& step, const TensorView& x,
                  const TensorView& scratch) {
  const int64_t T = step.batch.n_tokens, D = config_.hidden_size, hc = config_.hc_mult;
  const size_t mark = ops_->workspace_mark();
  const float eps = static_cast<float>(config_.rms_norm_eps);
  TensorView u = ops_->alloc(act_dtype(), {T, D});          // collapsed streams
  TensorView post = ops_->alloc(DType::kF32, {T, hc});
  TensorView comb = ops_->alloc(DType::kF32, {T, hc, hc});
  // u's copy FP8-quantised as the sublayers' FP8 projections read it (official numerics), written
  // by the mHC calls: quantised once instead of by every GEMM that reads it.
  ops::QuantCopy uq;
  if (const int qb = fp8_act().act_quant_block; qb > 0) uq = {ops_->alloc(DType::kBF16, {T, D}), qb};
  ops_->hc_pre_norm(x, w.hc_attn, hc_params_, w.attn_norm, eps, u, post, comb, uq);  // a = RMSNorm(u)
  const TensorView o = attention(w, layer, state, step, u, uq);  // [T, D]
  const TensorView& x1 = scratch;                                // [T, hc, D] streams after attention
  // x1 = hc_post(o, x), then b = RMSNorm(u) of x1 (one call: a backend may fold the two).
  ops_->hc_post_pre_norm(o, x, post, comb, x1, w.hc_ffn, hc_params_, w.ffn_norm, eps, u, uq);
  const TensorView f = moe(w, step, u, uq);                       // [T, D]
  ops_->hc_post(f, x1, post, comb, x);                        // back into x: the block runs in place
  ops_->workspace_release(mark);
}

TensorView Model::attention(const loader::BlockWeights& w, int64_t layer, LayerState& state, Step& step,
                            const TensorView& a, const ops::QuantCopy& aq) {
  const loader::AttentionWeights& aw = w.attn;
  const int64_t T = step.batch.n_tokens, D = config_.hidden_size, H = config_.num_attention_heads;
  const int64_t d = config_.head_dim, Q = config_.q_lora_rank, G = config_.o_groups, R = config_.o_lora_rank;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const bool official = options_.numerics == Numerics::kOfficial;
  const int ratio = w.ratio;
  ops::RopeParams rope{ratio == 0 ? inv_freq_main_ : inv_freq_compress_, static_cast<int>(config_.qk_rope_head_dim)};

  // The compressors read only `a` and write only their own state and pools, which nothing reads
  // before the top-k and the attention: a side region, run beside the query path where the backend
  // can (at batch 1 every kernel of both chains is latency bound).
  const bool side = ratio > 0 || aw.indexer;
  TensorView idx_weights;  // [T, index heads]: the indexer's head weights (from `a` too)
  if (side) {
    ops_->side_begin();
    if (ratio > 0) compressor(*aw.compressor, state.comp, ratio, d, /*indexer=*/false, step, a, state.comp_rows);
    if (aw.indexer) {
      compressor(aw.indexer->compressor, state.idx_comp, ratio, config_.index_head_dim, /*indexer=*/true, step, a,
                 state.idx_keys);
      idx_weights = ops_->alloc(act_dtype(), {T, config_.index_n_heads});  // head weights, scaled inside the top-k
      ops_->linear(a, aw.indexer->weights_proj, idx_weights, {});
    }
    ops_->side_end();
  }

  // Query: low-rank latent, then per-head unweighted RMS norm and tail RoPE. The KV latent below
  // is projected from the same input in the same pass. The latent's norm also quantises it as
  // its two FP8 projections (wq_b, the indexer's) read it, so they take it as it is.
  TensorView q_lat = ops_->alloc(act_dtype(), {T, Q});
  TensorView kv = ops_->alloc(act_dtype(), {T, d});
  const Fp8Input ain = fp8_input(a, aq);
  ops_->linear_pair(ain.x, aw.wq_a, aw.wkv, q_lat, kv, ain.options);
  const int qb = fp8_act().act_quant_block;  // 0 in plain numerics: nothing to quantise
  ops_->rms_norm_quant(q_lat, aw.q_norm, eps, q_lat, qb);

  // Side lane 1, beside the main query's wq_b and norm (at batch 1 each is a latency-bound chain):
  // the shared K = V latent row of each token (its non-RoPE dims FP8-quantised as cached), and the
  // indexer's query (heads of q_lat, quantised by its norm; RoPE, then the Hadamard FP4 rounding).
  TensorView qi;  // [T, index heads, index head dim]
  const int64_t Hi = config_.index_n_heads, di = config_.index_head_dim;
  ops_->side_begin(1);
  ops_->norm_rope(kv, aw.kv_norm, eps, step.batch.positions, rope, official ? config_.n_nope_dims() : 0, 64);
  if (aw.indexer) {
    qi = ops_->alloc(act_dtype(), {T, Hi, di});
    ops_->linear(q_lat, aw.indexer->wq_b, qi.reshape({T, Hi * di}), {0, qb});
    ops_->rope(qi, step.batch.positions, rope);
    if (official) ops_->hadamard_fp4_fake_quant(qi.reshape({T * Hi, di}));
  }
  ops_->side_end(1);
  TensorView q = ops_->alloc(act_dtype(), {T, H, d});
  ops_->linear(q_lat, aw.wq_b, q.reshape({T, H * d}), {0, qb});
  ops_->norm_rope(q, TensorView{}, eps, step.batch.positions, rope);  // unweighted per-head norm
  if (side) ops_->side_join();  // lane 0: the compressed rows and index keys
  ops_->side_join(1);           // the KV row and the index query

  TensorView comp_idx;
  if (aw.indexer) {
    comp_idx = ops_->alloc(DType::kI32, {T, config_.index_topk});
    ops_->indexer_topk(qi, idx_weights, state.idx_keys, step.batch, ratio, step.batch.block_tokens / ratio,
                       1.0f / std::sqrt(static_cast<float>(di * Hi)), comp_idx);
  }

  ops::AttentionParams ap;
  ap.window = config_.sliding_window;
  ap.ratio = ratio;
  ap.all_compressed = ratio > 0 && !aw.indexer;
  ap.rows_per_block = ratio > 0 ? step.batch.block_tokens / ratio : 0;
  ap.softmax_scale = 1.0f / std::sqrt(static_cast<float>(d));
  // The output's RoPE part de-rotated at the query position (in the attention call).
  ap.out_rope = rope;
  ap.out_rope.inverse = true;
  TensorView o = ops_->alloc(act_dtype(), {T, H, d});
  ops_->sparse_attention(q, kv, state.window, state.comp_rows, comp_idx, aw.sink, step.batch, ap, o);
  // The new rows into the window beside the output projections, which neither read the window
  // nor kv: off the critical path of a decode step (joined before the MoE opens its region).
  ops_->side_begin();
  ops_->window_store(kv, step.batch, state.window);
  ops_->side_end();

  // The grouped low-rank output.
  TensorView z = ops_->alloc(act_dtype(), {T, G, R});
  ops_->linear_grouped(o.reshape({T, G, H / G * d}), aw.wo_a, z, {});  // reference: BF16 wo_a, no act quant
  TensorView out = ops_->alloc(act_dtype(), {T, D});
  const TensorView zr = z.reshape({T, G * R});
  ops_->linear(zr, aw.wo_b, out, ops_->prequantise(zr, qb));  // z is read only by wo_b
  ops_->side_join();  // the window
  return out;
}

void Model::compressor(const tensor::CompressorWeights& w, const CompressorState& cs, int ratio, int64_t dc,
                       bool indexer, Step& step, const TensorView& a, const TensorView& pool) {
  const int64_t T = step.batch.n_tokens;
  const bool overlapped = ratio == 4;
  const int64_t width = (overlapped ? 2 : 1) * dc;
  // Projections in F32 on the (BF16-valued) normalised input, as the reference does.
  TensorView kv = ops_->alloc(DType::kF32, {T, width});
  TensorView score = ops_->alloc(DType::kF32, {T, width});
  ops_->linear_pair(a, w.wkv, w.wgate, kv, score, {});
  const ops::EmitPlan& plan = step.emit.at(ratio);
  const int64_t n = std::max<int64_t>(plan.n_emit, 1);
  TensorView pooled = ops_->alloc(DType::kF32, {n, dc});
  ops_->compress(kv, score, w.ape, step.batch, plan, ops::CompressParams{ratio, overlapped, dc}, cs.kv, cs.score,
                 pooled);
  if (plan.n_emit == 0) return;
  TensorView rows = ops_->alloc(act_dtype(), {plan.n_emit, dc});
  ops_->convert(pooled.slice0(0, plan.n_emit), rows);
  ops_->rms_norm(rows, w.norm, static_cast<float>(config_.rms_norm_eps), rows);
  ops::RopeParams rope{inv_freq_compress_, static_cast<int>(config_.qk_rope_head_dim)};
  ops_->rope(rows, step.emit_positions.at(ratio).slice0(0, plan.n_emit), rope);  // at each group's first position
  if (options_.numerics == Numerics::kOfficial) {
    if (indexer) {
      ops_->hadamard_fp4_fake_quant(rows);
    } else {
      ops_->fp8_fake_quant(rows, dc - config_.qk_rope_head_dim, 64);
    }
  }
  ops_->store_rows(rows, plan, pool);
}

TensorView Model::moe(const loader::BlockWeights& w, Step& step, const TensorView& b, const ops::QuantCopy& bq) {
  const loader::MoeWeights& mw = w.ffn;
  const int64_t T = step.batch.n_tokens, D = config_.hidden_size, E = config_.n_routed_experts;
  const int64_t k = config_.num_experts_per_tok, F = config_.moe_intermediate_size;
  ops::MoeParams mp;
  mp.n_experts_per_tok = k;
  mp.route_scale = static_cast<float>(config_.routed_scaling_factor);
  mp.swiglu_limit = static_cast<float>(config_.swiglu_limit);
  mp.act_quant_block = fp8_act().act_quant_block;
  // The shared expert before the routed ones, so that their combine can add it (out = routed (F32)
  // + shared, rounded once) — in a side region beside the router and the routing, which it does not
  // depend on, joined by the MoE call itself (which may run the routed experts beside it too).
  TensorView y;
  if (mw.shared) {
    ops_->side_begin();
    TensorView g = ops_->alloc(act_dtype(), {T, F});
    TensorView u = ops_->alloc(act_dtype(), {T, F});
    const Fp8Input bin = fp8_input(b, bq);
    ops_->linear_pair(bin.x, mw.shared->w1, mw.shared->w3, g, u, bin.options);
    // The hidden quantised by its SwiGLU as the down projection reads it.
    ops_->swiglu_quant(g, u, mp.swiglu_limit, g, mp.act_quant_block);
    y = ops_->alloc(act_dtype(), {T, D});
    ops_->linear(g, mw.shared->w2, y, {0, mp.act_quant_block});
    ops_->side_end();
  }
  TensorView logits = ops_->alloc(DType::kF32, {T, E});
  ops_->linear(b, mw.gate, logits, {});  // router in F32
  TensorView sel = ops_->alloc(DType::kI32, {T, k});
  TensorView weights = ops_->alloc(DType::kF32, {T, k});
  TensorView out = ops_->alloc(act_dtype(), {T, D});
  // The routing in the MoE call: a backend may route inside the launch that groups the pairs.
  ops_->moe_route_experts_out({logits, mw.bias, mw.tid2eid, step.batch.token_ids, sel, weights}, b, mw.experts, mp, y,
                              out, mw.shared ? 0 : -1);
  return out;
}

}  // namespace deepinfer::model
