// CudaOps launchers: elementwise, norms, RoPE, fake-quantisers and hyper-connections.
#include <algorithm>
#include <cstddef>

#include "kernels/common/env_knob.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

namespace k = deepinfer::kernels;

void CudaOps::embed(const TensorView& ids, const TensorView& table, const TensorView& out) {
  const int64_t T = ids.numel();
  if (T == 0) return;
  DI_LAUNCH(k::launch_embed({dptr<int32_t>(ids), table.data, act_type(table), out.data, act_type(out), T,
                             table.shape[1]},
                            stream_));
}

void CudaOps::broadcast_streams(const TensorView& x, const TensorView& out) {
  if (x.shape[0] == 0) return;
  DI_CHECK(x.dtype == out.dtype, "broadcast_streams: dtypes differ");
  DI_LAUNCH(k::launch_broadcast_streams({x.data, out.data, act_type(x), x.shape[0], x.shape[1],
                                         static_cast<int>(out.shape[1])},
                                        stream_));
}

void CudaOps::rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& out) {
  const int64_t n = x.shape[x.rank - 1], rows = x.numel() / n;
  if (rows == 0) return;
  DI_CHECK(out.numel() == x.numel(), "rms_norm: out {} vs x {}", out.shape_string(), x.shape_string());
  const k::ActType wt = weight.empty() ? k::ActType::kF32 : act_type(weight);
  DI_LAUNCH(k::launch_rms_norm({x.data, act_type(x), weight.data, wt, out.data, act_type(out), rows, n, eps}, stream_));
}

void CudaOps::rms_norm_quant(const TensorView& x, const TensorView& weight, float eps, const TensorView& out,
                             int block) {
  const int64_t n = x.shape[x.rank - 1], rows = x.numel() / n;
  if (!k::rms_norm_fuses_quant(n, block)) {
    Ops::rms_norm_quant(x, weight, eps, out, block);  // the two launches
    return;
  }
  if (rows == 0) return;
  DI_CHECK(out.numel() == x.numel(), "rms_norm_quant: out {} vs x {}", out.shape_string(), x.shape_string());
  const k::ActType wt = weight.empty() ? k::ActType::kF32 : act_type(weight);
  DI_LAUNCH(k::launch_rms_norm({x.data, act_type(x), weight.data, wt, out.data, act_type(out), rows, n, eps, block},
                               stream_));
}

void CudaOps::add(const TensorView& a, const TensorView& b, const TensorView& out) {
  DI_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), "add: shapes differ");
  if (a.numel() == 0) return;
  DI_LAUNCH(k::launch_add({a.data, act_type(a), b.data, act_type(b), out.data, act_type(out), a.numel(), 0.0f}, stream_));
}

void CudaOps::convert(const TensorView& x, const TensorView& out) {
  DI_CHECK(x.numel() == out.numel(), "convert: sizes differ");
  if (x.numel() == 0) return;
  DI_LAUNCH(k::launch_convert({x.data, act_type(x), out.data, act_type(out), x.numel()}, stream_));
}

void CudaOps::swiglu(const TensorView& g, const TensorView& u, float limit, const TensorView& out) {
  DI_CHECK(g.numel() == u.numel() && g.numel() == out.numel(), "swiglu: shapes differ");
  if (g.numel() == 0) return;
  DI_LAUNCH(k::launch_swiglu({g.data, act_type(g), u.data, act_type(u), out.data, act_type(out), g.numel(), limit},
                             stream_));
}

void CudaOps::swiglu_quant(const TensorView& g, const TensorView& u, float limit, const TensorView& out, int block) {
  DI_CHECK(g.numel() == u.numel() && g.numel() == out.numel(), "swiglu_quant: shapes differ");
  const auto aligned = [](const TensorView& t) { return reinterpret_cast<uintptr_t>(t.data) % 16 == 0; };
  if (!k::swiglu_fuses_quant(out.shape[out.rank - 1], block, act_type(out)) || !aligned(g) || !aligned(u) ||
      !aligned(out)) {
    Ops::swiglu_quant(g, u, limit, out, block);  // the two launches
    return;
  }
  if (g.numel() == 0) return;
  DI_LAUNCH(k::launch_swiglu(
      {g.data, act_type(g), u.data, act_type(u), out.data, act_type(out), g.numel(), limit, block}, stream_));
}

