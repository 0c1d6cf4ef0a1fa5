// CountingOps: an ops::Ops that forwards every call to the CPU reference and counts the
// multiply-adds of the matrix work (dense / grouped linears, routed experts, attention, indexer
// scoring). Used by ced_prefill to measure what compact CED prefill saves; norms, RoPE and other
// elementwise work are left out (well under 1% of a prefill).
#pragma once

#include <cstdint>

#include "ops/cpu/cpu_ops.h"

namespace deepinfer::bench {

using ops::BatchView;
using tensor::TensorView;

class CountingOps final : public ops::Ops {
 public:
  int64_t macs = 0;

  tensor::Device device() const override { return cpu_.device(); }
  void on_begin_step() override { cpu_.begin_step(); }
  TensorView alloc(ops::DType d, std::initializer_list<int64_t> s) override { return cpu_.alloc(d, s); }
  TensorView upload(const void* h, ops::DType d, std::initializer_list<int64_t> s) override { return cpu_.upload(h, d, s); }
  TensorView alloc_persistent(ops::DType d, std::initializer_list<int64_t> s) override { return cpu_.alloc_persistent(d, s); }
  void free_persistent(const TensorView& t) override { cpu_.free_persistent(t); }
  TensorView alloc_host(ops::DType d, std::initializer_list<int64_t> s) override { return cpu_.alloc_host(d, s); }
  void copy(const TensorView& a, const TensorView& b) override { cpu_.copy(a, b); }
  void fill(const TensorView& a, float v) override { cpu_.fill(a, v); }
  void synchronize() override {}
  void embed(const TensorView& i, const TensorView& t, const TensorView& o) override { cpu_.embed(i, t, o); }
  void broadcast_streams(const TensorView& x, const TensorView& o) override { cpu_.broadcast_streams(x, o); }
  void rms_norm(const TensorView& x, const TensorView& w, float e, const TensorView& o) override { cpu_.rms_norm(x, w, e, o); }
  void add(const TensorView& a, const TensorView& b, const TensorView& o) override { cpu_.add(a, b, o); }
  void convert(const TensorView& x, const TensorView& o) override { cpu_.convert(x, o); }
  void linear(const TensorView& x, const ops::LinearWeight& w, const TensorView& y, const ops::LinearOptions& o) override {
    macs += x.numel() / w.in * w.out * w.in;
    cpu_.linear(x, w, y, o);
  }
  void linear_grouped(const TensorView& x, const ops::LinearWeight& w, const TensorView& y,
                      const ops::LinearOptions& o) override {
    macs += x.shape[0] * w.out * w.in;
    cpu_.linear_grouped(x, w, y, o);
  }
  void swiglu(const TensorView& g, const TensorView& u, float l, const TensorView& o) override { cpu_.swiglu(g, u, l, o); }
  void hc_pre(const TensorView& x, const ops::HcWeights& w, const ops::HcParams& p, const TensorView& u,
              const TensorView& post, const TensorView& comb) override {
    macs += x.shape[0] * w.fn.numel();
    cpu_.hc_pre(x, w, p, u, post, comb);
  }
  void hc_post(const TensorView& o, const TensorView& x, const TensorView& p, const TensorView& c,
               const TensorView& out) override { cpu_.hc_post(o, x, p, c, out); }
  void hc_head(const TensorView& x, const ops::HcHeadWeights& w, const ops::HcParams& p, const TensorView& y) override {
    cpu_.hc_head(x, w, p, y);
  }
  void rope(const TensorView& x, const TensorView& p, const ops::RopeParams& r) override { cpu_.rope(x, p, r); }
  void fp8_fake_quant(const TensorView& x, int64_t n, int b) override { cpu_.fp8_fake_quant(x, n, b); }
  void hadamard_fp4_fake_quant(const TensorView& x) override { cpu_.hadamard_fp4_fake_quant(x); }
  void window_store(const TensorView& kv, const BatchView& b, const TensorView& w) override { cpu_.window_store(kv, b, w); }
  void compress(const TensorView& kv, const TensorView& s, const TensorView& ape, const BatchView& b,
                const ops::EmitPlan& plan, const ops::CompressParams& p, const TensorView& sk, const TensorView& ss,
                const TensorView& rows) override {
    cpu_.compress(kv, s, ape, b, plan, p, sk, ss, rows);
  }
  void store_rows(const TensorView& r, const ops::EmitPlan& p, const TensorView& pool) override { cpu_.store_rows(r, p, pool); }
  void indexer_topk(const TensorView& q, const TensorView& w, const TensorView& k, const BatchView& b, int ratio,
                    int32_t rpb, float ws, const TensorView& idx) override {
    cpu_.indexer_topk(q, w, k, b, ratio, rpb, ws, idx);
  }
  void sparse_attention(const TensorView& q, const TensorView& kv, const TensorView& window, const TensorView& comp,
                        const TensorView& comp_idx, const TensorView& sinks, const BatchView& b,
                        const ops::AttentionParams& p, const TensorView& out) override {
    const int64_t T = q.shape[0], H = q.shape[1], d = q.shape[2];
    for (int64_t t = 0; t < T; ++t) {
      const ops::SeqSpan& s = b.h_seqs[b.h_token_seq[t]];
      const int64_t pos = b.h_positions[t];
      int64_t n = pos + 1 - std::max<int64_t>({0, pos - p.window + 1, s.window_floor});
      if (!comp_idx.empty()) {
        for (int64_t k = 0; k < comp_idx.shape[1]; ++k) n += comp_idx.as<const int32_t>()[t * comp_idx.shape[1] + k] >= 0;
      }
      macs += 2 * n * H * d;  // q.k and p.v
    }
    cpu_.sparse_attention(q, kv, window, comp, comp_idx, sinks, b, p, out);
  }
  void moe_route(const TensorView& l, const TensorView& b, const TensorView& t2e, const TensorView& ids,
                 const ops::MoeParams& p, const TensorView& sel, const TensorView& w) override {
    cpu_.moe_route(l, b, t2e, ids, p, sel, w);
  }
  void moe_experts(const TensorView& x, const TensorView& sel, const TensorView& w,
                   std::span<const ops::ExpertWeights> e, const ops::MoeParams& p, const TensorView& out) override {
    const int64_t F = e.empty() ? 0 : e[0].w1.out;
    macs += x.shape[0] * p.n_experts_per_tok * 3 * F * x.shape[1];
    cpu_.moe_experts(x, sel, w, e, p, out);
  }
  void gather_rows(const TensorView& x, std::span<const int32_t> r, const TensorView& o) override { cpu_.gather_rows(x, r, o); }
  void scatter_rows(const TensorView& x, std::span<const int32_t> r, const TensorView& o) override { cpu_.scatter_rows(x, r, o); }
  void take_tokens(const TensorView& s, std::span<const int32_t> f, const TensorView& t) override { cpu_.take_tokens(s, f, t); }
  void argmax_rows(const TensorView& l, const TensorView& o) override { cpu_.argmax_rows(l, o); }
  void sample_rows(const TensorView& l, std::span<const SampleRow> r, const TensorView& o) override {
    cpu_.sample_rows(l, r, o);
  }
  void logprob_rows(const TensorView& l, const TensorView& t, const TensorView& lp, const TensorView& ti,
                    const TensorView& tl) override {
    cpu_.logprob_rows(l, t, lp, ti, tl);
  }
  void token_rank_rows(const TensorView& l, const TensorView& t, const TensorView& r) override {
    cpu_.token_rank_rows(l, t, r);
  }
  void adjust_logits(const TensorView& l, std::span<const AdjustRow> r, std::span<const AdjustEntry> e,
                     std::span<const int32_t> s, std::span<const uint32_t> m, const TensorView& p,
                     const TensorView& o) override {
    cpu_.adjust_logits(l, r, e, s, m, p, o);
  }

