// CudaOps launchers: window rings, the streaming compressor, history rows, the lightning indexer,
// the sparse attention and MoE.
#include <algorithm>
#include <vector>

#include "kernels/common/env_knob.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

namespace k = deepinfer::kernels;

namespace {
const k::SeqSpanDev* seq_spans(const BatchView& b) { return static_cast<const k::SeqSpanDev*>(b.seqs.data); }
}  // namespace

void CudaOps::window_store(const TensorView& kv, const BatchView& batch, const TensorView& window) {
  if (batch.n_seqs == 0) return;
  DI_LAUNCH(k::launch_window_store({kv.data, act_type(kv), seq_spans(batch), window.data, act_type(window),
                                    batch.n_seqs, window.shape[1], window.shape[2]},
                                   stream_));
}

void CudaOps::compress(const TensorView& kv, const TensorView& score, const TensorView& ape, const BatchView& batch,
                       const EmitPlan& plan, const CompressParams& params, const TensorView& state_kv,
                       const TensorView& state_score, const TensorView& rows) {
  if (batch.n_seqs == 0) return;
  const int64_t width = (params.overlapped ? 2 : 1) * params.dc;
  const int64_t n_state = params.overlapped ? 2 * params.ratio : params.ratio;
  DI_CHECK(kv.dtype == DType::kF32 && state_kv.dtype == DType::kF32, "compress works in F32");
  DI_CHECK(state_kv.shape[1] >= n_state && state_kv.shape[2] == width, "compress: state {} for {} positions of {}",
           state_kv.shape_string(), n_state, width);
  DI_LAUNCH(k::launch_compress({dptr<float>(kv), dptr<float>(score), dptr<float>(ape), seq_spans(batch),
                                dptr<int32_t>(batch.token_seq), plan.n_emit > 0 ? dptr<int32_t>(plan.token) : nullptr,
                                dptr<float>(state_kv), dptr<float>(state_score), dptr<float>(rows), batch.n_seqs,
                                batch.n_tokens, plan.n_emit, params.ratio, params.overlapped, params.dc, width,
                                n_state, state_kv.shape[1]},
                               stream_));
}

void CudaOps::store_rows(const TensorView& rows, const EmitPlan& plan, const TensorView& pool) {
  if (plan.n_emit == 0) return;
  DI_LAUNCH(k::launch_store_rows({rows.data, act_type(rows), dptr<int32_t>(plan.dst), pool.data, act_type(pool),
                                  plan.n_emit, pool.shape[pool.rank - 1]},
                                 stream_));
}

void CudaOps::indexer_topk(const TensorView& q, const TensorView& w, const TensorView& keys, const BatchView& batch,
                           int ratio, int32_t rows_per_block, float weight_scale, const TensorView& idx) {
  const int64_t T = q.shape[0], Hi = q.shape[1], di = q.shape[2];
  if (T == 0) return;
  int32_t max_pos = 0;
  for (int64_t t = 0; t < T; ++t) max_pos = std::max(max_pos, batch.h_positions[t]);
  // Score columns rounded up to 256 rows: the launch (and a recorded step graph) stays the same
  // for 256 * ratio positions of growth; blocks past a token's rows exit at once.
  constexpr int64_t kLdQuantum = 256;
  const int64_t ld = std::max<int64_t>(1, ((max_pos + 1) / ratio + kLdQuantum - 1) / kLdQuantum * kLdQuantum);
  TensorView scores = alloc(DType::kF32, {T, ld});
  TensorView wf = w;
  if (w.dtype != DType::kF32) {
    wf = alloc(DType::kF32, {T, Hi});
    convert(w, wf);
  }
  const size_t smem = (Hi * di + 32 * di + 32 * Hi) * sizeof(float);
  DI_CHECK(smem <= 200 * 1024, "indexer: {} heads x {} dims need {} bytes of shared memory", Hi, di, smem);
  DI_LAUNCH(k::launch_indexer_topk({q.data, act_type(q), dptr<float>(wf), keys.data, act_type(keys),
                                    dptr<int32_t>(batch.positions), dptr<int32_t>(batch.token_seq),
                                    dptr<int32_t>(batch.block_tables), batch.max_blocks, ratio, rows_per_block,
                                    static_cast<int>(Hi), static_cast<int>(di), static_cast<int>(idx.shape[1]),
                                    weight_scale, dptr<float>(scores), ld, T, dptr<int32_t>(idx)},
                                   stream_));
}