LinearOptions CudaOps::prequantise(const TensorView& x, int block) {
  // In place, once, where the small-M GEMM kernels would quantise x in each CTA's staging and the
  // large-M path in a copy of its own (DEEPINFER_GEMM_PREQUANT=0: leave it to them; an A/B switch,
  // same bits).
  static const bool on = k::env_switch("DEEPINFER_GEMM_PREQUANT");
  if (!on || block <= 0) return {block};
  fp8_fake_quant(x, x.shape[x.rank - 1], block);
  return {0, block};
}

void CudaOps::take_tokens(const TensorView& source, std::span<const int32_t> from, const TensorView& tokens) {
  check_take_tokens(source, from, tokens);
  DI_CHECK(source.device == tensor::Device::kCuda && tokens.device == tensor::Device::kCuda,
           "take_tokens: source and tokens must be on the device");
  if (from.empty()) return;
  // A recorded step bakes the source's address in, and it is no workspace address (the runner's
  // persistent ids): it enters the signature, so a moved source records a new graph.
  if (mode_ != Mode::kEager) mix(reinterpret_cast<uintptr_t>(source.data));
  const TensorView d_from = upload(from.data(), DType::kI32, {static_cast<int64_t>(from.size())});
  DI_LAUNCH(k::launch_take_tokens({dptr<int32_t>(source), dptr<int32_t>(d_from), dptr<int32_t>(tokens),
                                   static_cast<int64_t>(from.size())},
                                  stream_));
}

void CudaOps::gather_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out) {
  if (rows.empty()) return;
  const TensorView d_rows = upload(rows.data(), DType::kI32, {static_cast<int64_t>(rows.size())});
  DI_LAUNCH(k::launch_gather_rows({x.data, act_type(x), dptr<int32_t>(d_rows), out.data, act_type(out),
                                   static_cast<int64_t>(rows.size()), x.shape[x.rank - 1]},
                                  stream_));
}

void CudaOps::scatter_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out) {
  if (rows.empty()) return;
  const int64_t n = out.shape[out.rank - 1];
  DI_CHECK(x.numel() == static_cast<int64_t>(rows.size()) * n, "scatter_rows: x {} for {} rows of {}", x.shape_string(),
           rows.size(), n);
  const TensorView d_rows = upload(rows.data(), DType::kI32, {static_cast<int64_t>(rows.size())});
  DI_LAUNCH(k::launch_scatter_rows({x.data, act_type(x), dptr<int32_t>(d_rows), out.data, act_type(out),
                                    static_cast<int64_t>(rows.size()), n},
                                   stream_));
}

void CudaOps::argmax_rows(const TensorView& logits, const TensorView& out) {
  check_argmax_rows(logits, out);
  const int64_t R = logits.shape[0], V = logits.shape[1];
  const int64_t slots = k::argmax_workspace_slots(R, V);
  const TensorView part_v = slots > 0 ? alloc(DType::kF32, {slots}) : TensorView{};   // [R, S] slice maxima
  const TensorView part_i = slots > 0 ? alloc(DType::kI32, {slots}) : TensorView{};   // [R, S] their ids
  DI_LAUNCH(k::launch_argmax_rows({dptr<float>(logits), R, logits.stride[0], V, dptr<int32_t>(out),
                                   dptr<float>(part_v), dptr<int32_t>(part_i)},
                                  stream_));
}

// The layout of kernels::DeviceSampleRow (checked against the same numbers in launch_elementwise.cu).
static_assert(sizeof(Ops::SampleRow) == 32 && offsetof(Ops::SampleRow, min_p) == 4 &&
              offsetof(Ops::SampleRow, seed) == 8 && offsetof(Ops::SampleRow, position) == 16 &&
              offsetof(Ops::SampleRow, top_k) == 24 && offsetof(Ops::SampleRow, top_p) == 28);

