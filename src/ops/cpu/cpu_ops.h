// CpuOps: the readable reference implementation of ops::Ops. Scalar F32 math, OpenMP over
// independent output rows only (never over a reduction), so results are identical for any thread
// count and batch composition. Used by CI and as the oracle for the CUDA backend.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ops/cpu/fp8_order_ref.h"
#include "ops/cpu/host_arena.h"
#include "ops/ops.h"
#include "tensor/tensor.h"

namespace deepinfer::ops::cpu {

// Not final: tests derive from it to run the model's fixed-shape (graph replay) step path on the CPU.
class CpuOps : public Ops {
 public:
  tensor::Device device() const override { return tensor::Device::kCpu; }

  void on_begin_step() override { workspace_.reset(); }
  size_t workspace_mark() override { return workspace_.mark(); }
  void workspace_release(size_t mark) override {
    DI_CHECK(side_idle(), "workspace released inside a side region (side_join first)");
    workspace_.release(mark);
  }
  void release_workspace_memory() override { workspace_.release_memory(); }
  TensorView alloc(DType dtype, std::initializer_list<int64_t> shape) override;
  TensorView upload(const void* host, DType dtype, std::initializer_list<int64_t> shape) override;
  TensorView alloc_persistent(DType dtype, std::initializer_list<int64_t> shape) override;
  void free_persistent(const TensorView& t) override;
  TensorView alloc_host(DType dtype, std::initializer_list<int64_t> shape) override {
    return alloc_persistent(dtype, shape);  // the CPU's memory is the host's
  }
  void copy(const TensorView& src, const TensorView& dst) override;
  void fill(const TensorView& dst, float value) override;
  void synchronize() override {}

  void embed(const TensorView& ids, const TensorView& table, const TensorView& out) override;
  void broadcast_streams(const TensorView& x, const TensorView& out) override;
  void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& out) override;
  void add(const TensorView& a, const TensorView& b, const TensorView& out) override;
  void convert(const TensorView& x, const TensorView& out) override;

  void linear(const TensorView& x, const LinearWeight& w, const TensorView& y,
              const LinearOptions& options) override;
  void linear_grouped(const TensorView& x, const LinearWeight& w, const TensorView& y,
                      const LinearOptions& options) override;
  void swiglu(const TensorView& g, const TensorView& u, float limit, const TensorView& out) override;

  void hc_pre(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& u,
              const TensorView& post, const TensorView& comb) override;
  void hc_post(const TensorView& o, const TensorView& x, const TensorView& post, const TensorView& comb,
               const TensorView& out) override;
  void hc_head(const TensorView& x, const HcHeadWeights& w, const HcParams& params, const TensorView& y) override;

  void rope(const TensorView& x, const TensorView& positions, const RopeParams& params) override;
  void fp8_fake_quant(const TensorView& x, int64_t n_dims, int block) override;
  void hadamard_fp4_fake_quant(const TensorView& x) override;

  void window_store(const TensorView& kv, const BatchView& batch, const TensorView& window) override;
  void compress(const TensorView& kv, const TensorView& score, const TensorView& ape, const BatchView& batch,
                const EmitPlan& plan, const CompressParams& params, const TensorView& state_kv,
                const TensorView& state_score, const TensorView& rows) override;
  void store_rows(const TensorView& rows, const EmitPlan& plan, const TensorView& pool) override;
  void indexer_topk(const TensorView& q, const TensorView& w, const TensorView& keys, const BatchView& batch,
                    int ratio, int32_t rows_per_block, float weight_scale, const TensorView& idx) override;
  void sparse_attention(const TensorView& q, const TensorView& kv_new, const TensorView& window,
                        const TensorView& comp, const TensorView& comp_idx, const TensorView& sinks,
                        const BatchView& batch, const AttentionParams& params, const TensorView& out) override;

  void moe_route(const TensorView& logits, const TensorView& bias, const TensorView& tid2eid,
                 const TensorView& token_ids, const MoeParams& params, const TensorView& sel,
                 const TensorView& weights) override;
  void moe_experts(const TensorView& x, const TensorView& sel, const TensorView& weights,
                   std::span<const ExpertWeights> experts, const MoeParams& params, const TensorView& out) override;

  void gather_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out) override;
  void scatter_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out) override;
  void take_tokens(const TensorView& source, std::span<const int32_t> from, const TensorView& tokens) override;
  void argmax_rows(const TensorView& logits, const TensorView& out) override;
  void sample_rows(const TensorView& logits, std::span<const SampleRow> rows, const TensorView& out) override;
  void adjust_logits(const TensorView& logits, std::span<const AdjustRow> rows, std::span<const AdjustEntry> entries,
                     std::span<const int32_t> stops, std::span<const uint32_t> masks, const TensorView& pending_ids,
                     const TensorView& out) override;
  void logprob_rows(const TensorView& logits, const TensorView& tokens, const TensorView& logprob,
                    const TensorView& top_ids, const TensorView& top_logprobs) override;
  void token_rank_rows(const TensorView& logits, const TensorView& tokens, const TensorView& rank) override;

  // DeepSeek-V4.1 (cpu_v41_*.cc).
  void kv_fake_quant(const TensorView& x, KvQuantFormat format) override;
  void hc_mix(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& pre,
              const TensorView& post, const TensorView& comb) override;
  void hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& u) override;
  void indexer_topk_v41(const TensorView& q, const TensorView& w, const TensorView& keys, const BatchView& batch,
                        const IndexerV41Params& params, const TensorView& candidates, const TensorView& idx) override;
  void engram_gate(const TensorView& x, const TensorView& kv, const TensorView& q_weight, const TensorView& k_weight,
                   const TensorView& live, float eps, const TensorView& out) override;
  void block_attention(const TensorView& q, const TensorView& kv_block, const TensorView& window,
                       const TensorView& sinks, const BatchView& batch, const AttentionParams& params,
                       const TensorView& out) override;

  // DeepSeek-V4.1 vision tower (cpu_vision.cc).
  void add_bias(const TensorView& x, const TensorView& bias, const TensorView& out) override;
  void gelu_erf(const TensorView& x, const TensorView& out) override;
  void vision_rope(const TensorView& x, const VisionAttentionParams& params) override;
  void vision_attention(const TensorView& qkv, const VisionAttentionParams& params, const TensorView& out) override;

  // The FP8 order (cpu_linear.cc): linear() adds the launches the CUDA backend's FP8-order kernels
  // take as they do, with this step model (nullopt: the exact dot). Set from the environment at
  // construction (fp8_order_model_from_env); tests set it directly.
  void set_fp8_order_model(std::optional<Fp8MmaModel> model) { fp8_order_ = model; }

 private:
  HostArena workspace_;
  std::vector<tensor::Buffer> persistent_;
  std::optional<Fp8MmaModel> fp8_order_ = fp8_order_model_from_env();
};

}  // namespace deepinfer::ops::cpu
