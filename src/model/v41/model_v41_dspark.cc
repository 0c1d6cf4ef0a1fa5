// ModelV41 DSpark (model_v41_flash.md §7): forward() seeds each stage's window ring with
// kv_norm(wkv(main_x)) of the target rows, main_x = main_norm(main_proj(concat of the mean hc
// stream of the inputs of dspark_target_layer_ids)); mtp_forward() runs the three stages once over
// a draft block (bidirectional inside the block, the ring below it), then the shared LM head, the
// Markov head (greedy chain) and the confidence head. Not in transformers' port: checked by
// shape and self-consistency tests only.
#include <algorithm>
#include <cmath>

#include "model/v41/model_v41.h"
#include "model/v41/step_v41.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

namespace {

TensorView uniform_pre(ops::Ops* ops, int64_t T, int64_t hc) {
  std::vector<float> v(static_cast<size_t>(T * hc), 1.0f / static_cast<float>(hc));
  return ops->upload(v.data(), DType::kF32, {T, hc});
}

}  // namespace

void ModelV41::capture_draft_input(int64_t layer, Step& step, const TensorView& x) {
  if (config_.n_mtp_layers == 0 || !options_.seed_draft_rings) return;
  const auto& targets = config_.dspark_target_layer_ids;
  if (std::find(targets.begin(), targets.end(), layer) == targets.end()) return;
  const int64_t T = x.shape[0], hc = config_.hc_mult;
  TensorView mean = alloc_act({T, config_.hidden_size});
  ops_->hc_collapse(x, uniform_pre(ops_, T, hc), mean);  // mean over the streams of the layer input
  step.draft_inputs.push_back(mean);
  step.draft_input_full.push_back(step.cut && layer < config_.decoder_begin_layer());
}

void ModelV41::seed_draft_rings(Step& step, KvState& state) {
  const Rows& rows = step.cut ? step.dec : step.full;
  const int64_t T = rows.n(), D = config_.hidden_size, nt = static_cast<int64_t>(step.draft_inputs.size());
  if (T == 0 || nt == 0) return;
  // [nt, T, D] -> [T, nt * D]: row t of the concatenation is (input 0 row t, input 1 row t, ...).
  TensorView stacked = alloc_act({nt * T, D});
  for (int64_t j = 0; j < nt; ++j) {
    TensorView in = step.draft_inputs[static_cast<size_t>(j)];
    TensorView dst = stacked.slice0(j * T, (j + 1) * T);
    if (step.draft_input_full[static_cast<size_t>(j)]) {
      ops_->gather_rows(in, step.dec_rows, dst);
    } else {
      ops_->copy(in, dst);
    }
  }
  std::vector<int32_t> perm(static_cast<size_t>(nt * T));
  for (int64_t i = 0; i < nt * T; ++i) perm[i] = static_cast<int32_t>((i % nt) * T + i / nt);
  TensorView cat = alloc_act({T, nt * D});
  ops_->gather_rows(stacked, perm, cat.reshape({nt * T, D}));
  const loader::DsparkStageWeights& s0 = weights_.dspark[0];
  TensorView main_x = alloc_act({T, D});
  ops_->linear(cat, s0.main_proj, main_x, fp8_act());
  ops_->rms_norm(main_x, s0.main_norm, static_cast<float>(config_.rms_norm_eps), main_x);
  ops::RopeParams rope{inv_freq_main_, static_cast<int>(config_.qk_rope_head_dim)};
  for (int64_t j = 0; j < config_.n_mtp_layers; ++j) {
    const loader::AttentionWeightsV41& aw = weights_.dspark[static_cast<size_t>(j)].block.attn;
    TensorView kv = alloc_act({T, config_.head_dim});
    ops_->linear(main_x, aw.wkv, kv, fp8_act());
    ops_->norm_rope(kv, aw.kv_norm, static_cast<float>(config_.rms_norm_eps), rows.batch.positions, rope);
    ops_->kv_fake_quant(kv, ops::KvQuantFormat::kFp8Pow2x32);
    ops_->window_store(kv, rows.batch, state.layer(config_.num_hidden_layers + j).window);
  }
}

