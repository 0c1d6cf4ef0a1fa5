// CudaOps: the CUDA (Hopper, sm_90a) implementation of ops::Ops. Launchers validate views once,
// fill kernel params and launch on the ops' stream; kernels live in src/kernels. All per-step
// memory comes from a device arena sized at construction (grown with a warning, which drops the
// recorded graphs), so a warmed-up step performs no cudaMalloc.
//
// Step graphs (cuda_graphs.cc): a step is first run as a host-only pass that launches nothing —
// uploads are staged in pinned memory and every workspace address, upload size and launch site is
// hashed into the step's signature. A graph recorded under the same signature performs exactly
// the launches that pass would have made (same kernels, same addresses, same sizes), so it is
// replayed instead; when to record and which graphs to keep is GraphCache's policy. Numerically
// nothing changes: the graph runs the eager kernels with the eager parameters.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/launch.h"
#include "ops/graph_cache.h"
#include "ops/ops.h"

namespace deepinfer::ops::cuda {

struct CudaOpsOptions {
  int device = 0;
  size_t workspace_bytes = size_t{256} << 20;
  // Step graphs (DEEPINFER_CUDA_GRAPHS=0 turns them off): the cache policy (ops/graph_cache.h)
  // and the pinned staging memory their uploads are read from.
  bool graphs = true;
  // Side regions on a second stream (DEEPINFER_CUDA_SIDE_STREAM=0 turns them off: program order).
  bool side_streams = true;
  GraphCache::Options graph_cache;
  size_t staging_bytes = size_t{4} << 20;
};

// What the step-graph cache did (tests and the bench report it).
struct GraphStats {
  int64_t replayed = 0;  // steps run by replaying a recorded graph
  int64_t captured = 0;  // graphs recorded
  int64_t eager = 0;     // prepared steps that ran eagerly (first sight, or not replayable)
  int64_t failed = 0;    // recordings that failed or did not reproduce the prepared signature
  // The last recording's nodes by type: kernels, copies, memsets, the rest (event / empty nodes).
  int64_t last_kernels = 0, last_copies = 0, last_memsets = 0, last_other = 0;
};

class CudaOps final : public Ops {
 public:
  explicit CudaOps(const CudaOpsOptions& options = {});
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  tensor::Device device() const override { return tensor::Device::kCuda; }
  cudaStream_t stream() const { return stream_; }

  void on_begin_step() override;
  size_t workspace_mark() override;
  void workspace_release(size_t mark) override;
  TensorView alloc(DType dtype, std::initializer_list<int64_t> shape) override;
  TensorView upload(const void* host, DType dtype, std::initializer_list<int64_t> shape) override;
  TensorView alloc_persistent(DType dtype, std::initializer_list<int64_t> shape) override;
  void free_persistent(const TensorView& t) override;
  int64_t device_free_bytes() const override;
  TensorView alloc_host(DType dtype, std::initializer_list<int64_t> shape) override;
  void copy(const TensorView& src, const TensorView& dst) override;
  void fill(const TensorView& dst, float value) override;
  void synchronize() override;
  uint64_t copy_to_host_async(const TensorView& src, const TensorView& dst) override;
  void wait_host_copy(uint64_t ticket) override;

  bool graphs_enabled() const override { return graphs_on_; }
  void graph_prepare(uint64_t state_key) override;
  GraphStep graph_replay() override;
  void graph_capture_begin() override;
  bool graph_capture_end() override;

  const GraphStats& graph_stats() const { return graph_stats_; }
  GraphHostTime graph_host_time() const override { return host_time_; }

  void embed(const TensorView& ids, const TensorView& table, const TensorView& out) override;
  void broadcast_streams(const TensorView& x, const TensorView& out) override;
  void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& out) override;
  void rms_norm_quant(const TensorView& x, const TensorView& weight, float eps, const TensorView& out,
                      int block) override;
  void add(const TensorView& a, const TensorView& b, const TensorView& out) override;
  void convert(const TensorView& x, const TensorView& out) override;