void CudaOps::sparse_attention(const TensorView& q, const TensorView& kv_new, const TensorView& window,
                               const TensorView& comp, const TensorView& comp_idx, const TensorView& sinks,
                               const BatchView& batch, const AttentionParams& params, const TensorView& out) {
  const int64_t T = q.shape[0], H = q.shape[1], d = q.shape[2];
  if (T == 0) return;
  DI_CHECK(d % 32 == 0 && d <= 512, "attention head_dim {} unsupported on CUDA", d);
  DI_CHECK(q.dtype == kv_new.dtype && q.dtype == window.dtype && q.dtype == out.dtype &&
               (comp.empty() || comp.dtype == q.dtype),
           "attention: q, kv, window, compressed rows and out must share one dtype");
  k::AttentionLaunchParams p{q.data, kv_new.data, window.data, comp.empty() ? nullptr : comp.data, act_type(q),
                             comp_idx.empty() ? nullptr : dptr<int32_t>(comp_idx), dptr<float>(sinks),
                             dptr<int32_t>(batch.positions), dptr<int32_t>(batch.token_seq), seq_spans(batch),
                             dptr<int32_t>(batch.block_tables), out.data, T, H, d, params.window, params.ratio,
                             params.all_compressed, params.rows_per_block, batch.max_blocks,
                             comp_idx.empty() ? 0 : static_cast<int>(comp_idx.shape[1]), params.softmax_scale,
                             out.dtype == DType::kBF16};
  p.ring = window.shape[1];
  const RopeParams& rope = params.out_rope;
  // The output's de-rotation in the tensor-core kernel's epilogue (DEEPINFER_ATTN_FOLD_ROPE=0: a
  // rope() launch after it, an A/B switch; same bits), else after the scalar kernel.
  static const bool fold_on = k::env_switch("DEEPINFER_ATTN_FOLD_ROPE");
  const bool fold = rope.n_rope > 0 && fold_on && k::attention_folds_rope(p);
  if (fold) {
    DI_CHECK(rope.n_rope % 2 == 0 && rope.n_rope <= d && rope.inv_freq.numel() * 2 >= rope.n_rope,
             "attention: out_rope of {} dims for head_dim {}", rope.n_rope, d);
    p.rope_inv_freq = dptr<float>(rope.inv_freq);
    p.rope_n = rope.n_rope;
    p.rope_sign = rope.inverse ? -1.0f : 1.0f;
  }
  DI_LAUNCH(k::launch_sparse_attention(p, stream_));
  if (rope.n_rope > 0 && !fold) this->rope(out, batch.positions, rope);
}

namespace {
k::MoeRouteParams route_params(const TensorView& logits, const TensorView& bias, const TensorView& tid2eid,
                               const TensorView& token_ids, const MoeParams& params, const TensorView& sel,
                               const TensorView& weights) {
  DI_CHECK(params.n_experts_per_tok <= 16, "top-{} routing unsupported on CUDA", params.n_experts_per_tok);
  return {dptr<float>(logits),
          bias.empty() ? nullptr : dptr<float>(bias),
          tid2eid.empty() ? nullptr : dptr<int64_t>(tid2eid),
          dptr<int32_t>(token_ids),
          logits.shape[0],
          static_cast<int>(logits.shape[1]),
          static_cast<int>(params.n_experts_per_tok),
          params.route_scale,
          dptr<int32_t>(sel),
          dptr<float>(weights)};
}

// DEEPINFER_MOE_FUSED_COMBINE=0: combine into F32, then add and convert (an A/B switch; same bits).
bool moe_fused_combine() {
  static const bool fused = k::env_switch("DEEPINFER_MOE_FUSED_COMBINE");
  return fused;
}
}  // namespace

void CudaOps::moe_route(const TensorView& logits, const TensorView& bias, const TensorView& tid2eid,
                        const TensorView& token_ids, const MoeParams& params, const TensorView& sel,
                        const TensorView& weights) {
  if (logits.shape[0] == 0) return;
  DI_LAUNCH(k::launch_moe_route(route_params(logits, bias, tid2eid, token_ids, params, sel, weights), stream_));
}