  void kv_fake_quant(const TensorView& x, ops::KvQuantFormat f) override { cpu_.kv_fake_quant(x, f); }
  void hc_mix(const TensorView& x, const ops::HcWeights& w, const ops::HcParams& p, const TensorView& pre,
              const TensorView& post, const TensorView& comb) override {
    macs += x.shape[0] * w.fn.numel();
    cpu_.hc_mix(x, w, p, pre, post, comb);
  }
  void hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& u) override { cpu_.hc_collapse(x, pre, u); }
  void indexer_topk_v41(const TensorView& q, const TensorView& w, const TensorView& keys, const BatchView& b,
                        const ops::IndexerV41Params& p, const TensorView& cand, const TensorView& idx) override {
    for (int64_t t = 0; t < q.shape[0]; ++t) macs += (b.h_positions[t] + 1) / p.ratio * q.shape[1] * q.shape[2];
    cpu_.indexer_topk_v41(q, w, keys, b, p, cand, idx);
  }
  void engram_gate(const TensorView& x, const TensorView& kv, const TensorView& qw, const TensorView& kw,
                   const TensorView& live, float eps, const TensorView& out) override {
    cpu_.engram_gate(x, kv, qw, kw, live, eps, out);
  }
  void block_attention(const TensorView& q, const TensorView& kv, const TensorView& window, const TensorView& sinks,
                       const BatchView& b, const ops::AttentionParams& p, const TensorView& out) override {
    cpu_.block_attention(q, kv, window, sinks, b, p, out);
  }

 private:
  ops::cpu::CpuOps cpu_;
};

}  // namespace deepinfer::bench
