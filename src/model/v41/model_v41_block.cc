// ModelV41 layer loop (model_v41_flash.md §2, §5, §6): per layer Engram (before the block), the
// attention input collapsed with the previous sublayer's pre, the KV-source update on every row,
// then — from the CED decoder on — the kept rows only; single-pass mHC around attention and MoE.
// Shape comments: T = rows of the current row set, D = hidden, hc = streams.
#include <algorithm>

#include "model/v41/model_v41.h"
#include "model/v41/step_v41.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

namespace {

// Rows `rows` of x [T, w...] as a new [n, w...] tensor (same dtype).
TensorView gather(ops::Ops* ops, const TensorView& x, const std::vector<int32_t>& rows) {
  const int64_t T = x.shape[0], w = x.numel() / T, n = static_cast<int64_t>(rows.size());
  TensorView out = ops->alloc(x.dtype, {n, w});
  ops->gather_rows(x.reshape({T, w}), rows, out);
  return out;
}

}  // namespace

TensorView ModelV41::run_layers(Step& step, KvState& state, TensorView x, TensorView& pre, Capture* capture) {
  const int64_t D = config_.hidden_size, hc = config_.hc_mult;
  const int split = config_.decoder_begin_layer();
  const Rows* rows = &step.full;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const loader::BlockWeightsV41& w = weights_.layers[static_cast<size_t>(l)];
    capture_draft_input(l, step, x);
    if (w.engram) x = engram(*w.engram, l, step, x);
    // Attention input: the streams collapsed with the previous sublayer's pre (§5).
    TensorView a = alloc_act({x.shape[0], D});
    ops_->hc_collapse(x, pre, a);
    ops_->rms_norm(a, w.attn_norm, static_cast<float>(config_.rms_norm_eps), a);
    if (config_.is_kv_source(l)) source_update(w, l, state, step, a);  // every row: G/KG exist for all positions
    if (l == split && step.cut) {
      const int64_t n = static_cast<int64_t>(step.dec_rows.size());
      if (n == 0) return alloc_act({1, hc, D}).slice0(0, 0);  // every row lies before its prompt's kept tail
      x = gather(ops_, x, step.dec_rows).reshape({n, hc, D});
      a = gather(ops_, a, step.dec_rows);
      pre = gather(ops_, pre, step.dec_rows);
      rows = &step.dec;
    }
    x = block_tail(w, l, state, step, *rows, x, a, pre);
    if (capture) {
      const int64_t T = x.shape[0];
      std::vector<float> host(static_cast<size_t>(T * hc * D));
      TensorView f32 = ops_->alloc(DType::kF32, {T, hc, D});
      ops_->convert(x, f32);
      ops_->copy(f32, TensorView::contiguous(host.data(), DType::kF32, {T, hc, D}));
      capture->after_layer.push_back(std::move(host));
    }
  }
  return x;
}

// Everything of a block after its attention input: mHC mixes, attention, MoE. `pre` enters as the
// previous sublayer's pre and leaves as this block's FFN pre. layer < 0 is DSpark stage -layer - 1.
TensorView ModelV41::block_tail(const loader::BlockWeightsV41& w, int64_t layer, KvState& state, Step& step,
                                const Rows& rows, const TensorView& x, const TensorView& a, TensorView& pre) {
  const int64_t T = rows.n(), D = config_.hidden_size, hc = config_.hc_mult;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  TensorView attn_pre = ops_->alloc(DType::kF32, {T, hc});
  TensorView post = ops_->alloc(DType::kF32, {T, hc});
  TensorView comb = ops_->alloc(DType::kF32, {T, hc, hc});
  ops_->hc_mix(x, w.hc_attn, hc_params_, attn_pre, post, comb);
  // layer < 0: DSpark stage -layer - 1 (window-only block attention over its ring + the block).
  const TensorView o = layer >= 0 ? attention(w, layer, state, step, rows, a)
                                  : draft_attention(w, static_cast<int>(-layer - 1), state, rows, a);
  TensorView x1 = alloc_act({T, hc, D});
  ops_->hc_post(o, x, post, comb, x1);

  TensorView ffn_pre = ops_->alloc(DType::kF32, {T, hc});
  ops_->hc_mix(x1, w.hc_ffn, hc_params_, ffn_pre, post, comb);
  TensorView b = alloc_act({T, D});
  ops_->hc_collapse(x1, attn_pre, b);  // the FFN collapses with the attention's pre
  ops_->rms_norm(b, w.ffn_norm, eps, b);
  const int64_t k = layer >= 0 ? config_.num_experts_per_tok : config_.dspark_num_experts_per_tok;
  const TensorView f = moe(w.ffn, k, rows, b);
  TensorView x2 = alloc_act({T, hc, D});
  ops_->hc_post(f, x1, post, comb, x2);
  pre = ffn_pre;
  return x2;
}