const kernels::WeightDesc* CudaOps::expert_descs(std::span<const ExpertWeights> experts) {
  // Uploaded once per MoE layer (keyed by its first weight, checked against the host copy so a
  // reused address can never serve stale descriptors): no host-to-device copy in the step. The
  // check runs in every step's prepare pass, so it compares in place, stopping at the first
  // difference (building a 768-descriptor table per layer to compare was ~7 us of host time per
  // layer and step on the dev machine; in place ~3).
  const int E = static_cast<int>(experts.size());
  ExpertDescs& cached = expert_descs_[experts[0].w1.weight.data];
  const auto desc_at = [&](int i) -> k::WeightDesc {  // [w1 of every expert, w3 ..., w2 ...]
    const ExpertWeights& x = experts[i % E];
    return weight_desc(i < E ? x.w1 : i < 2 * E ? x.w3 : x.w2);
  };
  bool same = cached.host.size() == static_cast<size_t>(3 * E);
  for (int i = 0; same && i < 3 * E; ++i) same = desc_at(i) == cached.host[i];  // field by field (padding)
  const size_t bytes = static_cast<size_t>(3 * E) * sizeof(k::WeightDesc);
  if (!same) {
    std::vector<k::WeightDesc> descs(static_cast<size_t>(3 * E));
    for (int i = 0; i < 3 * E; ++i) {
      descs[i] = desc_at(i);
      DI_CHECK(descs[i].fmt == descs[0].fmt, "moe_experts: experts of one layer must share a weight format");
    }
    // Not expected inside a recording (the prepare pass just before it made the same check and
    // upload); should it happen, the recording is discarded and the step runs eagerly.
    if (mode_ == Mode::kCapture) replayable_ = false;
    cached.host = std::move(descs);
    if (cached.dev.nbytes() < bytes) cached.dev = alloc_persistent(DType::kU8, {static_cast<int64_t>(bytes)});
    DI_CUDA_CHECK(cudaMemcpyAsync(cached.dev.data, cached.host.data(), bytes, cudaMemcpyHostToDevice, stream_));
  }
  return dptr<k::WeightDesc>(cached.dev);
}

void CudaOps::moe_experts(const TensorView& x, const TensorView& sel, const TensorView& weights,
                          std::span<const ExpertWeights> experts, const MoeParams& params, const TensorView& out) {
  DI_CHECK(out.dtype == DType::kF32, "moe_experts: out must be F32, not {}", dtype_name(out.dtype));
  moe_experts_impl(x, sel, weights, experts, params, TensorView{}, out);
}

void CudaOps::moe_experts_out(const TensorView& x, const TensorView& sel, const TensorView& weights,
                              std::span<const ExpertWeights> experts, const MoeParams& params,
                              const TensorView& shared, const TensorView& out, int shared_lane) {
  if (!moe_fused_combine()) {
    Ops::moe_experts_out(x, sel, weights, experts, params, shared, out, shared_lane);
    return;
  }
  moe_sublayer_out(x, sel, weights, experts, params, shared, out, shared_lane, nullptr);
}

void CudaOps::moe_route_experts_out(const MoeRouting& r, const TensorView& x, std::span<const ExpertWeights> experts,
                                    const MoeParams& params, const TensorView& shared, const TensorView& out,
                                    int shared_lane) {
  // The routing rides on the grouping launch (launch_moe_group: inside it for decode-sized
  // batches, just before it otherwise), which runs before anything reads sel or weights.
  if (!moe_fused_combine() || x.shape[0] == 0) {
    Ops::moe_route_experts_out(r, x, experts, params, shared, out, shared_lane);
    return;
  }
  const k::MoeRouteParams route = route_params(r.logits, r.bias, r.tid2eid, r.token_ids, params, r.sel, r.weights);
  moe_sublayer_out(x, r.sel, r.weights, experts, params, shared, out, shared_lane, &route);
}

