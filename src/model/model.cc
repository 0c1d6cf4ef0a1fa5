// Model construction, batch validation and upload, the top-level forward and the LM head.
#include "model/model.h"

#include <algorithm>

#include "model/batch_checks.h"
#include "model/prepare_projections.h"
#include "model/rope_table.h"
#include "model/step.h"
#include "model/step_graph.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

static_assert(sizeof(ops::SeqSpan) == 6 * sizeof(int32_t), "SeqSpan is uploaded as [n_seqs, 6] I32");

Model::Model(loader::ModelConfig config, loader::ModelWeights weights, ops::Ops* ops, ModelOptions options)
    : config_(std::move(config)), weights_(std::move(weights)), ops_(ops), options_(options) {
  hc_params_.sinkhorn_iters = static_cast<int>(config_.hc_sinkhorn_iters);
  hc_params_.hc_eps = static_cast<float>(config_.hc_eps);
  hc_params_.norm_eps = static_cast<float>(config_.rms_norm_eps);
  auto upload = [&](const std::vector<float>& v) {
    TensorView t = ops_->alloc_persistent(DType::kF32, {static_cast<int64_t>(v.size())});
    ops_->copy(TensorView::contiguous(const_cast<float*>(v.data()), DType::kF32, {static_cast<int64_t>(v.size())}), t);
    return t;
  };
  inv_freq_main_ = upload(layer_inv_freq(config_, 0));
  inv_freq_compress_ = upload(layer_inv_freq(config_, /*ratio=*/1));
  // The LM head multiplies every sampled row of a batch: the backend may keep it pre-laid-out.
  // Plain numerics take an F32 path that reads the weight as stored.
  if (options_.numerics == Numerics::kOfficial) {
    ops_->prepare_linear(weights_.head);
    prepare_projections(*ops_, weights_.layers);
  }
}

DType Model::act_dtype() const { return options_.numerics == Numerics::kOfficial ? DType::kBF16 : DType::kF32; }

ops::LinearOptions Model::fp8_act() const {
  ops::LinearOptions o;
  if (options_.numerics == Numerics::kOfficial) o.act_quant_block = config_.quant.block_in;
  return o;
}

Status Model::validate(const ForwardBatch& b, const KvState& state, bool history) const {
  if (!b.image_rows.empty() || !b.image_embeds.empty()) {
    return invalid_argument("forward: DeepSeek-V4 has no vision input (image_rows given)");
  }
  // History blocks hold the compressed rows, so only models with compressed layers need tables.
  return check_batch_layout(b, state.options(), config_.vocab_size, config_.max_position_embeddings,
                            history && config_.max_ratio() > 1);
}

Model::Step Model::make_step(const ForwardBatch& b, const KvState& state, bool fixed) {
  Step step;
  step.host = &b;
  const int64_t T = static_cast<int64_t>(b.token_ids.size()), S = static_cast<int64_t>(b.seqs.size());
  step.token_seq.resize(static_cast<size_t>(T));
  for (int64_t s = 0; s < S; ++s)
    for (int32_t i = 0; i < b.seqs[s].n_tokens; ++i) step.token_seq[b.seqs[s].token_begin + i] = static_cast<int32_t>(s);
  ops::BatchView& v = step.batch;
  v.n_tokens = T;
  v.n_seqs = S;
  v.block_tokens = state.options().block_tokens;
  v.max_blocks = std::max<int32_t>(b.max_blocks, 1);
  static const int32_t kNoBlock = -1;
  const int32_t* tables = b.block_tables.empty() ? &kNoBlock : b.block_tables.data();
  if (fixed && !b.block_tables.empty()) {
    // Table columns rounded up (-1 padded), so a replayable step keeps its shape while
    // sequences grow by step_graph::kTableQuantum blocks.
    v.max_blocks = step_graph::pad_tables(b.block_tables, S, b.max_blocks, &step.block_tables);
    tables = step.block_tables.data();
  }
  v.token_ids = ops_->upload(b.token_ids.data(), DType::kI32, {T});
  // Ids sampled by the step before, still on the device (asynchronous scheduling): in place over
  // the placeholders, before any op reads them.
  if (!b.token_from.empty()) ops_->take_tokens(b.token_source, b.token_from, v.token_ids);
  v.positions = ops_->upload(b.positions.data(), DType::kI32, {T});
  v.token_seq = ops_->upload(step.token_seq.data(), DType::kI32, {T});
  v.seqs = ops_->upload(b.seqs.data(), DType::kI32, {S, 6});
  v.block_tables = ops_->upload(tables, DType::kI32, {b.block_tables.empty() ? 1 : S, v.max_blocks});
  v.h_token_ids = b.token_ids.data();
  v.h_positions = b.positions.data();
  v.h_token_seq = step.token_seq.data();
  v.h_seqs = b.seqs.data();
  v.h_block_tables = tables;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const int m = config_.ratio(l);
    if (m == 0 || step.emit.count(m)) continue;
    ops::EmitPlan& plan = step.emit[m];
    ops::plan_emissions(v, m, &plan);
    if (fixed) ops::pad_emissions(T, &plan);  // a token completes at most one group per ratio
    const int64_t n = std::max<int64_t>(plan.n_emit, 1);
    std::vector<int32_t> pos(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < plan.n_emit; ++i) pos[i] = plan.h_group[i] * m;
    plan.token = ops_->upload(plan.h_token.empty() ? pos.data() : plan.h_token.data(), DType::kI32, {n});
    plan.group = ops_->upload(plan.h_group.empty() ? pos.data() : plan.h_group.data(), DType::kI32, {n});
    plan.dst = ops_->upload(plan.h_dst.empty() ? pos.data() : plan.h_dst.data(), DType::kI32, {n});
    step.emit_positions[m] = ops_->upload(pos.data(), DType::kI32, {n});
  }
  return step;
}

