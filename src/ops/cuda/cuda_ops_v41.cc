// CudaOps launchers of the DeepSeek-V4.1 ops (ops.h's V4.1 section; kernels in kernels/v41/):
// shapes checked here, the arithmetic the CPU reference's (ops/cpu/cpu_v41_*.cc).
#include <algorithm>

#include "kernels/launch_v41.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

namespace k = deepinfer::kernels;

namespace {
const k::SeqSpanDev* spans(const BatchView& b) { return static_cast<const k::SeqSpanDev*>(b.seqs.data); }
bool f32(const TensorView& v) { return v.dtype == DType::kF32 && v.is_contiguous(); }
}  // namespace

void CudaOps::kv_fake_quant(const TensorView& x, KvQuantFormat format) {
  if (x.numel() == 0) return;
  const int64_t width = x.shape[x.rank - 1], block = format == KvQuantFormat::kFp4E4m3x16 ? 16 : 32;
  DI_CHECK(x.is_contiguous(), "kv_fake_quant: x {} must be contiguous", x.shape_string());
  DI_CHECK(width % block == 0, "kv_fake_quant: row width {} is not a multiple of {}", width, block);
  DI_LAUNCH(k::launch_kv_fake_quant_v41(
      {x.data, act_type(x), x.numel() / width, width, static_cast<int>(format)}, stream_));
}

void CudaOps::hc_mix(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& pre,
                     const TensorView& post, const TensorView& comb) {
  DI_CHECK(x.rank == 3 && x.is_contiguous(), "hc_mix: x {} must be contiguous [T, hc, D]", x.shape_string());
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  DI_CHECK(hc >= 1 && hc <= 4, "hc_mix: {} streams (the CUDA kernels take 1 to 4)", hc);
  DI_CHECK(f32(w.fn) && w.fn.shape[0] == (2 + hc) * hc && w.fn.shape[1] == hc * D && f32(w.base) &&
               w.base.numel() == (2 + hc) * hc && f32(w.scale) && w.scale.numel() == 3,
           "hc_mix: fn {} / base {} / scale {} for streams {}", w.fn.shape_string(), w.base.shape_string(),
           w.scale.shape_string(), x.shape_string());
  DI_CHECK(f32(pre) && pre.numel() == T * hc && f32(post) && post.numel() == T * hc && f32(comb) &&
               comb.numel() == T * hc * hc,
           "hc_mix: pre {} / post {} / comb {} for streams {}", pre.shape_string(), post.shape_string(),
           comb.shape_string(), x.shape_string());
  DI_CHECK(k::hc_mix_v41_smem(static_cast<int>(hc), D) <= 200u << 10, "hc_mix: streams {} exceed shared memory",
           x.shape_string());
  if (T == 0) return;
  DI_LAUNCH(k::launch_hc_mix_v41({x.data, act_type(x), dptr<float>(w.fn), dptr<float>(w.base), dptr<float>(w.scale),
                                  dptr<float>(pre), dptr<float>(post), dptr<float>(comb), T, D, static_cast<int>(hc),
                                  params.sinkhorn_iters, params.hc_eps, params.norm_eps},
                                 stream_));
}

void CudaOps::hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& u) {
  DI_CHECK(x.rank == 3 && x.is_contiguous() && u.is_contiguous(), "hc_collapse: x {} / u {}", x.shape_string(),
           u.shape_string());
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  DI_CHECK(f32(pre) && pre.numel() == T * hc, "hc_collapse: pre {}", pre.shape_string());
  DI_CHECK(u.numel() == T * D, "hc_collapse: u {} for streams {}", u.shape_string(), x.shape_string());
  DI_LAUNCH(k::launch_hc_collapse_v41(
      {x.data, act_type(x), dptr<float>(pre), u.data, act_type(u), T, D, static_cast<int>(hc)}, stream_));
}

void CudaOps::engram_gate(const TensorView& x, const TensorView& kv, const TensorView& q_weight,
                          const TensorView& k_weight, const TensorView& live, float eps, const TensorView& out) {
  DI_CHECK(x.rank == 3 && x.is_contiguous() && kv.is_contiguous() && out.is_contiguous(),
           "engram_gate: x {} / kv {} / out {} must be contiguous", x.shape_string(), kv.shape_string(),
           out.shape_string());
  const int64_t T = x.shape[0], hc = x.shape[1], D = x.shape[2];
  DI_CHECK(kv.numel() == T * (hc + 1) * D && out.numel() == x.numel(), "engram_gate: kv {} / out {} for streams {}",
           kv.shape_string(), out.shape_string(), x.shape_string());
  DI_CHECK(f32(q_weight) && q_weight.numel() == hc * D && f32(k_weight) && k_weight.numel() == hc * D,
           "engram_gate: q/k weights {} / {} must be [{}, {}] F32", q_weight.shape_string(), k_weight.shape_string(),
           hc, D);
  DI_CHECK(live.empty() || (live.dtype == DType::kI32 && live.numel() == T), "engram_gate: live {} for {} tokens",
           live.shape_string(), T);
  DI_LAUNCH(k::launch_engram_gate({x.data, act_type(x), kv.data, act_type(kv), dptr<float>(q_weight),
                                   dptr<float>(k_weight), live.empty() ? nullptr : dptr<int32_t>(live), out.data,
                                   act_type(out), T, D, static_cast<int>(hc), eps},
                                  stream_));
}