void CudaOps::moe_sublayer_out(const TensorView& x, const TensorView& sel, const TensorView& weights,
                               std::span<const ExpertWeights> experts, const MoeParams& params,
                               const TensorView& shared, const TensorView& out, int shared_lane,
                               const k::MoeRouteParams* route) {
  DI_CHECK(out.numel() == x.shape[0] * x.shape[1], "moe_experts_out: out {} for x {}", out.shape_string(),
           x.shape_string());
  DI_CHECK(shared.empty() || shared.numel() == out.numel(), "moe_experts_out: shared {} for out {}",
           shared.shape_string(), out.shape_string());
  // The shared expert's region joined just before the combine, so its GEMMs run beside the routed
  // experts' grouping and GEMMs instead of holding them back (at batch 1 the shared chain, ~17 us
  // per layer, is longer than the router and routing beside it, ~10 us): on the H200 the replayed
  // step's GPU span is 2.2% shorter at batch 1 and 1.8% at batch 8 (session 28, ABAB).
  // DEEPINFER_MOE_SHARED_LATE_JOIN=0 joins it before the grouping (A/B switch; same bits).
  static const bool late_join = k::env_switch("DEEPINFER_MOE_SHARED_LATE_JOIN");
  if (shared_lane >= 0 && !late_join) {
    side_join(shared_lane);
    shared_lane = -1;
  }
  moe_experts_impl(x, sel, weights, experts, params, shared, out, shared_lane, route);
}

