// ModelV41 construction, batch validation, the step's row sets (full and decoder) and the top-level
// forward with the LM head (single-pass mHC: the final collapse uses the last FFN pre, §5).
#include "model/v41/model_v41.h"

#include <algorithm>

#include "model/batch_checks.h"
#include "model/prepare_projections.h"
#include "model/rope_table.h"
#include "model/step_graph.h"
#include "model/v41/step_v41.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

ModelV41::ModelV41(loader::ModelConfig config, loader::ModelWeightsV41 weights, loader::EngramTokenMap engram,
                   ops::Ops* ops, ModelOptions options)
    : config_(std::move(config)), weights_(std::move(weights)), engram_map_(std::move(engram)), ops_(ops),
      options_(options) {
  DI_CHECK(config_.is_v41(), "ModelV41 needs a V4.1 config");
  hc_params_.sinkhorn_iters = static_cast<int>(config_.hc_sinkhorn_iters);
  hc_params_.hc_eps = static_cast<float>(config_.hc_eps);
  hc_params_.norm_eps = static_cast<float>(config_.rms_norm_eps);
  auto layout = loader::make_engram_layout(config_);
  DI_CHECK(layout.is_ok(), "Engram layout of a validated config: {}", layout.status().to_string());
  engram_layout_ = std::move(layout).value();
  DI_CHECK(engram_layout_.n_layers == 0 || static_cast<int64_t>(engram_map_.token_map.size()) == config_.vocab_size,
           "ModelV41: Engram layers need the compressed token map");
  auto upload = [&](const std::vector<float>& v) {
    TensorView t = ops_->alloc_persistent(DType::kF32, {static_cast<int64_t>(v.size())});
    ops_->copy(TensorView::contiguous(const_cast<float*>(v.data()), DType::kF32, {static_cast<int64_t>(v.size())}), t);
    return t;
  };
  // YaRN without an attention magnitude factor (V4.1 sets it to 1; rope_table never applies one).
  inv_freq_main_ = upload(layer_inv_freq(config_, 0));
  inv_freq_compress_ = upload(layer_inv_freq(config_, 1));
  zero_ape_ = ops_->alloc_persistent(DType::kF32, {config_.max_ratio(), config_.head_dim});
  // The LM head multiplies every sampled row of a batch (and every DSpark draft row): the backend
  // may keep it pre-laid-out. Plain numerics take an F32 path that reads the weight as stored.
  if (official()) {
    ops_->prepare_linear(weights_.head);
    prepare_projections(*ops_, weights_.layers);
  }
}

DType ModelV41::act_dtype() const { return official() ? DType::kBF16 : DType::kF32; }

ops::LinearOptions ModelV41::fp8_act() const {
  ops::LinearOptions o;
  if (official()) o.act_quant_block = config_.quant.block_in;  // per-32 activation scales (§9)
  return o;
}

TensorView ModelV41::alloc_act(std::initializer_list<int64_t> shape) { return ops_->alloc(act_dtype(), shape); }

int32_t ModelV41::decoder_begin(int32_t n_prompt) const {
  if (options_.prefill_mode != PrefillMode::kCompact || n_prompt <= 0) return 0;
  return std::max(0, n_prompt - options_.keep_tokens);
}