void CudaOps::sample_rows(const TensorView& logits, std::span<const SampleRow> rows, const TensorView& out) {
  check_sample_rows(logits, rows, out);
  const int64_t R = logits.shape[0], V = logits.shape[1];
  if (R == 0) return;
  const int64_t slots = k::argmax_workspace_slots(R, V);
  const TensorView part_v = slots > 0 ? alloc(DType::kF32, {slots}) : TensorView{};   // [R, S] slice maxima
  const TensorView part_i = slots > 0 ? alloc(DType::kI32, {slots}) : TensorView{};   // [R, S] their ids
  const int64_t sampled = k::sample_workspace_slots(R, V);
  const TensorView part_s = sampled > 0 ? alloc(DType::kI32, {2 * sampled}) : TensorView{};  // [R, S'] F64 slice scores
  const TensorView part_si = sampled > 0 ? alloc(DType::kI32, {sampled}) : TensorView{};    // [R, S'] their ids
  const bool filters = std::any_of(rows.begin(), rows.end(), [](const SampleRow& r) {
    return r.temperature > 0.0f && (r.top_k > 0 || r.top_p < 1.0f);
  });
  const TensorView cut = filters ? alloc(DType::kF32, {R}) : TensorView{};  // [R] top-k / top-p thresholds
  // Draw first (top-p rows): [R] the draw over every min-p survivor; [R, S', 2] U64 per slice the
  // top-p mass of every id and of the ids above the draw (sample_check_kernel).
  const int64_t checks = filters ? k::sample_check_slots(R, V) : 0;
  const TensorView pre = checks > 0 ? alloc(DType::kI32, {R}) : TensorView{};
  const TensorView part_check = checks > 0 ? alloc(DType::kI32, {2 * checks}) : TensorView{};
  // [R] SampleRow (32 bytes each) on the device.
  const TensorView d_rows = upload(rows.data(), DType::kI32, {R * static_cast<int64_t>(sizeof(SampleRow) / 4)});
  DI_LAUNCH(k::launch_sample_rows({dptr<float>(logits), R, logits.stride[0], V, d_rows.data, dptr<int32_t>(out),
                                   dptr<float>(part_v), dptr<int32_t>(part_i),
                                   static_cast<double*>(part_s.data), dptr<int32_t>(part_si), filters, dptr<float>(cut),
                                   dptr<int32_t>(pre), static_cast<unsigned long long*>(part_check.data)},
                                  stream_));
}

// The layouts of kernels::DeviceAdjustRow / DeviceAdjustEntry (checked in launch_elementwise.cu).
static_assert(sizeof(Ops::AdjustRow) == 36 && offsetof(Ops::AdjustRow, mask_row) == 16 &&
              offsetof(Ops::AdjustRow, repetition) == 20 && offsetof(Ops::AdjustRow, frequency) == 28 &&
              offsetof(Ops::AdjustRow, pending) == 32);
static_assert(sizeof(Ops::AdjustEntry) == 16 && offsetof(Ops::AdjustEntry, bias) == 4 &&
              offsetof(Ops::AdjustEntry, seen) == 12);

void CudaOps::adjust_logits(const TensorView& logits, std::span<const AdjustRow> rows,
                            std::span<const AdjustEntry> entries, std::span<const int32_t> stops,
                            std::span<const uint32_t> masks, const TensorView& pending_ids, const TensorView& out) {
  check_adjust_logits(logits, rows, entries, stops, masks, pending_ids, out);
  const int64_t R = logits.shape[0], V = logits.shape[1];
  if (R == 0) return;
  // The row parameters and sparse inputs on the device (I32 words; empty inputs stay null).
  auto words = [&](const void* data, size_t bytes) {
    return bytes == 0 ? TensorView{} : upload(data, DType::kI32, {static_cast<int64_t>(bytes / 4)});
  };
  const TensorView d_rows = words(rows.data(), rows.size_bytes());           // [R] AdjustRow
  const TensorView d_entries = words(entries.data(), entries.size_bytes());  // [E] AdjustEntry
  const TensorView d_stops = words(stops.data(), stops.size_bytes());        // [S] I32
  const TensorView d_masks = words(masks.data(), masks.size_bytes());        // [M, ceil(V / 32)] U32
  const TensorView part = alloc(DType::kI32, {k::adjust_workspace_slots(R)});  // [R, slices] finite counts
  DI_LAUNCH(k::launch_adjust_logits({dptr<float>(logits), R, logits.stride[0], V, d_rows.data, d_entries.data,
                                     dptr<int32_t>(d_stops), static_cast<const uint32_t*>(d_masks.data),
                                     pending_ids.empty() ? nullptr : dptr<int32_t>(pending_ids), dptr<float>(out),
                                     dptr<int32_t>(part)},
                                    stream_));
}