TensorView ModelV41::moe(const loader::MoeWeightsV41& w, int64_t k, const Rows& rows, const TensorView& b) {
  const int64_t T = rows.n(), D = config_.hidden_size, F = config_.moe_intermediate_size;
  const int64_t E = static_cast<int64_t>(w.experts.size());
  ops::MoeParams mp;
  mp.n_experts_per_tok = k;
  mp.route_scale = static_cast<float>(config_.routed_scaling_factor);
  mp.swiglu_limit = static_cast<float>(config_.swiglu_limit);
  mp.act_quant_block = fp8_act().act_quant_block;
  // The shared expert before the routed ones, so that their combine can add it (out = routed (F32)
  // + shared, rounded once) — in a side region beside the router and the routing (V4's block does
  // the same).
  TensorView y;
  if (w.shared) {
    ops_->side_begin();
    TensorView g = alloc_act({T, F});
    TensorView u = alloc_act({T, F});
    ops_->linear_pair(b, w.shared->w1, w.shared->w3, g, u, fp8_act());
    ops_->swiglu(g, u, mp.swiglu_limit, g);
    y = alloc_act({T, D});
    ops_->linear(g, w.shared->w2, y, fp8_act());
    ops_->side_end();
  }
  TensorView logits = ops_->alloc(DType::kF32, {T, E});
  ops_->linear(b, w.gate, logits, {});  // router in F32 (gate_temp is validated to be 1)
  // Routing and experts of rows x [n, D] (router logits lg [n, E], shared-expert output ys, token
  // ids [n]) into o [n, D]. The routing rides in the MoE call (a backend may route inside its
  // grouping launch), which joins the shared expert's region (`lane`) just before its combine.
  auto route = [&](const TensorView& x, const TensorView& lg, const TensorView& ys, const TensorView& ids,
                   const TensorView& bias, const TensorView& o, int lane) {
    const int64_t n = x.shape[0];
    ops_->moe_route_experts_out(
        {lg, bias, TensorView{}, ids, ops_->alloc(DType::kI32, {n, k}), ops_->alloc(DType::kF32, {n, k})}, x,
        w.experts, mp, ys, o, lane);
  };
  TensorView out = alloc_act({T, D});
  if (rows.image_rows.empty()) {  // text tokens select with `bias`
    route(b, logits, y, rows.batch.token_ids, w.bias, out, w.shared ? 0 : -1);
    return out;
  }
  // Image-span rows select with `bias_vl` (§6). Every row routes and runs its experts on its own
  // (batch invariance), so the text rows and the image rows go as two sets, each with its bias,
  // and their outputs are scattered back into place.
  if (w.shared) ops_->side_join(0);
  std::vector<int32_t> text_rows;
  for (int32_t r = 0, i = 0; r < static_cast<int32_t>(T); ++r) {
    if (i < static_cast<int32_t>(rows.image_rows.size()) && rows.image_rows[static_cast<size_t>(i)] == r) {
      ++i;
    } else {
      text_rows.push_back(r);
    }
  }
  for (const bool image : {false, true}) {
    const std::vector<int32_t>& subset = image ? rows.image_rows : text_rows;
    const int64_t n = static_cast<int64_t>(subset.size());
    if (n == 0) continue;
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[i] = rows.token_ids[static_cast<size_t>(subset[i])];
    TensorView out_s = alloc_act({n, D});
    route(gather(ops_, b, subset), gather(ops_, logits, subset), w.shared ? gather(ops_, y, subset) : TensorView{},
          ops_->upload(ids.data(), DType::kI32, {n}), image ? w.bias_vl : w.bias, out_s, -1);
    ops_->scatter_rows(out_s, subset, out);
  }
  return out;
}

}  // namespace deepinfer::model
