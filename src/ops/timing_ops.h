// TimingOps: an Ops decorator that synchronises after every op and accumulates wall time per op
// name, for the benchmark's per-kernel breakdown. It changes nothing numerically; the extra
// synchronisation makes totals slower than an undecorated run, so report shares, not sums. A model
// built over it must run the backend's own launches: it forwards the weight preparation and the
// backend's fused calls (moe_route_experts_out) rather than taking the base class's defaults.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <string>

#include "ops/ops.h"

namespace deepinfer::ops {

class TimingOps final : public Ops {
 public:
  explicit TimingOps(Ops* inner) : inner_(inner) {}
  // op name -> (calls, seconds)
  const std::map<std::string, std::pair<int64_t, double>>& totals() const { return totals_; }
  // The same per linear weight shape ("linear_fp8_fp4 1024->32768 x1"): where GEMM time goes.
  const std::map<std::string, std::pair<int64_t, double>>& linear_totals() const { return linear_totals_; }
  void reset() {
    totals_.clear();
    linear_totals_.clear();
  }

  tensor::Device device() const override { return inner_->device(); }
  // Regions run in program order here (the inner backend's hooks are not used).
  void on_begin_step() override { inner_->begin_step(); }
  size_t workspace_mark() override { return inner_->workspace_mark(); }
  void workspace_release(size_t mark) override { inner_->workspace_release(mark); }
  void release_workspace_memory() override { inner_->release_workspace_memory(); }
  TensorView alloc(DType dtype, std::initializer_list<int64_t> shape) override { return inner_->alloc(dtype, shape); }
  TensorView upload(const void* host, DType dtype, std::initializer_list<int64_t> shape) override {
    return inner_->upload(host, dtype, shape);
  }
  void free_persistent(const TensorView& t) override { inner_->free_persistent(t); }
  int64_t device_free_bytes() const override { return inner_->device_free_bytes(); }
  TensorView alloc_persistent(DType dtype, std::initializer_list<int64_t> shape) override {
    return inner_->alloc_persistent(dtype, shape);
  }
  TensorView alloc_host(DType dtype, std::initializer_list<int64_t> shape) override {
    return inner_->alloc_host(dtype, shape);
  }
  void copy(const TensorView& src, const TensorView& dst) override { timed("copy", [&] { inner_->copy(src, dst); }); }
  void fill(const TensorView& dst, float value) override { timed("fill", [&] { inner_->fill(dst, value); }); }
  void synchronize() override { inner_->synchronize(); }
  // A model built over this decorator prepares its weights as over the backend (a weight already
  // prepared stays as it is), so the timed launches are the model's own.
  bool prepare_linear(LinearWeight& w) override { return inner_->prepare_linear(w); }
  uint64_t copy_to_host_async(const TensorView& src, const TensorView& dst) override {
    return inner_->copy_to_host_async(src, dst);
  }
  void wait_host_copy(uint64_t ticket) override { inner_->wait_host_copy(ticket); }