Status ModelV41::validate(const ForwardBatch& b, const KvState& state, bool history) const {
  const int64_t S = static_cast<int64_t>(b.seqs.size());
  if (!b.token_from.empty()) {
    // Engram hashes and the DSpark chain read the ids on the host (takes_device_tokens: false).
    return invalid_argument("forward: V4.1 takes every input token from the host (token_from given)");
  }
  if (!b.n_prompt.empty() && static_cast<int64_t>(b.n_prompt.size()) != S) {
    return invalid_argument("forward: n_prompt has {} entries for {} sequences", b.n_prompt.size(), S);
  }
  if (!b.engram_lookback.empty() && static_cast<int64_t>(b.engram_lookback.size()) != S * state.engram_lookback()) {
    return invalid_argument("forward: engram_lookback has {} entries, expected {} per sequence", b.engram_lookback.size(),
                            state.engram_lookback());
  }
  const int64_t T = static_cast<int64_t>(b.token_ids.size());
  for (size_t i = 0; i < b.image_rows.size(); ++i) {
    const int32_t r = b.image_rows[i];
    if (r < 0 || r >= T || (i > 0 && r <= b.image_rows[i - 1])) {
      return invalid_argument("forward: image_rows must be distinct ascending rows of the batch's {} (entry {} is {})",
                              T, i, r);
    }
  }
  if (b.image_embeds.size() != b.image_rows.size() * static_cast<size_t>(config_.hidden_size)) {
    return invalid_argument("forward: image_embeds has {} values for {} image rows of {}", b.image_embeds.size(),
                            b.image_rows.size(), config_.hidden_size);
  }
  if (!b.image_rows.empty() && !history) return invalid_argument("forward: DSpark draft rows cannot be image rows");
  return check_batch_layout(b, state.options(), config_.vocab_size, config_.max_position_embeddings,
                            history && !config_.kv_source_layer_ids.empty());
}

void ModelV41::upload_rows(Rows& r) {
  const int64_t T = r.n(), S = static_cast<int64_t>(r.seqs.size());
  ops::BatchView& v = r.batch;
  v.token_ids = ops_->upload(r.token_ids.data(), DType::kI32, {T});
  v.positions = ops_->upload(r.positions.data(), DType::kI32, {T});
  v.token_seq = ops_->upload(r.token_seq.data(), DType::kI32, {T});
  v.seqs = ops_->upload(r.seqs.data(), DType::kI32, {S, 6});
  v.block_tables = ops_->upload(r.block_tables.data(), DType::kI32, {std::max<int64_t>(S, 1), r.max_blocks});
}

// The decoder's rows (§2.3): under compact prefill, a sequence keeps positions >= n_prompt - keep
// and its decoder windows never see below that; sequences with no kept row leave the decoder. The
// decoder windows are also floored where the slot's decoder rings start being contiguous (a
// snapshot or chunk whose earlier decoder rows were skipped must not read stale ring entries).
void ModelV41::make_decoder_rows(const KvState& state, Step& step) {
  const ForwardBatch& b = *step.host;
  Rows& d = step.dec;
  d.max_blocks = step.full.max_blocks;
  step.dec_of_full.assign(static_cast<size_t>(step.full.n()), -1);
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    ops::SeqSpan seq = b.seqs[s];
    const int32_t begin_pos = b.n_prompt.empty() ? 0 : decoder_begin(b.n_prompt[s]);
    const int32_t end = seq.start_pos + seq.n_tokens;
    const int32_t start = std::max(seq.start_pos, begin_pos);
    const KvState::DecoderRows held = state.decoder_rows(seq.slot);
    const int32_t floor = std::max(begin_pos, held.next == start ? held.floor : start);
    step.dec_held.push_back({floor, start < end ? end : held.next});
    if (start > seq.start_pos || floor > seq.window_floor) step.cut = true;
    if (start >= end) continue;
    const int32_t skip = start - seq.start_pos;
    const int32_t begin = static_cast<int32_t>(d.n());
    for (int32_t i = skip; i < seq.n_tokens; ++i) {
      const int32_t row = seq.token_begin + i;
      step.dec_of_full[static_cast<size_t>(row)] = static_cast<int32_t>(d.n());
      step.dec_rows.push_back(row);
      d.token_ids.push_back(b.token_ids[row]);
      d.positions.push_back(b.positions[row]);
      d.token_seq.push_back(static_cast<int32_t>(d.seqs.size()));
    }
    d.seqs.push_back(ops::SeqSpan{seq.slot, begin, end - start, start, seq.n_cached, std::max(seq.window_floor, floor)});
    const auto* table = step.full.block_tables.data() + s * static_cast<size_t>(step.full.max_blocks);
    d.block_tables.insert(d.block_tables.end(), table, table + step.full.max_blocks);
  }
}