void CudaOps::block_attention(const TensorView& q, const TensorView& kv_block, const TensorView& window,
                              const TensorView& sinks, const BatchView& batch, const AttentionParams& params,
                              const TensorView& out) {
  const int64_t T = q.shape[0], H = q.shape[1], d = q.shape[2];
  if (T == 0) return;
  DI_CHECK(q.dtype == kv_block.dtype && q.dtype == window.dtype && q.dtype == out.dtype,
           "block_attention: q, kv_block, window and out must share one dtype");
  DI_CHECK(q.is_contiguous() && kv_block.is_contiguous() && window.is_contiguous() && out.is_contiguous() &&
               kv_block.numel() == T * d && window.rank == 3 && window.shape[2] == d && out.numel() == T * H * d,
           "block_attention: q {} / kv_block {} / window {} / out {}", q.shape_string(), kv_block.shape_string(),
           window.shape_string(), out.shape_string());
  DI_CHECK(f32(sinks) && sinks.numel() == H, "block_attention: sinks {} for {} heads", sinks.shape_string(), H);
  DI_CHECK(params.window <= window.shape[1], "block_attention: window {} beyond the ring's {} rows", params.window,
           window.shape[1]);
  int32_t max_rows = 0;  // the longest row list: the window's rows below the block and the block's
  for (int64_t s = 0; s < batch.n_seqs; ++s) {
    const SeqSpan& seq = batch.h_seqs[s];
    const int64_t lo = std::max<int64_t>({0, seq.start_pos - params.window, seq.window_floor});
    max_rows = std::max<int32_t>(max_rows, static_cast<int32_t>(std::max<int64_t>(0, seq.start_pos - lo) + seq.n_tokens));
  }
  DI_CHECK((d + max_rows) * sizeof(float) <= 200u << 10, "block_attention: {} rows of {} dims exceed shared memory",
           max_rows, d);
  // A launch argument read from the host mirrors, not from a shape: a step graph keys on it.
  if (mode_ != Mode::kEager) mix(static_cast<uint64_t>(max_rows));
  DI_LAUNCH(k::launch_block_attention({q.data, kv_block.data, window.data, act_type(q), dptr<float>(sinks),
                                       spans(batch), dptr<int32_t>(batch.token_seq), out.data, T, H, d,
                                       params.window, window.shape[1], params.softmax_scale, max_rows},
                                      stream_));
}

void CudaOps::indexer_topk_v41(const TensorView& q, const TensorView& w, const TensorView& keys,
                               const BatchView& batch, const IndexerV41Params& p, const TensorView& candidates,
                               const TensorView& idx) {
  using Cand = IndexerV41Params::Candidates;
  const int64_t T = q.shape[0], Hi = q.shape[1], di = q.shape[2], K = idx.shape[1];
  if (T == 0) return;
  DI_CHECK(q.is_contiguous() && keys.is_contiguous() && idx.dtype == DType::kI32 && idx.is_contiguous(),
           "indexer_topk_v41: q {} / keys {} / idx {}", q.shape_string(), keys.shape_string(), idx.shape_string());
  DI_CHECK(p.candidates == Cand::kNone ||
               (candidates.dtype == DType::kI32 && candidates.shape[0] == T &&
                candidates.shape[1] == p.candidate_topk_blocks && p.candidate_block_size > 0),
           "indexer_topk_v41: candidates {} for {} rows", candidates.shape_string(), T);
  DI_CHECK(k::indexer_v41_smem(static_cast<int>(Hi), static_cast<int>(di)) <= 200u << 10,
           "indexer_topk_v41: {} heads x {} dims exceed shared memory", Hi, di);
  int32_t max_pos = 0;
  for (int64_t t = 0; t < T; ++t) max_pos = std::max(max_pos, batch.h_positions[t]);
  // Score columns rounded up to 256 entries, as the V4 indexer: one launch shape (and step graph)
  // for 256 * ratio positions of growth.
  constexpr int64_t kLdQuantum = 256;
  const int64_t ld = std::max<int64_t>(1, ((max_pos + 1) / p.ratio + kLdQuantum - 1) / kLdQuantum * kLdQuantum);
  TensorView scores = alloc(DType::kF32, {T, ld});
  const int64_t ld_blocks = p.candidates == Cand::kPublish ? (ld + p.candidate_block_size - 1) / p.candidate_block_size : 0;
  TensorView block_max = ld_blocks > 0 ? alloc(DType::kF32, {T, ld_blocks}) : TensorView{};
  TensorView wf = w;
  if (w.dtype != DType::kF32) {
    wf = alloc(DType::kF32, {T, Hi});
    convert(w, wf);
  }
  DI_LAUNCH(k::launch_indexer_topk_v41(
      {q.data, act_type(q), dptr<float>(wf), keys.data, act_type(keys), dptr<int32_t>(batch.positions),
       dptr<int32_t>(batch.token_seq), dptr<int32_t>(batch.block_tables), batch.max_blocks, p.ratio, p.rows_per_block,
       static_cast<int>(Hi), static_cast<int>(di), static_cast<int>(K), p.score_scale, p.weight_scale,
       static_cast<int>(p.candidates), p.candidate_topk_blocks, p.candidate_block_size,
       p.candidates == Cand::kNone ? nullptr : dptr<int32_t>(candidates), dptr<float>(scores), ld,
       ld_blocks > 0 ? dptr<float>(block_max) : nullptr, ld_blocks, T, dptr<int32_t>(idx)},
      stream_));
}

}  // namespace deepinfer::ops::cuda