  bool prepare_linear(LinearWeight& w) override;
  bool to_fp4_device_layout(const TensorView& codes) override;
  void linear(const TensorView& x, const LinearWeight& w, const TensorView& y, const LinearOptions& options) override;
  void linear_pair(const TensorView& x, const LinearWeight& w0, const LinearWeight& w1, const TensorView& y0,
                   const TensorView& y1, const LinearOptions& options) override;
  void linear_grouped(const TensorView& x, const LinearWeight& w, const TensorView& y,
                      const LinearOptions& options) override;
  void swiglu(const TensorView& g, const TensorView& u, float limit, const TensorView& out) override;
  void swiglu_quant(const TensorView& g, const TensorView& u, float limit, const TensorView& out, int block) override;
  LinearOptions prequantise(const TensorView& x, int block) override;

  void hc_pre(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& u,
              const TensorView& post, const TensorView& comb) override;
  void hc_pre_norm(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& norm, float eps,
                   const TensorView& u, const TensorView& post, const TensorView& comb, const QuantCopy& uq) override;
  void hc_post(const TensorView& o, const TensorView& x, const TensorView& post, const TensorView& comb,
               const TensorView& out) override;
  void hc_post_pre_norm(const TensorView& o, const TensorView& x, const TensorView& post, const TensorView& comb,
                        const TensorView& out, const HcWeights& w, const HcParams& params, const TensorView& norm,
                        float eps, const TensorView& u, const QuantCopy& uq) override;
  void hc_head(const TensorView& x, const HcHeadWeights& w, const HcParams& params, const TensorView& y) override;

  void rope(const TensorView& x, const TensorView& positions, const RopeParams& params) override;
  void fp8_fake_quant(const TensorView& x, int64_t n_dims, int block) override;
  void norm_rope(const TensorView& x, const TensorView& weight, float eps, const TensorView& positions,
                 const RopeParams& params, int64_t quant_dims, int quant_block) override;
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
  void moe_experts_out(const TensorView& x, const TensorView& sel, const TensorView& weights,
                       std::span<const ExpertWeights> experts, const MoeParams& params, const TensorView& shared,
                       const TensorView& out, int shared_lane = -1) override;
  void moe_route_experts_out(const MoeRouting& r, const TensorView& x, std::span<const ExpertWeights> experts,
                             const MoeParams& params, const TensorView& shared, const TensorView& out,
                             int shared_lane = -1) override;

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

  // DeepSeek-V4.1 (cuda_ops_v41.cc; kernels/v41/): the ops ops.h's V4.1 section lists.
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

  // Activations as BF16 for the tensor-core GEMM, FP8-fake-quantised per `block` when > 0.
  TensorView activations_bf16(const TensorView& x, int block);
  // p.A for the tensor-core GEMM p of activations x quantised in blocks of `block` (0: none): x
  // itself when the small-M kernel folds the quantisation into its staging (gemm_fuses_act_quant),
  // else activations_bf16(x, block). p as it will be launched but for A and its partials.
  void set_gemm_activations(kernels::GemmParams& p, const TensorView& x, int block);

 private:
  // pair_w / pair_y: a second weight of w's shape and format and its output (linear_pair).
  void linear_impl(const TensorView& x, const LinearWeight& w, const TensorView& y, int n_groups,
                   const LinearOptions& options, const LinearWeight* pair_w = nullptr,
                   const TensorView* pair_y = nullptr);
  // moe_experts (shared empty, out: the routed sum [T, D] F32) or moe_experts_out (out: the
  // sublayer output with shared added, rounded by the combine).
  // shared_lane >= 0: the side lane writing `shared`, joined just before the combine reads it.
  // moe_experts_out's fused path (the combine adds `shared` and rounds), after the routing `route`
  // when given (nullptr: sel and weights are given).
  void moe_sublayer_out(const TensorView& x, const TensorView& sel, const TensorView& weights,
                        std::span<const ExpertWeights> experts, const MoeParams& params, const TensorView& shared,
                        const TensorView& out, int shared_lane, const kernels::MoeRouteParams* route);
  // route: the routing that writes sel and weights, run by (or just before) the grouping launch;
  // nullptr: sel and weights are given.
  void moe_experts_impl(const TensorView& x, const TensorView& sel, const TensorView& weights,
                        std::span<const ExpertWeights> experts, const MoeParams& params, const TensorView& shared,
                        const TensorView& out, int shared_lane = -1, const kernels::MoeRouteParams* route = nullptr);
  // hc_pre's launch; norm: fold u = RMSNorm(u) with it (hc_pre_norm), else nullptr; post_of: x is
  // first computed as hc_post of these (o, x before, post, comb: hc_post_pre_norm), else nullptr;
  // uq: u's quantised copy (with the fold: in the same launch where the kernel can, else after it).
  struct HcPostInputs {
    const TensorView *o, *x, *post, *comb;
  };
  void hc_pre_launch(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& u,
                     const TensorView& post, const TensorView& comb, const TensorView* norm, float eps,
                     const HcPostInputs* post_of = nullptr, const QuantCopy& uq = {});
  void* arena_alloc(size_t bytes);