void ModelV41::make_step(const ForwardBatch& b, const KvState& state, bool history, bool fixed, Step& step) {
  step.host = &b;
  Rows& f = step.full;
  const int32_t block_tokens = state.options().block_tokens;
  f.token_ids = b.token_ids;
  f.positions = b.positions;
  f.seqs = b.seqs;
  f.max_blocks = std::max<int32_t>(b.max_blocks, 1);
  f.block_tables = b.block_tables;
  if (f.block_tables.empty()) {
    f.block_tables.assign(std::max<size_t>(b.seqs.size(), 1) * static_cast<size_t>(f.max_blocks), -1);
  } else if (fixed) {
    // Table columns rounded up (-1 padded): a replayable step keeps its shape while sequences grow.
    f.max_blocks = step_graph::pad_tables(b.block_tables, static_cast<int64_t>(b.seqs.size()), b.max_blocks,
                                          &f.block_tables);
  }
  f.image_rows = b.image_rows;
  f.token_seq.resize(b.token_ids.size());
  for (size_t s = 0; s < b.seqs.size(); ++s)
    for (int32_t i = 0; i < b.seqs[s].n_tokens; ++i) f.token_seq[b.seqs[s].token_begin + i] = static_cast<int32_t>(s);
  f.mirror(block_tokens);
  make_decoder_rows(state, step);
  if (step.cut) {
    Rows& d = step.dec;
    if (d.block_tables.empty()) d.block_tables.assign(static_cast<size_t>(d.max_blocks), -1);
    for (int32_t r : f.image_rows)
      if (step.dec_of_full[static_cast<size_t>(r)] >= 0) d.image_rows.push_back(step.dec_of_full[static_cast<size_t>(r)]);
    d.mirror(block_tokens);
  } else {
    step.dec_rows.clear();
  }
  for (int s : config_.kv_source_layer_ids) {
    if (!history) break;
    const int m = config_.ratio(s);
    if (step.emit.count(m)) continue;
    ops::EmitPlan& plan = step.emit[m];
    ops::plan_emissions(f.batch, m, &plan);
    if (fixed) ops::pad_emissions(f.n(), &plan);  // a token completes at most one group per ratio
  }
}

void ModelV41::upload_step(Step& step) {
  upload_rows(step.full);
  if (step.cut) upload_rows(step.dec);
  for (auto& [m, plan] : step.emit) {
    const int64_t n = std::max<int64_t>(plan.n_emit, 1);
    std::vector<int32_t> pos(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < plan.n_emit; ++i) pos[i] = plan.h_group[i] * m;
    plan.token = ops_->upload(plan.h_token.empty() ? pos.data() : plan.h_token.data(), DType::kI32, {n});
    plan.group = ops_->upload(plan.h_group.empty() ? pos.data() : plan.h_group.data(), DType::kI32, {n});
    plan.dst = ops_->upload(plan.h_dst.empty() ? pos.data() : plan.h_dst.data(), DType::kI32, {n});
    step.emit_positions[m] = ops_->upload(pos.data(), DType::kI32, {n});
  }
  // What the layers leave in the step is per pass.
  step.topk = TensorView{};
  step.candidates = TensorView{};
  step.draft_inputs.clear();
  step.draft_input_full.clear();
}