void CudaOps::moe_experts_impl(const TensorView& x, const TensorView& sel, const TensorView& weights,
                               std::span<const ExpertWeights> experts, const MoeParams& params,
                               const TensorView& shared, const TensorView& out, int shared_lane,
                               const k::MoeRouteParams* route) {
  const int64_t T = x.shape[0], D = x.shape[1], kk = params.n_experts_per_tok;
  const int E = static_cast<int>(experts.size());
  if (T == 0) {
    if (shared_lane >= 0) side_join(shared_lane);
    return;
  }
  const int64_t n_pairs = T * kk, F = experts[0].w1.out;
  TensorView counts = alloc(DType::kI32, {E}), offsets = alloc(DType::kI32, {E + 1});
  TensorView cursor = alloc(DType::kI32, {E}), perm = alloc(DType::kI32, {n_pairs});
  TensorView active = alloc(DType::kI32, {E + 1});
  const k::WeightDesc* w_all = expert_descs(experts);
  const k::WeightDesc w_fmt = weight_desc(experts[0].w1);  // the format every expert shares
  const bool plain = x.dtype == DType::kF32 && params.act_quant_block == 0;
  TensorView g = alloc(DType::kF32, {n_pairs, F}), u = alloc(DType::kF32, {n_pairs, F});
  TensorView y = alloc(DType::kF32, {n_pairs, D});
  // An expert launch's parameters (activations attached by the caller).
  auto expert_params = [&](int a_div, const k::WeightDesc* w, int64_t N, int64_t K, const TensorView& c,
                           const TensorView& c1) {
    k::GemmParams p;
    p.M = n_pairs;
    p.N = N;
    p.K = K;
    p.lda = K;
    p.C = c.data;
    p.ldc = N;
    p.experts = w;
    p.n_experts = E;
    p.offsets = dptr<int32_t>(offsets);
    p.perm = dptr<int32_t>(perm);
    p.a_div = a_div;
    p.max_rows_per_expert = static_cast<int>(T);  // an expert gets each token at most once
    p.active = dptr<int32_t>(active);
    p.max_active = static_cast<int>(std::min<int64_t>(E, n_pairs));
    p.w = w_fmt;
    if (!c1.empty()) p.n_sets = 2, p.C1 = c1.data, p.N1 = N, p.ldc1 = N;  // set 1: the next E descriptors
    return p;
  };
  // a: the activations before quantisation (the GEMM takes them as they are in plain numerics),
  // quantised in blocks of `block` channels (0: a already is the BF16 operand, FP8-quantised per
  // `quantised` channels when that is > 0 — which the FP8-order expert kernel needs to know).
  auto launch = [&](k::GemmParams& p, const TensorView& a, int block, int quantised = 0) {
    if (plain) {
      p.A = a.data;
    } else {
      set_gemm_activations(p, a, block);
      if (block == 0 && quantised > 0) p.a_fp8_block = quantised;
      attach_gemm_workspace(p);
    }
    DI_LAUNCH(plain ? k::launch_f32_gemm(p, stream_) : k::launch_dequant_gemm(p, stream_));
  };
  // w1 (gate) and w3 (up), w_all[0, E) and [E, 2E), in one launch.
  k::GemmParams gate_up = expert_params(static_cast<int>(kk), w_all, F, D, g, u);
  const bool bf16 = x.dtype == DType::kBF16;
  k::GemmParams down = expert_params(1, w_all + 2 * E, D, F, y, TensorView{});
  // Where the small-M kernels would quantise the expert activations while staging them — every CTA
  // of the launch the same rows again — they are quantised once instead (same bits): x by the
  // grouping launch, h by the SwiGLU launch (DEEPINFER_MOE_QUANT_ONCE=0: in the staging, an A/B
  // switch). Large M quantises in a launch of its own either way.
  static const bool quant_once = k::env_switch("DEEPINFER_MOE_QUANT_ONCE");
  k::MoeGroupParams group{dptr<int32_t>(sel),    n_pairs, E, dptr<int32_t>(counts), dptr<int32_t>(offsets),
                          dptr<int32_t>(cursor), dptr<int32_t>(perm), dptr<int32_t>(active)};
  if (route != nullptr) group.route = *route;
  TensorView xq;  // [T, D] BF16: x FP8-quantised per 128 channels, when the grouping launch makes it
  if (!plain && quant_once && params.act_quant_block == 128 && k::gemm_fuses_act_quant(gate_up, 128)) {
    xq = alloc(DType::kBF16, {T, D});
    group.x = x.data, group.x_type = act_type(x), group.x_rows = T, group.x_width = D, group.xq = xq.data;
    if (!k::moe_group_quantises(group)) group.x = nullptr, group.xq = nullptr, xq = TensorView{};
  }
  DI_LAUNCH(k::launch_moe_group(group, stream_));
  if (xq.empty()) {
    launch(gate_up, x, params.act_quant_block);
  } else {
    launch(gate_up, xq, 0, params.act_quant_block);  // quantised BF16: what the staging would have made of x
  }
  const k::MoeSwigluParams sp{dptr<float>(g), dptr<float>(u), dptr<float>(weights), n_pairs, F, params.swiglu_limit,
                              bf16, nullptr};
  // SwiGLU and the down projection's input quantisation run as one kernel (same bits;
  // DEEPINFER_MOE_SWIGLU_QUANT=0: the two launches, an A/B switch) wherever the quantisation would
  // otherwise be a launch of its own (large M) or repeated by every CTA's staging (small M, unless
  // DEEPINFER_MOE_QUANT_ONCE=0).
  static const bool fuse_quant = k::env_switch("DEEPINFER_MOE_SWIGLU_QUANT");
  if (!plain && fuse_quant && params.act_quant_block == 128 && k::moe_swiglu_quant_fits(sp) &&
      (quant_once || !k::gemm_fuses_act_quant(down, params.act_quant_block))) {
    TensorView hq = alloc(DType::kBF16, {n_pairs, F});
    DI_LAUNCH(k::launch_moe_swiglu_quant(sp, hq.data, stream_));
    launch(down, hq, 0, params.act_quant_block);  // quantised BF16: what set_gemm_activations would have made of h
  } else {
    TensorView h = alloc(DType::kF32, {n_pairs, F});
    k::MoeSwigluParams hp = sp;
    hp.h = dptr<float>(h);
    DI_LAUNCH(k::launch_moe_swiglu_weight(hp, stream_));
    launch(down, h, params.act_quant_block);
  }
  // The combine adds the shared expert's output and rounds to the output dtype (add + convert's
  // arithmetic) when asked to.
  if (shared_lane >= 0) side_join(shared_lane);  // the shared expert's region, beside all of the above
  DI_LAUNCH(k::launch_moe_combine({dptr<float>(y), dptr<int32_t>(sel), static_cast<int>(kk), T, D, bf16,
                                   shared.empty() ? nullptr : shared.data,
                                   shared.empty() ? k::ActType::kF32 : act_type(shared), out.data,
                                   act_type(out)},
                                  stream_));
}

}  // namespace deepinfer::ops::cuda