// A stage's attention: block rows attend to the stage ring below the block and to each other.
TensorView ModelV41::draft_attention(const loader::BlockWeightsV41& w, int stage, KvState& state, const Rows& rows,
                                     const TensorView& a) {
  const loader::AttentionWeightsV41& aw = w.attn;
  const int64_t T = rows.n(), H = config_.num_attention_heads, d = config_.head_dim, Q = config_.q_lora_rank;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  ops::RopeParams rope{inv_freq_main_, static_cast<int>(config_.qk_rope_head_dim)};
  TensorView q_lat = alloc_act({T, Q});
  ops_->linear(a, aw.wq_a, q_lat, fp8_act());
  ops_->rms_norm(q_lat, aw.q_norm, eps, q_lat);
  TensorView q = alloc_act({T, H, d});
  ops_->linear(q_lat, aw.wq_b, q.reshape({T, H * d}), fp8_act());
  ops_->rope(q, rows.batch.positions, rope);
  TensorView kv = alloc_act({T, d});
  ops_->linear(a, aw.wkv, kv, fp8_act());
  ops_->norm_rope(kv, aw.kv_norm, eps, rows.batch.positions, rope);
  ops_->kv_fake_quant(kv, ops::KvQuantFormat::kFp8Pow2x32);
  ops::AttentionParams ap;
  ap.window = config_.sliding_window;
  ap.softmax_scale = 1.0f / std::sqrt(static_cast<float>(d));
  TensorView o = alloc_act({T, H, d});
  // Draft rows never enter the ring: it holds target positions only (rejected drafts leave no trace).
  ops_->block_attention(q, kv, state.layer(config_.num_hidden_layers + stage).window, aw.sink, rows.batch, ap, o);
  return project_out(aw, rows, o, rope);
}

// Markov head (sequential per row): logits_i = base_i + head_m . embed_m[prev_i], prev_0 = the
// block's first token, prev_{i+1} = argmax of row i (greedy, lowest id on ties). Confidence:
// proj . [h_i ; embed_m[prev_i]] with h_i the normed hidden row (DeepSpec's feature order).
void ModelV41::markov_heads(const ForwardBatch& b, const TensorView& h, std::vector<float>& logits,
                            ForwardResult& result) {
  const int64_t rank = config_.dspark_markov_rank, T = static_cast<int64_t>(b.token_ids.size());
  const int64_t D = config_.hidden_size, V = config_.vocab_size;
  const loader::DsparkStageWeights& last = weights_.dspark.back();
  tensor::LinearWeight proj_h = last.confidence_proj, proj_e = last.confidence_proj;
  proj_h.in = D;
  proj_h.weight = TensorView::contiguous(last.confidence_proj.weight.data, last.confidence_proj.weight.dtype, {1, D},
                                         last.confidence_proj.weight.device);
  proj_e.in = rank;
  proj_e.weight = TensorView::contiguous(static_cast<uint8_t*>(last.confidence_proj.weight.data) +
                                             D * tensor::dtype_size(last.confidence_proj.weight.dtype),
                                         last.confidence_proj.weight.dtype, {1, rank}, last.confidence_proj.weight.device);
  result.draft_tokens.assign(static_cast<size_t>(T), -1);
  result.confidence.assign(static_cast<size_t>(T), 0.0f);
  int32_t max_rows = 0;
  for (const ops::SeqSpan& s : b.seqs) max_rows = std::max(max_rows, s.n_tokens);
  std::vector<int32_t> prev(b.seqs.size());
  for (size_t s = 0; s < b.seqs.size(); ++s) prev[s] = b.token_ids[b.seqs[s].token_begin];
  for (int32_t i = 0; i < max_rows; ++i) {
    std::vector<int32_t> seq_ids, row_ids, prev_ids;
    for (size_t s = 0; s < b.seqs.size(); ++s) {
      if (i >= b.seqs[s].n_tokens) continue;
      seq_ids.push_back(static_cast<int32_t>(s));
      row_ids.push_back(b.seqs[s].token_begin + i);
      prev_ids.push_back(prev[s]);
    }
    const int64_t n = static_cast<int64_t>(row_ids.size());
    TensorView em = alloc_act({n, rank});
    ops_->embed(ops_->upload(prev_ids.data(), DType::kI32, {n}), last.markov_embed, em);
    TensorView bias = ops_->alloc(DType::kF32, {n, V});
    ops_->linear(em, last.markov_head, bias, {});
    TensorView hs = alloc_act({n, D});
    ops_->gather_rows(h, row_ids, hs);
    TensorView c1 = ops_->alloc(DType::kF32, {n, 1}), c2 = ops_->alloc(DType::kF32, {n, 1});
    ops_->linear(hs, proj_h, c1, {});
    ops_->linear(em, proj_e, c2, {});
    ops_->add(c1, c2, c1);
    std::vector<float> hb(static_cast<size_t>(n * V)), hc1(static_cast<size_t>(n));
    ops_->copy(bias, TensorView::contiguous(hb.data(), DType::kF32, {n, V}));
    ops_->copy(c1, TensorView::contiguous(hc1.data(), DType::kF32, {n, 1}));
    for (int64_t k = 0; k < n; ++k) {
      float* row = &logits[static_cast<size_t>(row_ids[k]) * V];
      for (int64_t v = 0; v < V; ++v) row[v] += hb[k * V + v];
      const int32_t pick = static_cast<int32_t>(std::max_element(row, row + V) - row);  // lowest id on ties
      result.draft_tokens[static_cast<size_t>(row_ids[k])] = pick;
      result.confidence[static_cast<size_t>(row_ids[k])] = hc1[k];
      prev[static_cast<size_t>(seq_ids[k])] = pick;
    }
  }
}