Result<ForwardResult> Model::forward(const ForwardBatch& b, KvState& state, Capture* capture) {
  DI_RETURN_IF_ERROR(validate(b, state));
  if (capture != nullptr) {
    ops_->begin_step();
    return run(b, state, capture, /*fixed=*/false);
  }
  // The persistent buffers a recorded step bakes in: this model's weights and this KV state.
  const uintptr_t state_buffers = state.n_layers() > 0 ? reinterpret_cast<uintptr_t>(state.layer(0).window.data) : 0;
  return run_step(b, state_buffers, [&](bool fixed) { return run(b, state, nullptr, fixed); });
}

ForwardResult Model::run_step(const ForwardBatch& b, uint64_t key, const std::function<ForwardResult(bool fixed)>& pass) {
  return step_graph::run(*ops_, reinterpret_cast<uintptr_t>(this) * 0x9e3779b97f4a7c15ull ^ key, step_graph::shaped(b),
                         pass);
}

ForwardResult Model::run(const ForwardBatch& b, KvState& state, Capture* capture, bool fixed) {
  Step step = make_step(b, state, fixed);
  const int64_t T = step.batch.n_tokens, D = config_.hidden_size, hc = config_.hc_mult;
  TensorView e = ops_->alloc(act_dtype(), {T, D});
  ops_->embed(step.batch.token_ids, weights_.embed, e);
  TensorView x = ops_->alloc(act_dtype(), {T, hc, D});        // HC streams, updated in place per layer
  TensorView scratch = ops_->alloc(act_dtype(), {T, hc, D});  // the block's intermediate streams
  ops_->broadcast_streams(e, x);
  if (capture) capture->after_layer.clear();
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    block(weights_.layers[static_cast<size_t>(l)], l, state.layer(l), step, x, scratch);
    if (capture) {
      const size_t mark = ops_->workspace_mark();
      std::vector<float> host(static_cast<size_t>(T * hc * D));
      TensorView f32 = ops_->alloc(DType::kF32, {T, hc, D});
      ops_->convert(x, f32);
      ops_->copy(f32, TensorView::contiguous(host.data(), DType::kF32, {T, hc, D}));
      capture->after_layer.push_back(std::move(host));
      ops_->workspace_release(mark);
    }
  }
  ForwardResult result;
  result.logits = head(x, weights_.hc_head, weights_.norm, b.logit_rows);
  if (b.keep_hidden_all) {
    result.hidden = x;  // the streams' own buffer: nothing writes it after the last layer
  } else if (b.keep_hidden && !b.logit_rows.empty()) {
    result.hidden = ops_->alloc(act_dtype(), {static_cast<int64_t>(b.logit_rows.size()), hc, D});
    ops_->gather_rows(x.reshape({T, hc * D}), b.logit_rows,
                      result.hidden.reshape({static_cast<int64_t>(b.logit_rows.size()), hc * D}));
  }
  return result;
}

TensorView Model::head(const TensorView& x, const tensor::HcHeadWeights& hc_head, const TensorView& norm,
                       std::span<const int32_t> rows) {
  const int64_t n = static_cast<int64_t>(rows.size()), D = config_.hidden_size, hc = config_.hc_mult;
  TensorView logits = ops_->alloc(DType::kF32, {std::max<int64_t>(n, 1), config_.vocab_size});
  if (n == 0) return logits.slice0(0, 0);
  const int64_t T = x.shape[0];
  TensorView xs = ops_->alloc(act_dtype(), {n, hc, D});
  ops_->gather_rows(x.reshape({T, hc * D}), rows, xs.reshape({n, hc * D}));
  TensorView y = ops_->alloc(act_dtype(), {n, D});
  ops_->hc_head(xs, hc_head, hc_params_, y);
  ops_->rms_norm(y, norm, static_cast<float>(config_.rms_norm_eps), y);
  ops_->linear(y, weights_.head, logits, {});
  return logits;
}

}  // namespace deepinfer::model
