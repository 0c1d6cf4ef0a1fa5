// The V3-style MTP block mtp.0 (model_v4_flash.md §4.11): it combines the main model's final HC
// state at position i with the embedding of token i+1 and runs one ratio-0 block with its own
// window, predicting token i+2. DSpark draft stages (§9.2) are a separate runtime.
#include "model/model.h"
#include "model/step.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

Result<ForwardResult> Model::mtp_forward(const ForwardBatch& b, const TensorView& hidden, KvState& state) {
  if (weights_.mtp.empty()) return failed_precondition("mtp_forward: the checkpoint has no MTP block");
  if (config_.dspark_block_size > 0) return unimplemented("mtp_forward: DSpark draft stages are not an MTP block");
  // Window-only: the block tables need not cover the rows (the drafter chains past the blocks
  // its sequence holds).
  DI_RETURN_IF_ERROR(validate(b, state, /*history=*/false));
  const int64_t T = static_cast<int64_t>(b.token_ids.size()), D = config_.hidden_size, hc = config_.hc_mult;
  if (hidden.rank != 3 || hidden.shape[0] != T || hidden.shape[1] != hc || hidden.shape[2] != D) {
    return invalid_argument("mtp_forward: hidden {} must be [{}, {}, {}]", hidden.shape_string(), T, hc, D);
  }
  // Graph-shaped steps replay a recorded graph, keyed by the hidden input's buffer as well (the
  // drafter's persistent staging: the same address step after step).
  const uintptr_t state_buffers = state.n_layers() > 0 ? reinterpret_cast<uintptr_t>(state.layer(0).window.data) : 0;
  const uint64_t key = (state_buffers ^ (reinterpret_cast<uintptr_t>(hidden.data) * 0xc2b2ae3d27d4eb4full)) + 0x4d5450;
  return run_step(b, key, [&](bool fixed) { return run_mtp(b, hidden, state, fixed); });
}

ForwardResult Model::run_mtp(const ForwardBatch& b, const TensorView& hidden, KvState& state, bool fixed) {
  const int64_t T = static_cast<int64_t>(b.token_ids.size()), D = config_.hidden_size, hc = config_.hc_mult;
  Step step = make_step(b, state, fixed);
  const loader::MtpWeights& mw = weights_.mtp[0];
  const float eps = static_cast<float>(config_.rms_norm_eps);
  TensorView e = ops_->alloc(act_dtype(), {T, D});
  ops_->embed(step.batch.token_ids, weights_.embed, e);
  ops_->rms_norm(e, mw.enorm, eps, e);
  TensorView hn = ops_->alloc(act_dtype(), {T * hc, D});
  ops_->convert(hidden.reshape({T * hc, D}), hn);
  ops_->rms_norm(hn, mw.hnorm, eps, hn);  // each stream separately
  TensorView ep = ops_->alloc(act_dtype(), {T, D});
  ops_->linear(e, mw.e_proj, ep, fp8_act());
  TensorView hp = ops_->alloc(act_dtype(), {T, hc, D});
  ops_->linear(hn, mw.h_proj, hp.reshape({T * hc, D}), fp8_act());
  TensorView x = ops_->alloc(act_dtype(), {T, hc, D});
  ops_->broadcast_streams(ep, x);  // e_proj(e) is shared by the four streams
  ops_->add(hp, x, x);
  const int64_t layer = config_.num_hidden_layers;  // the MTP block's state follows the main layers
  TensorView scratch = ops_->alloc(act_dtype(), {T, hc, D});
  block(mw.block, layer, state.layer(layer), step, x, scratch);
  ForwardResult result;
  result.logits = head(x, *mw.hc_head, mw.norm, b.logit_rows);
  if (b.keep_hidden && !b.logit_rows.empty()) {
    const int64_t n = static_cast<int64_t>(b.logit_rows.size());
    result.hidden = ops_->alloc(act_dtype(), {n, hc, D});
    ops_->gather_rows(x.reshape({T, hc * D}), b.logit_rows, result.hidden.reshape({n, hc * D}));
  }
  return result;
}

}  // namespace deepinfer::model