  void embed(const TensorView& a, const TensorView& b, const TensorView& c) override {
    timed("embed", [&] { inner_->embed(a, b, c); });
  }
  void broadcast_streams(const TensorView& a, const TensorView& b) override {
    timed("broadcast_streams", [&] { inner_->broadcast_streams(a, b); });
  }
  void rms_norm(const TensorView& x, const TensorView& w, float eps, const TensorView& o) override {
    timed("rms_norm", [&] { inner_->rms_norm(x, w, eps, o); });
  }
  void rms_norm_quant(const TensorView& x, const TensorView& w, float eps, const TensorView& o, int b) override {
    timed("rms_norm_quant", [&] { inner_->rms_norm_quant(x, w, eps, o, b); });
  }
  void add(const TensorView& a, const TensorView& b, const TensorView& o) override { timed("add", [&] { inner_->add(a, b, o); }); }
  void convert(const TensorView& x, const TensorView& o) override { timed("convert", [&] { inner_->convert(x, o); }); }
  void linear(const TensorView& x, const LinearWeight& w, const TensorView& y, const LinearOptions& o) override {
    const char* name = w.is_quantized() ? "linear_fp8_fp4" : "linear_bf16";
    timed(name, [&] { inner_->linear(x, w, y, o); }, linear_key(name, x, w));
  }
  void linear_pair(const TensorView& x, const LinearWeight& w0, const LinearWeight& w1, const TensorView& y0,
                   const TensorView& y1, const LinearOptions& o) override {
    timed("linear_pair", [&] { inner_->linear_pair(x, w0, w1, y0, y1, o); }, linear_key("linear_pair", x, w0));
  }
  void linear_grouped(const TensorView& x, const LinearWeight& w, const TensorView& y, const LinearOptions& o) override {
    timed("linear_grouped", [&] { inner_->linear_grouped(x, w, y, o); }, linear_key("linear_grouped", x, w));
  }
  void swiglu(const TensorView& g, const TensorView& u, float l, const TensorView& o) override {
    timed("swiglu", [&] { inner_->swiglu(g, u, l, o); });
  }
  void swiglu_quant(const TensorView& g, const TensorView& u, float l, const TensorView& o, int b) override {
    timed("swiglu_quant", [&] { inner_->swiglu_quant(g, u, l, o, b); });
  }
  LinearOptions prequantise(const TensorView& x, int b) override {
    LinearOptions o;
    timed("prequantise", [&] { o = inner_->prequantise(x, b); });
    return o;
  }
  void hc_pre(const TensorView& x, const HcWeights& w, const HcParams& p, const TensorView& u, const TensorView& post,
              const TensorView& comb) override {
    timed("hc_pre", [&] { inner_->hc_pre(x, w, p, u, post, comb); });
  }
  void hc_pre_norm(const TensorView& x, const HcWeights& w, const HcParams& p, const TensorView& norm, float eps,
                   const TensorView& u, const TensorView& post, const TensorView& comb, const QuantCopy& uq) override {
    timed("hc_pre_norm", [&] { inner_->hc_pre_norm(x, w, p, norm, eps, u, post, comb, uq); });
  }
  void hc_post(const TensorView& o, const TensorView& x, const TensorView& post, const TensorView& comb,
               const TensorView& out) override {
    timed("hc_post", [&] { inner_->hc_post(o, x, post, comb, out); });
  }
  void hc_post_pre_norm(const TensorView& o, const TensorView& x, const TensorView& post, const TensorView& comb,
                        const TensorView& out, const HcWeights& w, const HcParams& p, const TensorView& norm,
                        float eps, const TensorView& u, const QuantCopy& uq) override {
    timed("hc_post_pre_norm", [&] { inner_->hc_post_pre_norm(o, x, post, comb, out, w, p, norm, eps, u, uq); });
  }
  void hc_head(const TensorView& x, const HcHeadWeights& w, const HcParams& p, const TensorView& y) override {
    timed("hc_head", [&] { inner_->hc_head(x, w, p, y); });
  }
  void rope(const TensorView& x, const TensorView& pos, const RopeParams& p) override { timed("rope", [&] { inner_->rope(x, pos, p); }); }
  void fp8_fake_quant(const TensorView& x, int64_t n, int b) override { timed("fp8_fake_quant", [&] { inner_->fp8_fake_quant(x, n, b); }); }
  void norm_rope(const TensorView& x, const TensorView& w, float eps, const TensorView& pos, const RopeParams& p,
                 int64_t quant_dims, int quant_block) override {
    timed("norm_rope", [&] { inner_->norm_rope(x, w, eps, pos, p, quant_dims, quant_block); });
  }
  void hadamard_fp4_fake_quant(const TensorView& x) override { timed("hadamard_fp4", [&] { inner_->hadamard_fp4_fake_quant(x); }); }
  void window_store(const TensorView& kv, const BatchView& b, const TensorView& w) override {
    timed("window_store", [&] { inner_->window_store(kv, b, w); });
  }
  void compress(const TensorView& kv, const TensorView& s, const TensorView& ape, const BatchView& b, const EmitPlan& p,
                const CompressParams& cp, const TensorView& sk, const TensorView& ss, const TensorView& r) override {
    timed("compress", [&] { inner_->compress(kv, s, ape, b, p, cp, sk, ss, r); });
  }
  void store_rows(const TensorView& r, const EmitPlan& p, const TensorView& pool) override {
    timed("store_rows", [&] { inner_->store_rows(r, p, pool); });
  }
  void indexer_topk(const TensorView& q, const TensorView& w, const TensorView& k, const BatchView& b, int ratio,
                    int32_t rpb, float ws, const TensorView& idx) override {
    timed("indexer_topk", [&] { inner_->indexer_topk(q, w, k, b, ratio, rpb, ws, idx); });
  }
  void sparse_attention(const TensorView& q, const TensorView& kv, const TensorView& w, const TensorView& c,
                        const TensorView& ci, const TensorView& s, const BatchView& b, const AttentionParams& p,
                        const TensorView& o) override {
    timed("sparse_attention", [&] { inner_->sparse_attention(q, kv, w, c, ci, s, b, p, o); });
  }
  void moe_route(const TensorView& l, const TensorView& b, const TensorView& t, const TensorView& ids, const MoeParams& p,
                 const TensorView& sel, const TensorView& w) override {
    timed("moe_route", [&] { inner_->moe_route(l, b, t, ids, p, sel, w); });
  }
  void moe_experts(const TensorView& x, const TensorView& sel, const TensorView& w, std::span<const ExpertWeights> e,
                   const MoeParams& p, const TensorView& o) override {
    timed("moe_experts", [&] { inner_->moe_experts(x, sel, w, e, p, o); });
  }
  void moe_experts_out(const TensorView& x, const TensorView& sel, const TensorView& w,
                       std::span<const ExpertWeights> e, const MoeParams& p, const TensorView& s,
                       const TensorView& o, int shared_lane = -1) override {
    // Regions run in program order here (the hooks are not forwarded): join this wrapper's own.
    if (shared_lane >= 0) side_join(shared_lane);
    timed("moe_experts", [&] { inner_->moe_experts_out(x, sel, w, e, p, s, o); });
  }
  // The model's one call for the routing and the experts (a backend may route inside the grouping
  // launch): timed as moe_experts, the routing included, as the model runs it.
  void moe_route_experts_out(const MoeRouting& r, const TensorView& x, std::span<const ExpertWeights> e,
                             const MoeParams& p, const TensorView& s, const TensorView& o, int shared_lane = -1) override {
    if (shared_lane >= 0) side_join(shared_lane);
    timed("moe_experts", [&] { inner_->moe_route_experts_out(r, x, e, p, s, o); });
  }
  void gather_rows(const TensorView& x, std::span<const int32_t> r, const TensorView& o) override {
    timed("gather_rows", [&] { inner_->gather_rows(x, r, o); });
  }
  void scatter_rows(const TensorView& x, std::span<const int32_t> r, const TensorView& o) override {
    timed("scatter_rows", [&] { inner_->scatter_rows(x, r, o); });
  }
  void take_tokens(const TensorView& s, std::span<const int32_t> f, const TensorView& t) override {
    timed("take_tokens", [&] { inner_->take_tokens(s, f, t); });
  }
  void argmax_rows(const TensorView& l, const TensorView& o) override {
    timed("argmax_rows", [&] { inner_->argmax_rows(l, o); });
  }
  void sample_rows(const TensorView& l, std::span<const SampleRow> r, const TensorView& o) override {
    timed("sample_rows", [&] { inner_->sample_rows(l, r, o); });
  }
  void logprob_rows(const TensorView& l, const TensorView& t, const TensorView& lp, const TensorView& ti,
                    const TensorView& tl) override {
    timed("logprob_rows", [&] { inner_->logprob_rows(l, t, lp, ti, tl); });
  }
  void token_rank_rows(const TensorView& l, const TensorView& t, const TensorView& r) override {
    timed("token_rank_rows", [&] { inner_->token_rank_rows(l, t, r); });
  }
  void adjust_logits(const TensorView& l, std::span<const AdjustRow> r, std::span<const AdjustEntry> e,
                     std::span<const int32_t> s, std::span<const uint32_t> m, const TensorView& p,
                     const TensorView& o) override {
    timed("adjust_logits", [&] { inner_->adjust_logits(l, r, e, s, m, p, o); });
  }

 private:
  static std::string linear_key(const char* name, const TensorView& x, const LinearWeight& w) {
    return std::string(name) + " " + std::to_string(w.in) + "->" + std::to_string(w.out) + " x" +
           std::to_string(x.numel() / std::max<int64_t>(1, x.shape[x.rank - 1]));
  }
  template <typename F>
  void timed(const char* name, F&& f, const std::string& detail = {}) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    inner_->synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto& e = totals_[name];
    e.first += 1;
    e.second += s;
    if (!detail.empty()) {
      auto& d = linear_totals_[detail];
      d.first += 1;
      d.second += s;
    }
  }
  Ops* inner_;
  std::map<std::string, std::pair<int64_t, double>> totals_;
  std::map<std::string, std::pair<int64_t, double>> linear_totals_;
};

}  // namespace deepinfer::ops