void CudaOps::logprob_rows(const TensorView& logits, const TensorView& tokens, const TensorView& logprob,
                           const TensorView& top_ids, const TensorView& top_logprobs) {
  check_logprob_rows(logits, tokens, logprob, top_ids, top_logprobs);
  const int64_t R = logits.shape[0], V = logits.shape[1], n = top_ids.shape[1];
  if (R == 0) return;
  const int64_t slots = k::logprob_workspace_slots(R);
  const TensorView part_m = alloc(DType::kF32, {slots});                             // [R, S] slice maxima
  const TensorView part_sum = alloc(DType::kI32, {2 * slots});                       // [R, S] F64 sums
  const TensorView part_v = n > 0 ? alloc(DType::kF32, {slots * n}) : TensorView{};  // [R, S, n] slice lists
  const TensorView part_i = n > 0 ? alloc(DType::kI32, {slots * n}) : TensorView{};
  DI_LAUNCH(k::launch_logprob_rows({dptr<float>(logits), R, logits.stride[0], V, static_cast<int>(n),
                                    dptr<int32_t>(tokens), dptr<float>(logprob), dptr<int32_t>(top_ids),
                                    dptr<float>(top_logprobs), dptr<float>(part_m),
                                    static_cast<double*>(part_sum.data), dptr<float>(part_v), dptr<int32_t>(part_i)},
                                   stream_));
}

void CudaOps::token_rank_rows(const TensorView& logits, const TensorView& tokens, const TensorView& rank) {
  check_token_rank_rows(logits, tokens, rank);
  const int64_t R = logits.shape[0];
  if (R == 0) return;
  DI_LAUNCH(k::launch_token_rank_rows({dptr<float>(logits), R, logits.stride[0], logits.shape[1], dptr<int32_t>(tokens),
                                       dptr<int32_t>(rank)},
                                      stream_));
}

void CudaOps::rope(const TensorView& x, const TensorView& positions, const RopeParams& params) {
  const int64_t N = x.shape[0], width = x.shape[x.rank - 1];
  if (N == 0) return;
  DI_LAUNCH(k::launch_rope({x.data, act_type(x), dptr<int32_t>(positions), dptr<float>(params.inv_freq), N,
                            x.numel() / (N * width), width, params.n_rope, params.inverse ? -1.0f : 1.0f},
                           stream_));
}

void CudaOps::fp8_fake_quant(const TensorView& x, int64_t n_dims, int block) {
  const int64_t width = x.shape[x.rank - 1], rows = x.numel() / width;
  if (rows == 0 || n_dims == 0) return;
  DI_LAUNCH(k::launch_fp8_fake_quant({x.data, act_type(x), rows, width, n_dims, block}, stream_));
}