Result<ForwardResult> ModelV41::mtp_forward(const ForwardBatch& b, const TensorView& hidden, KvState& state) {
  (void)hidden;
  if (weights_.dspark.empty()) return failed_precondition("mtp_forward: the checkpoint has no DSpark stages");
  DI_RETURN_IF_ERROR(validate(b, state, /*history=*/false));
  ops_->begin_step();
  Step step;
  make_step(b, state, /*history=*/false, /*fixed=*/false, step);
  upload_step(step);
  const Rows& rows = step.full;
  const int64_t T = rows.n(), D = config_.hidden_size, hc = config_.hc_mult, V = config_.vocab_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  TensorView e = alloc_act({T, D});
  ops_->embed(rows.batch.token_ids, weights_.embed, e);
  TensorView x = alloc_act({T, hc, D});
  ops_->broadcast_streams(e, x);
  std::vector<float> onehot(static_cast<size_t>(T * hc), 0.0f);
  for (int64_t t = 0; t < T; ++t) onehot[t * hc] = 1.0f;
  TensorView pre = ops_->upload(onehot.data(), DType::kF32, {T, hc});
  for (int64_t j = 0; j < config_.n_mtp_layers; ++j) {
    const loader::BlockWeightsV41& w = weights_.dspark[static_cast<size_t>(j)].block;
    TensorView a = alloc_act({T, D});
    ops_->hc_collapse(x, pre, a);
    ops_->rms_norm(a, w.attn_norm, eps, a);
    x = block_tail(w, -1 - j, state, step, rows, x, a, pre);
  }
  const loader::DsparkStageWeights& last = weights_.dspark.back();
  TensorView h = alloc_act({T, D});
  ops_->hc_collapse(x, pre, h);  // the last stage's FFN pre
  ops_->rms_norm(h, last.norm, eps, h);
  TensorView base = ops_->alloc(DType::kF32, {T, V});
  ops_->linear(h, weights_.head, base, {});
  std::vector<float> logits(static_cast<size_t>(T * V));
  ops_->copy(base, TensorView::contiguous(logits.data(), DType::kF32, {T, V}));
  ForwardResult result;
  markov_heads(b, h, logits, result);
  result.logits = ops_->upload(logits.data(), DType::kF32, {T, V});
  return result;
}

}  // namespace deepinfer::model