Result<ForwardResult> ModelV41::forward(const ForwardBatch& b, KvState& state, Capture* capture) {
  DI_RETURN_IF_ERROR(validate(b, state, /*history=*/true));
  // The host's part once (rows, decoder tail, emission plans, Engram hashes); the pass below only
  // uploads and launches, so a backend may run it more than once (step graphs: a prepare pass,
  // then a recorded or eager one). The slots' decoder rows move on after it.
  const bool graphed = capture == nullptr && step_graph::shaped(b);
  Step step;
  make_step(b, state, /*history=*/true, /*fixed=*/graphed && ops_->graphs_enabled(), step);
  std::vector<int32_t> logit_rows = b.logit_rows;
  if (step.cut) {
    for (int32_t& r : logit_rows) {
      if (step.dec_of_full[static_cast<size_t>(r)] < 0) {
        return invalid_argument("forward: logit row {} lies before the kept decoder tail (compact prefill keeps the "
                                "last {} prompt rows)", r, options_.keep_tokens);
      }
      r = step.dec_of_full[static_cast<size_t>(r)];
    }
  }
  hash_engram(step, state);
  // The persistent buffers a recorded step bakes in: this model's weights and this KV state.
  const uintptr_t buffers = state.n_layers() > 0 ? reinterpret_cast<uintptr_t>(state.layer(0).window.data) : 0;
  ForwardResult result = step_graph::run(*ops_, reinterpret_cast<uintptr_t>(this) * 0x9e3779b97f4a7c15ull ^ buffers,
                                         graphed, [&](bool) { return run(step, state, logit_rows, capture); });
  for (size_t s = 0; s < b.seqs.size(); ++s) state.set_decoder_rows(b.seqs[s].slot, step.dec_held[s]);
  return result;
}

ForwardResult ModelV41::run(Step& step, KvState& state, std::span<const int32_t> logit_rows, Capture* capture) {
  upload_step(step);
  const int64_t T = step.full.n(), D = config_.hidden_size, hc = config_.hc_mult;
  TensorView e = alloc_act({T, D});
  ops_->embed(step.full.batch.token_ids, weights_.embed, e);
  if (!step.full.image_rows.empty()) {
    // Image spans: the vision encoder's rows replace the token embeddings (§8).
    const ForwardBatch& b = *step.host;
    const int64_t n = static_cast<int64_t>(b.image_rows.size());
    TensorView rows = ops_->upload(b.image_embeds.data(), DType::kF32, {n, D});
    ops_->scatter_rows(rows, b.image_rows, e);
  }
  TensorView x = alloc_act({T, hc, D});
  ops_->broadcast_streams(e, x);
  // Layer 0's attention collapses with a one-hot pre: the four streams are identical copies.
  std::vector<float> onehot(static_cast<size_t>(T * hc), 0.0f);
  for (int64_t t = 0; t < T; ++t) onehot[t * hc] = 1.0f;
  TensorView pre = ops_->upload(onehot.data(), DType::kF32, {T, hc});
  if (capture) capture->after_layer.clear();
  x = run_layers(step, state, x, pre, capture);
  if (config_.n_mtp_layers > 0 && options_.seed_draft_rings) seed_draft_rings(step, state);
  ForwardResult result;
  result.logits = head(x, pre, weights_.norm, logit_rows);
  if (step.host->keep_hidden && !logit_rows.empty()) {
    const int64_t n = static_cast<int64_t>(logit_rows.size()), rows = x.shape[0];
    result.hidden = alloc_act({n, hc, D});
    ops_->gather_rows(x.reshape({rows, hc * D}), logit_rows, result.hidden.reshape({n, hc * D}));
  }
  return result;
}

// Final collapse with the last FFN's pre (no hc_head in V4.1), norm, F32 logits.
TensorView ModelV41::head(const TensorView& x, const TensorView& pre, const TensorView& norm,
                          std::span<const int32_t> rows) {
  const int64_t n = static_cast<int64_t>(rows.size()), D = config_.hidden_size, hc = config_.hc_mult;
  TensorView logits = ops_->alloc(DType::kF32, {std::max<int64_t>(n, 1), config_.vocab_size});
  if (n == 0) return logits.slice0(0, 0);
  const int64_t T = x.shape[0];
  TensorView xs = alloc_act({n, hc, D});
  ops_->gather_rows(x.reshape({T, hc * D}), rows, xs.reshape({n, hc * D}));
  TensorView ps = ops_->alloc(DType::kF32, {n, hc});
  ops_->gather_rows(pre, rows, ps);
  TensorView y = alloc_act({n, D});
  ops_->hc_collapse(xs, ps, y);
  ops_->rms_norm(y, norm, static_cast<float>(config_.rms_norm_eps), y);
  ops_->linear(y, weights_.head, logits, {});
  return logits;
}

}  // namespace deepinfer::model