void CudaOps::norm_rope(const TensorView& x, const TensorView& weight, float eps, const TensorView& positions,
                        const RopeParams& params, int64_t quant_dims, int quant_block) {
  const int64_t N = x.shape[0], width = x.shape[x.rank - 1];
  if (N == 0) return;
  const k::NormRopeParams p{x.data, act_type(x), weight.empty() ? nullptr : weight.data,
                            weight.empty() ? k::ActType::kF32 : act_type(weight), N, x.numel() / (N * width), width, eps,
                            dptr<int32_t>(positions), dptr<float>(params.inv_freq), params.n_rope,
                            params.inverse ? -1.0f : 1.0f, quant_dims, quant_block};
  // DEEPINFER_NORM_ROPE_FUSED=0: the three launches (an A/B switch; same bits).
  static const bool fused = k::env_switch("DEEPINFER_NORM_ROPE_FUSED");
  if (!fused || !k::norm_rope_fusable(p)) {
    Ops::norm_rope(x, weight, eps, positions, params, quant_dims, quant_block);
    return;
  }
  DI_CHECK(weight.empty() || weight.numel() == width, "norm_rope: weight {} for width {}", weight.shape_string(), width);
  DI_LAUNCH(k::launch_norm_rope(p, stream_));
}

void CudaOps::hadamard_fp4_fake_quant(const TensorView& x) {
  const int64_t n = x.shape[x.rank - 1], rows = x.numel() / n;
  if (rows == 0) return;
  DI_CHECK((n & (n - 1)) == 0 && n % 32 == 0, "Hadamard size {} must be a power of two >= 32", n);
  DI_LAUNCH(k::launch_hadamard_fp4({x.data, act_type(x), rows, n, n, 32}, stream_));
}

TensorView CudaOps::activations_bf16(const TensorView& x, int block) {
  if (block <= 0 && x.dtype == DType::kBF16) return x;
  const int64_t width = x.shape[x.rank - 1], rows = x.numel() / width;
  TensorView out = alloc(DType::kBF16, {rows, width});
  if (rows > 0) DI_LAUNCH(k::launch_act_quant_bf16({x.data, act_type(x), out.data, rows, width, block}, stream_));
  return out;
}

void CudaOps::set_gemm_activations(k::GemmParams& p, const TensorView& x, int block) {
  if (k::gemm_fuses_act_quant(p, block)) {
    p.A = x.data;
    p.a_quant_block = block;
    p.a_f32 = x.dtype == DType::kF32;
  } else {
    p.A = activations_bf16(x, block).data;
    p.a_fp8_block = block;  // quantised when block > 0
  }
}

namespace {
// Splits of the mHC mixing reduction: a function of K only (never of T), so batch invariant.
int hc_splits(int64_t K) { return static_cast<int>(std::clamp<int64_t>(K / 1024, 1, 32)); }
// Whether hc_pre_norm (and hc_post_pre_norm) fold the RMS norm into the finalize launch for the
// streams x [T, hc, D] (DEEPINFER_HC_FOLD_NORM=0: never, the two launches; an A/B switch, same bits).
bool hc_norm_folds(const TensorView& x) {
  static const bool on = k::env_switch("DEEPINFER_HC_FOLD_NORM");
  return on && x.rank == 3 && k::hc_pre_folds_norm(x.shape[2]);
}
}  // namespace

void CudaOps::hc_pre(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& u,
                     const TensorView& post, const TensorView& comb) {
  hc_pre_launch(x, w, params, u, post, comb, nullptr, 0.0f);
}

void CudaOps::hc_pre_norm(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& norm,
                          float eps, const TensorView& u, const TensorView& post, const TensorView& comb,
                          const QuantCopy& uq) {
  if (!hc_norm_folds(x)) {
    Ops::hc_pre_norm(x, w, params, norm, eps, u, post, comb, uq);  // the separate launches
    return;
  }
  hc_pre_launch(x, w, params, u, post, comb, &norm, eps, nullptr, uq);
}

void CudaOps::hc_post_pre_norm(const TensorView& o, const TensorView& x, const TensorView& post,
                               const TensorView& comb, const TensorView& out, const HcWeights& w,
                               const HcParams& params, const TensorView& norm, float eps, const TensorView& u,
                               const QuantCopy& uq) {
  // DEEPINFER_HC_POST_FUSED=0: hc_post, then hc_pre_norm (an A/B switch; same bits). The fold
  // rides on the folded norm's launch.
  static const bool fused = k::env_switch("DEEPINFER_HC_POST_FUSED");
  if (!fused || !hc_norm_folds(out)) {
    Ops::hc_post_pre_norm(o, x, post, comb, out, w, params, norm, eps, u, uq);
    return;
  }
  DI_CHECK(x.dtype == out.dtype && out.data != x.data && x.numel() == out.numel(),
           "hc_post_pre_norm: out must be a distinct tensor of x's dtype and shape");
  const HcPostInputs in{&o, &x, &post, &comb};
  hc_pre_launch(out, w, params, u, post, comb, &norm, eps, &in, uq);
}