  // ---- step graphs (cuda_graphs.cc) ----
  enum class Mode { kEager, kPrepare, kCapture };
  // A launch site (DI_LAUNCH): eager and capture launch, prepare only adds the site to the
  // signature.
  bool launch_site(const char* file, int line);
  void mix(uint64_t v);  // into the step's signature (prepare and capture)
  // Host bytes of an upload in pinned staging at the pass's next offset (nullptr: no room, the
  // step is not replayable).
  const void* stage(const void* host, size_t bytes);
  // Host bytes of an eager upload in the page-locked ring (below).
  const void* eager_stage(const void* host, size_t bytes);
  void start_pass(Mode mode);  // prepare or capture: empty signature (the state key), staging
  // Stores a recording's result (nullptr: failed) and destroys the graph it evicts, if any.
  void keep_graph(uint64_t sig, cudaGraphExec_t exec);
  void drop_graphs();
  void count_nodes(cudaGraph_t graph);  // into graph_stats_ (and DEEPINFER_CUDA_GRAPH_DOT)
  Mode mode_ = Mode::kEager;
  bool graphs_on_ = false;
  uint64_t sig_ = 0, prepared_sig_ = 0, state_key_ = 0;
  bool replayable_ = true;  // false once the pass did something a graph cannot replay
  // The current pass's pinned staging: one of kStagingSlots page-locked buffers used in turn, so
  // the host can prepare step n + 1 while step n's copy out of the previous slot is still queued
  // (the copy of a slot is waited for only when the ring comes round to it again).
  uint8_t* staging_ = nullptr;
  size_t staging_size_ = 0, staging_used_ = 0, staging_wanted_ = 0;
  // The device copy of staging that a recorded step's uploads point into, filled from the slot by
  // one copy queued just before the graph's launch (DEEPINFER_CUDA_ONE_UPLOAD=0: nullptr, one
  // copy node per upload inside the graph, reading one fixed slot — the A/B switch, which keeps a
  // ring of one and waits for the last replay before staging again). prepared_staged_: bytes the
  // prepare pass staged.
  uint8_t* staging_dev_ = nullptr;
  bool one_upload_ = true;
  size_t prepared_staged_ = 0;
  static constexpr int kStagingSlots = 3;
  uint8_t* staging_slots_[kStagingSlots] = {};
  cudaEvent_t slot_copied_[kStagingSlots] = {};  // recorded after the copy out of each slot
  int n_staging_slots_ = 1, staging_slot_ = 0;
  void upload_staging();  // the prepared bytes into staging_dev_, queued (one_upload_ only)
  cudaEvent_t graph_done_ = nullptr;  // recorded after each replay: staging is free again
  // copy_to_host_async's events, by ticket modulo kHostCopiesInFlight.
  cudaEvent_t host_copy_done_[kHostCopiesInFlight] = {};
  uint64_t next_host_copy_ = 1;  // ticket 0 means "complete"
  // ---- copy queues beside the main stream (cuda_copy_streams.cc) ----
  // The staging upload of a replayed step and copy_to_host_async's copies run on streams of their
  // own (DEEPINFER_CUDA_COPY_STREAMS=0: on the main stream), so that neither sits between one
  // step's sampling and the next step's first kernel: the upload waits only for the last graph
  // (the one reader of staging_dev_) and overlaps the sampling; a copy back waits for the
  // sampling and overlaps the next forward. The main stream joins a copy back before its next
  // eager work or right after the next graph launch (join_host_copies), so nothing queued later
  // can overwrite the copy's source before it has been read.
  bool copy_streams_on_ = true;
  cudaStream_t h2d_stream_ = nullptr, d2h_stream_ = nullptr;
  cudaEvent_t copy_fork_ = nullptr;  // recorded on the main stream where a copy back starts
  bool host_copy_pending_ = false;   // a copy back the main stream has not joined yet
  void create_copy_streams();
  void destroy_copy_streams();
  void join_host_copies();
  void upload_staging_beside();  // upload_staging on h2d_stream_
  std::unique_ptr<GraphCache> graph_cache_;  // which steps replay / record (handles: cudaGraphExec_t)
  GraphStats graph_stats_;
  GraphHostTime host_time_;
  std::chrono::steady_clock::time_point prepare_start_;  // of the current prepare pass
  // The layer's expert descriptors on the device.
  const kernels::WeightDesc* expert_descs(std::span<const ExpertWeights> experts);
  // Gives a tensor-core GEMM launch the workspaces its kernel asks for: split-K partials with the
  // zeroed tile counters it folds them with (kernels keep them zeroed; allocated once), and the
  // packed path's staging. p: the launch as it will run, but for those fields.
  void attach_gemm_workspace(kernels::GemmParams& p);
  int device_ = 0;
  // The stream launches go to: main_stream_, or a lane's side stream inside its side region.
  cudaStream_t stream_ = nullptr;
  cudaStream_t main_stream_ = nullptr;
  // ---- side regions (cuda_side_stream.cc; Ops checks the call order) ----
  void on_side_begin(int lane) override;
  void on_side_end(int lane) override;
  void on_side_join(int lane) override;
  bool side_on_ = true;  // CudaOpsOptions::side_streams and DEEPINFER_CUDA_SIDE_STREAM != 0
  // Per lane, created with its first region: the stream, its fork / join events, and its small-M
  // GEMM tile counters (regions of two lanes may run at once, beside the main stream).
  struct SideLane {
    cudaStream_t stream = nullptr;
    cudaEvent_t fork = nullptr, join = nullptr;
    TensorView counters;
  };
  SideLane side_[kSideLanes];
  int side_lane_ = -1;  // the lane stream_ belongs to, -1: the main stream
  // Workspace arena: the current chunk plus chunks outgrown during this step (freed next step).
  void* arena_ = nullptr;
  size_t arena_size_ = 0, arena_used_ = 0;
  uint64_t arena_epoch_ = 0;  // bumped when the arena chunk is replaced: older marks are void
  std::vector<void*> retired_;
  std::vector<void*> persistent_;
  std::vector<void*> pinned_;  // alloc_host's page-locked buffers
  // Eager uploads go through a page-locked ring: a copy from pageable memory may wait for the
  // stream's queued work (the driver stages it), so an upload queued behind a step — the sampling
  // ops' parameters, after the model's graph — held the host until the step was done; from
  // pinned memory the copy is queued like a launch. Bytes are only appended; when the ring is
  // full the device is synchronised (every copy out of it is then done) and it starts over,
  // grown if one upload needs it (uploads over 8 MB copy from their pageable source).
  uint8_t* eager_ring_ = nullptr;
  size_t eager_ring_size_ = 0, eager_ring_used_ = 0;
  struct ExpertDescs {
    std::vector<kernels::WeightDesc> host;  // what dev holds
    TensorView dev;
  };
  std::unordered_map<const void*, ExpertDescs> expert_descs_;  // per MoE layer
  TensorView gemm_counters_;
  int64_t prepared_bytes_ = 0;  // LinearWeight::prepared copies made (prepare_linear's budget)
};

// True when a CUDA device is present (tests skip otherwise).
bool cuda_available();

}  // namespace deepinfer::ops::cuda