void CudaOps::hc_pre_launch(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& u,
                            const TensorView& post, const TensorView& comb, const TensorView* norm, float eps,
                            const HcPostInputs* post_of, const QuantCopy& uq) {
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  if (T == 0) return;
  DI_CHECK(uq.empty() || (uq.out.dtype == DType::kBF16 && uq.out.numel() == T * D),
           "hc_pre_norm: quantised copy {} for u [{}, {}] (BF16)", uq.out.shape_string(), T, D);
  DI_CHECK(hc <= 4, "hc_mult {} unsupported on CUDA (at most 4)", hc);
  const int splits = hc_splits(hc * D);
  TensorView partial = alloc(DType::kF32, {T, splits, (2 + hc) * hc + 1});
  k::HcParamsDev p{x.data, act_type(x), dptr<float>(w.fn), dptr<float>(w.base), dptr<float>(w.scale),
                   dptr<float>(partial), T, D, static_cast<int>(hc), splits, params.sinkhorn_iters,
                   params.hc_eps, params.norm_eps, u.data, act_type(u), dptr<float>(post),
                   dptr<float>(comb)};
  if (norm != nullptr) {
    DI_CHECK(norm->empty() || norm->numel() == D, "hc_pre_norm: norm {} for width {}", norm->shape_string(), D);
    p.fold_norm = true;
    p.norm = norm->empty() ? nullptr : norm->data;
    p.norm_type = norm->empty() ? k::ActType::kF32 : act_type(*norm);
    p.rms_eps = eps;
    if (!uq.empty() && k::hc_pre_quant_copies(D, uq.block)) p.uq = uq.out.data;
  }
  if (post_of != nullptr) {
    p.post_o = post_of->o->data;
    p.post_o_type = act_type(*post_of->o);
    p.post_x = post_of->x->data;
    p.post_in = dptr<float>(*post_of->post);
    p.comb_in = dptr<float>(*post_of->comb);
  }
  DI_LAUNCH(k::launch_hc_pre(p, stream_));
  if (p.uq == nullptr) quant_copy(u, uq);  // not folded: the copy and its quantisation after
}

void CudaOps::hc_post(const TensorView& o, const TensorView& x, const TensorView& post, const TensorView& comb,
                      const TensorView& out) {
  const int64_t T = x.shape[0];
  if (T == 0) return;
  DI_CHECK(x.dtype == out.dtype && out.data != x.data, "hc_post: out must be a distinct tensor of x's dtype");
  DI_CHECK(x.shape[1] <= 4, "hc_mult {} unsupported on CUDA (at most 4)", x.shape[1]);
  DI_LAUNCH(k::launch_hc_post({o.data, act_type(o), x.data, out.data, act_type(x), dptr<float>(post),
                               dptr<float>(comb), T, x.shape[2], static_cast<int>(x.shape[1])},
                              stream_));
}

void CudaOps::hc_head(const TensorView& x, const HcHeadWeights& w, const HcParams& params, const TensorView& y) {
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  if (T == 0) return;
  DI_CHECK(hc <= 4, "hc_mult {} unsupported on CUDA (at most 4)", hc);
  const int splits = hc_splits(hc * D);
  TensorView partial = alloc(DType::kF32, {T, splits, hc + 1});
  DI_LAUNCH(k::launch_hc_head({x.data, act_type(x), dptr<float>(w.fn), dptr<float>(w.base), dptr<float>(w.scale),
                               dptr<float>(partial), T, D, static_cast<int>(hc), splits, 0, params.hc_eps,
                               params.norm_eps, y.data, act_type(y), nullptr, nullptr},
                              stream_));
}

}  // namespace deepinfer::ops::cuda
