// ops::Ops — the op interface the DeepSeek-V4 forward is written against, once, for every backend
// (CPU reference in ops/cpu, CUDA in ops/cuda). Each method is named after the math it performs
// and documents its shape contract; backends choose kernels/variants inside. Ops write into
// caller-provided outputs; the only allocations are from the per-step workspace (alloc) or
// persistent storage (alloc_persistent), both owned by the backend.
//
// Activation tensors may be F32 or BF16: the model picks BF16 under the official numerics contract
// (model_v4_flash.md §3) and F32 for plain dequantised math; every op accepts both and computes in
// F32. Batch invariance: every output row depends only on its own inputs (no cross-row reduction
// order depends on the batch), so a sequence's results never change with what else is batched.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>

#include "base/check.h"
#include "ops/batch.h"
#include "tensor/linear_weight.h"
#include "tensor/tensor.h"
#include "tensor/weight_bundles.h"

namespace deepinfer::ops {

using tensor::CompressorWeights;
using tensor::ExpertWeights;
using tensor::HcHeadWeights;
using tensor::HcWeights;
using tensor::DType;
using tensor::LinearWeight;
using tensor::TensorView;

struct LinearOptions {
  // > 0: quantise each activation row to FP8 E4M3 with one power-of-two scale per block of this
  // many input channels before the GEMM (§3.2); 0: use activations as they are.
  int act_quant_block = 0;
  // > 0 (with act_quant_block 0): the activations are already FP8-quantised per this many input
  // channels (a QuantCopy's rows, a quantising norm's output): used as they are, but a backend may
  // take them as FP8 codes and scales. 0: arbitrary values (wo_a's input, plain numerics).
  int act_fp8_block = 0;
};

// An op output's FP8-quantised copy for the GEMMs that read it: §3.2's activation quantisation done
// once, by the op that produces the activations, instead of by every GEMM launch that reads them
// (whose small-M kernels would repeat it in each CTA). `out` [rows, n] BF16 receives the output rows
// fake-quantised per `block` channels — what linear() with act_quant_block = block stages from
// them (the values are exact in BF16), so linear() on `out` with act_quant_block = 0 gives the
// same bits. block 0: no copy.
struct QuantCopy {
  TensorView out;
  int block = 0;
  bool empty() const { return block <= 0; }
};

// One image's patch grid for the vision tower's attention (model_v41_flash.md §8).
struct VisionAttentionParams {
  int64_t grid_h = 0;       // patch rows
  int64_t grid_w = 0;       // patch columns; T = grid_h * grid_w
  int64_t n_heads = 0;
  float rope_theta = 1e4f;  // vision_config.rope_theta
};

struct HcParams {
  int sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  float norm_eps = 1e-6f;
};

// RoPE over the last `n_rope` dims of each head, pairs interleaved (x[2i], x[2i+1]).
struct RopeParams {
  TensorView inv_freq;  // [n_rope/2] F32: theta_i after YaRN (model_v4_flash.md §4.4)
  int n_rope = 0;
  bool inverse = false;  // rotate by -angle (de-rotation of the attention output)
};

struct CompressParams {
  int ratio = 0;
  bool overlapped = false;  // two series: previous group's first half + current group's second half
  int64_t dc = 0;           // output row width
};

struct AttentionParams {
  int64_t window = 0;        // W: the rows a token sees (the ring, window.shape[1], may hold more)
  int ratio = 0;             // 0: window only
  bool all_compressed = false;  // HCA: every visible compressed row; CSA: rows listed in comp_idx
  int32_t rows_per_block = 0;   // compressed rows per history block
  float softmax_scale = 0.0f;
  // n_rope > 0: the output's RoPE dims are then rotated as rope(out, batch.positions, out_rope)
  // does it (the model's de-rotation, inverse = true) — in the call, so a backend can fold it into
  // the attention's epilogue (same bits as the two ops).
  RopeParams out_rope = {};
};

struct MoeParams {
  int64_t n_experts_per_tok = 0;
  float route_scale = 1.0f;
  float swiglu_limit = 0.0f;  // 0: no clamp
  int act_quant_block = 0;
};

// A MoE layer's routing (Ops::moe_route's tensors): logits [T, E] F32, bias [E] F32 (or empty),
// tid2eid [vocab, k] I64 (hash layers, else empty), token_ids [T] I32; outputs sel [T, k] I32 and
// weights [T, k] F32.
struct MoeRouting {
  TensorView logits, bias, tid2eid, token_ids, sel, weights;
};

// ---- DeepSeek-V4.1 (model_v41_flash.md) parameter types ----

// V4.1's KV-cache and indexer quantizers (§3.4), applied as quantise-dequantise.
enum class KvQuantFormat : uint8_t {
  kFp8Pow2x32,  // FP8 E4M3, scale 2^ceil(log2(max(amax, 1e-4) / 448)) per 32 channels (window KV)
  kFp4E4m3x16,  // FP4 E2M1, scale = E4M3(max(amax, 6*2^-9) / 6) per 16 channels (main compressed KV)
  kFp4Pow2x32,  // FP4 E2M1, scale 2^ceil(log2(max(amax, 6*2^-126) / 6)) per 32 (index keys, queries)
};

// The V4.1 indexer (§3.2): score = sum_h (relu(q_h . k) * score_scale) * (w_h * weight_scale)
// over the visible entries g < (pos+1)/ratio, optionally with the two-level candidate blocks.
struct IndexerV41Params {
  int ratio = 0;
  int32_t rows_per_block = 0;  // history rows per block (block_tokens / ratio)
  float score_scale = 0.0f;    // index_head_dim^-0.5
  float weight_scale = 0.0f;   // index_n_heads^-0.5
  enum class Candidates : uint8_t {
    kNone,      // plain top-k over every visible entry
    kPublish,   // candidate source: also write its candidate blocks (its own top-k is unrestricted)
    kRestrict,  // Reindex after the candidate source: score only inside the given blocks
  } candidates = Candidates::kNone;
  int32_t candidate_topk_blocks = 0;
  int32_t candidate_block_size = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual tensor::Device device() const = 0;

  // ---- memory ----
  // Per-step workspace, valid until the next begin_step(), which also closes a side region a failed
  // pass left open (every backend: the call-order check below is the base class's).
  void begin_step() {
    for (SideState& s : side_) s = SideState::kNone;
    open_lane_ = -1;
    on_begin_step();
  }
  virtual TensorView alloc(DType dtype, std::initializer_list<int64_t> shape) = 0;
  // Workspace scopes: everything allocated after a mark is released (reused) by
  // workspace_release(mark). The model releases each layer's temporaries at the layer's end, so a
  // step's workspace is bounded by one layer, not by the whole stack.
  virtual size_t workspace_mark() { return 0; }
  virtual void workspace_release(size_t mark) {}
  // Gives the workspace's memory back to the operating system, to be taken again by the next
  // step: for an idle caller, when no step is in flight and nothing points into the workspace.
  // Backends whose recorded step graphs hold workspace addresses (CUDA) keep theirs.
  virtual void release_workspace_memory() {}
  // Copies host data into workspace memory on this backend's device.
  virtual TensorView upload(const void* host, DType dtype, std::initializer_list<int64_t> shape) = 0;
  // Long-lived storage (KV pools, state slots, device weights), zero-filled. Freed with the Ops,
  // or earlier by free_persistent.
  virtual TensorView alloc_persistent(DType dtype, std::initializer_list<int64_t> shape) = 0;
  // Gives back a tensor alloc_persistent returned (the whole tensor), after the work queued on it:
  // for owners done with it while the Ops lives on (a bench row's KV state; KvState::release).
  // Checked: anything else is an error.
  virtual void free_persistent(const TensorView& t) = 0;
  // Device memory free now, in bytes; -1 where the backend cannot tell (the host's memory).
  virtual int64_t device_free_bytes() const { return -1; }
  // Host memory for per-step copies from the device (the engine's logits), zero-filled, freed with
  // the Ops: page-locked on CUDA (a copy into it runs at the link's speed instead of through the
  // driver's bounce buffers), ordinary memory on the CPU.
  virtual TensorView alloc_host(DType dtype, std::initializer_list<int64_t> shape) = 0;
  // Copies `src` into `dst` (same dtype and numel; either may be on the host).
  virtual void copy(const TensorView& src, const TensorView& dst) = 0;
  virtual void fill(const TensorView& dst, float value) = 0;
  // Waits for queued work (no-op on the CPU).
  virtual void synchronize() = 0;
  // Queues a copy of `src` (on this backend's device, contiguous) into `dst` (alloc_host memory,
  // same dtype and numel) behind the work queued so far and returns without waiting for it; the
  // host may read `dst` once wait_host_copy(ticket) returned. Asynchronous scheduling reads a
  // step's sampled ids this way while the next step already runs. Work queued after the call may
  // overwrite `src`: the copy still reads what was there (a backend that copies beside its queue
  // orders later writes after it). At most kHostCopiesInFlight tickets may be outstanding. The
  // default copies at once (its tickets are complete).
  static constexpr int kHostCopiesInFlight = 4;
  virtual uint64_t copy_to_host_async(const TensorView& src, const TensorView& dst) {
    copy(src, dst);
    return 0;
  }
  virtual void wait_host_copy(uint64_t ticket) {}

  // ---- step graphs (optional) ----
  // A backend that can record one forward pass's launches and replay them (CUDA graphs) runs a
  // step as: graph_prepare(key); <the forward pass: host work only, nothing launched, uploads staged,
  // the step's launch signature accumulated>; then graph_replay() either launched the graph
  // recorded under that signature (kReplayed: the pass's results are what the graph computes),
  // asks for the pass again under graph_capture_begin() / graph_capture_end() (kCapture: that
  // pass records the graph, and end launches it; false = recording failed, run eagerly), or asks
  // for an ordinary eager pass (kEager). Every pass starts with begin_step(), so the workspace
  // hands out the same addresses each time.
  // `state_key` names the persistent buffers the pass reads and writes beyond its workspace
  // (model weights, KV state): graphs recorded for one key are never replayed for another.
  enum class GraphStep { kReplayed, kCapture, kEager };
  virtual bool graphs_enabled() const { return false; }
  virtual void graph_prepare(uint64_t state_key) {}
  virtual GraphStep graph_replay() { return GraphStep::kEager; }
  virtual void graph_capture_begin() {}
  virtual bool graph_capture_end() { return false; }
  // Host time of the replayed steps so far (benchmarks): the prepare passes (graph_prepare to
  // graph_replay) and the graph launches, during which a synchronous decode loop leaves the
  // device idle. All zero where nothing was replayed.
  struct GraphHostTime {
    int64_t replayed = 0;
    double prepare_us = 0, launch_us = 0;  // summed over the replayed steps
  };
  virtual GraphHostTime graph_host_time() const { return {}; }

  // ---- concurrency (optional) ----
  // A side region: the ops issued between side_begin() and side_end() read only data that exists
  // at side_begin() or that they write themselves; the ops issued on the main path until
  // side_join() neither read nor write what the side region writes, nor write what it reads.
  // side_join() orders every later op after the region. A backend may run the region concurrently
  // with the main path (CUDA: a stream of its own, a fork and join in the step graph); the default
  // runs everything in program order — and the results must be the same either way (so a region
  // may only hold ops whose outputs do not depend on scheduling). Regions live in kSideLanes
  // lanes: one region per lane at a time, one region open (issuing) at a time, but a region ended
  // and not yet joined may run beside the next lane's (the two must not touch each other's
  // outputs either). Every region must be joined before the workspace is released. The order of
  // the calls is checked here, for every backend (so the CPU tests catch an unbalanced region);
  // backends override the hooks.
  static constexpr int kSideLanes = 2;
  void side_begin(int lane = 0) {
    DI_CHECK(lane >= 0 && lane < kSideLanes, "side_begin: lane {} (there are {})", lane, kSideLanes);
    DI_CHECK(side_[lane] == SideState::kNone, "side_begin: a side region is already open or not joined in lane {}",
             lane);
    DI_CHECK(open_lane_ < 0, "side_begin: the region of lane {} is still open (side_end it first)", open_lane_);
    side_[lane] = SideState::kOpen;
    open_lane_ = lane;
    on_side_begin(lane);
  }
  void side_end(int lane = 0) {
    DI_CHECK(lane >= 0 && lane < kSideLanes && side_[lane] == SideState::kOpen, "side_end without side_begin");
    side_[lane] = SideState::kEnded;
    open_lane_ = -1;
    on_side_end(lane);
  }
  void side_join(int lane = 0) {
    DI_CHECK(lane >= 0 && lane < kSideLanes && side_[lane] == SideState::kEnded,
             "side_join without a side region ended by side_end");
    side_[lane] = SideState::kNone;
    on_side_join(lane);
  }
  bool side_idle() const {
    for (SideState s : side_)
      if (s != SideState::kNone) return false;
    return true;
  }

  // ---- elementwise / norms ----
  // out[t] = table[ids[t]]: table [vocab, D] BF16/F32 -> out [T, D].
  virtual void embed(const TensorView& ids, const TensorView& table, const TensorView& out) = 0;
  // out[t, s, :] = x[t, :] for every stream s: x [T, D] -> out [T, hc, D].
  virtual void broadcast_streams(const TensorView& x, const TensorView& out) = 0;
  // out = x * rsqrt(mean(x^2) + eps) * weight over the last dim; weight [n] or empty (no gain).
  // x, out: [rows, n] (any leading shape flattened).
  virtual void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& out) = 0;
  // rms_norm, then out's rows FP8 fake-quantised per `block` channels in place (an output read only
  // by GEMMs that would quantise it so: the query latent); block 0: rms_norm alone. One call so a
  // backend can fold the quantisation into the norm (same bits as the two ops, the default).
  virtual void rms_norm_quant(const TensorView& x, const TensorView& weight, float eps, const TensorView& out,
                              int block) {
    rms_norm(x, weight, eps, out);
    if (block > 0) fp8_fake_quant(out, out.shape[out.rank - 1], block);
  }
  // out = a + b (same shapes); out may alias a.
  virtual void add(const TensorView& a, const TensorView& b, const TensorView& out) = 0;
  // Converts/copies between activation dtypes with rounding (e.g. F32 accumulator -> BF16).
  virtual void convert(const TensorView& x, const TensorView& out) = 0;

  // ---- linear algebra ----
  // Lets the backend keep a prepared copy of a weight the model multiplies by many rows at once
  // (LinearWeight::prepared; the LM head), so no step re-lays it out. Called after loading,
  // before any step is recorded into a graph. Returns whether w now has one; the results are the
  // same bits either way. The base class keeps none.
  virtual bool prepare_linear(LinearWeight& w) {
    (void)w;
    return false;
  }
  // Rewrites FP4 weight codes (a tensor on this backend's device in the checkpoint's I8 [out, in / 2]
  // layout) in place into the layout this backend's kernels decode, and returns whether it did:
  // LinearWeights over them then say so (LinearWeight::fp4_device_layout). Called once per tensor,
  // where the weights reach the device. The base class reads the checkpoint layout: no change.
  virtual bool to_fp4_device_layout(const TensorView& codes) {
    (void)codes;
    return false;
  }
  // y [T, out] = x [T, in] @ W^T for W in any LinearWeight format.
  virtual void linear(const TensorView& x, const LinearWeight& w, const TensorView& y,
                      const LinearOptions& options) = 0;
  // Two projections of the same x: y0 = x @ W0^T, y1 = x @ W1^T (a compressor's two, a shared
  // expert's gate and up). Same results as two linear() calls, which is what it is unless a
  // backend can do both in one pass.
  virtual void linear_pair(const TensorView& x, const LinearWeight& w0, const LinearWeight& w1, const TensorView& y0,
                           const TensorView& y1, const LinearOptions& options) {
    linear(x, w0, y0, options);
    linear(x, w1, y1, options);
  }
  // Block-diagonal grouped projection: y[t, g, :] = W_g x[t, g, :] where W_g = rows
  // [g*R, (g+1)*R) of w. x [T, G, in_g], y [T, G, R].
  virtual void linear_grouped(const TensorView& x, const LinearWeight& w, const TensorView& y,
                              const LinearOptions& options) = 0;
  // out = silu(min(g, limit)) * clamp(u, -limit, limit) (limit 0: no clamp). g, u, out [T, F].
  virtual void swiglu(const TensorView& g, const TensorView& u, float limit, const TensorView& out) = 0;
  // swiglu, then out's rows FP8 fake-quantised per `block` channels in place (the shared expert's
  // hidden, read only by its down projection); block 0: swiglu alone. Same bits as the two ops
  // (the default).
  virtual void swiglu_quant(const TensorView& g, const TensorView& u, float limit, const TensorView& out, int block) {
    swiglu(g, u, limit, out);
    if (block > 0) fp8_fake_quant(out, out.shape[out.rank - 1], block);
  }
  // x [rows, n], read next only by GEMMs with act_quant_block = `block`: a backend may quantise it
  // in place now, once, and return the options those GEMMs then take ({0}), or leave it and return
  // {block}. The same bits either way; the default leaves it.
  virtual LinearOptions prequantise(const TensorView& x, int block) {
    (void)x;
    return {block};
  }

  // ---- hyper-connections (model_v4_flash.md §4.2, §4.10) ----
  // From the streams X [T, hc, D]: u [T, D] = sum_i pre_i X_i, post [T, hc] F32, comb [T, hc, hc] F32
  // (Sinkhorn-projected; comb[j][k]: source stream j -> destination stream k).
  virtual void hc_pre(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& u,
                      const TensorView& post, const TensorView& comb) = 0;
  // hc_pre, then u = RMSNorm(u) with `norm` [D] (a block's sublayer input), and uq (if not empty)
  // u's quantised copy for the sublayer's FP8 GEMMs: one call so a backend can fold the norm and
  // the copy into the collapse (same bits as the separate ops).
  virtual void hc_pre_norm(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& norm,
                           float eps, const TensorView& u, const TensorView& post, const TensorView& comb,
                           const QuantCopy& uq) {
    hc_pre(x, w, params, u, post, comb);
    rms_norm(u, norm, eps, u);
    quant_copy(u, uq);
  }
  // out[t, k] = post[t, k] * o[t] + sum_j comb[t, j, k] * x[t, j]. o [T, D], x/out [T, hc, D].
  virtual void hc_post(const TensorView& o, const TensorView& x, const TensorView& post, const TensorView& comb,
                       const TensorView& out) = 0;
  // hc_post(o, x, post, comb, out), then hc_pre_norm(out, w, params, norm, eps, u, post, comb, uq): the
  // streams after one sublayer and the next sublayer's input in one call, so a backend can compute
  // the new streams inside the next mixing pass (same bits as the two ops, the default). post and
  // comb are read (this sublayer's) and then overwritten (the next one's).
  virtual void hc_post_pre_norm(const TensorView& o, const TensorView& x, const TensorView& post,
                                const TensorView& comb, const TensorView& out, const HcWeights& w,
                                const HcParams& params, const TensorView& norm, float eps, const TensorView& u,
                                const QuantCopy& uq) {
    hc_post(o, x, post, comb, out);
    hc_pre_norm(out, w, params, norm, eps, u, post, comb, uq);
  }
  // Final collapse y [T, D] = sum_i (sigmoid(scale * mu_i + base_i) + eps) X_i.
  virtual void hc_head(const TensorView& x, const HcHeadWeights& w, const HcParams& params, const TensorView& y) = 0;

  // ---- positions and quantisation ----
  // In-place RoPE on x [N, n_heads, head_dim] at positions [N] I32 (tail dims only).
  virtual void rope(const TensorView& x, const TensorView& positions, const RopeParams& params) = 0;
  // The query / KV rows' preparation in place: x [N, heads, d] (or [N, d]) RMS-normalised per row
  // (weight [d] or empty = unweighted), RoPE on the tail dims at positions [N], then with
  // quant_dims > 0 fp8_fake_quant(x, quant_dims, quant_block). One call so a backend can fuse it
  // (same bits as the three ops, which are the default).
  virtual void norm_rope(const TensorView& x, const TensorView& weight, float eps, const TensorView& positions,
                         const RopeParams& params, int64_t quant_dims = 0, int quant_block = 0) {
    const int64_t d = x.shape[x.rank - 1];
    const TensorView rows = x.reshape({x.numel() / d, d});
    rms_norm(rows, weight, eps, rows);
    rope(x, positions, params);
    if (quant_dims > 0) fp8_fake_quant(x, quant_dims, quant_block);
  }
  // In-place FP8 E4M3 quantise-dequantise of dims [0, n_dims) of each row of x [N, width] in
  // blocks of `block` with power-of-two scales (§3.3 points 1-2).
  virtual void fp8_fake_quant(const TensorView& x, int64_t n_dims, int block) = 0;
  // q.out = x's rows FP8 fake-quantised per q.block (QuantCopy), nothing when q is empty: the copy,
  // then the quantisation in place.
  void quant_copy(const TensorView& x, const QuantCopy& q) {
    if (q.empty()) return;
    DI_CHECK(q.out.numel() == x.numel(), "quant_copy: out {} for x {}", q.out.shape_string(), x.shape_string());
    convert(x, q.out);
    fp8_fake_quant(q.out, q.out.shape[q.out.rank - 1], q.block);
  }
  // In-place normalised Walsh-Hadamard transform of each row of x [N, n] (n a power of two) then
  // FP4 E2M1 quantise-dequantise in blocks of 32 with power-of-two scales (§3.3 point 3).
  virtual void hadamard_fp4_fake_quant(const TensorView& x) = 0;

  // ---- KV state ----
  // The per-sequence state is positional: a window ring [n_slots, R, d] holds position p's row at
  // p % R and a compressor state [n_slots, R, width] position p's projections at p % R, with R at
  // least the window W (ops read positions of the last W only) or the 2m / m positions an
  // emission reads. Spare positions (R beyond that) keep older rows readable after later
  // positions were written and then given up (speculative decoding: rows of rejected drafts leave
  // no trace once the positions are written again), so a rewind needs no state copy.
  // Stores the last min(n_tokens, R) raw rows of each sequence into its window ring:
  // kv [T, d] -> window [n_slots, R, d] at slot position pos % R.
  virtual void window_store(const TensorView& kv, const BatchView& batch, const TensorView& window) = 0;
  // Streaming compressor (§4.6): feeds this step's projections kv/score [T, kappa*dc] F32 (score
  // already without ape) through each sequence's state (state_kv/state_score [n_slots, R >= 2m
  // (overlapped) or m, kappa*dc] F32: position p's kv and score + ape at p % R) and writes the
  // pooled, un-normalised rows of the groups in `plan` to rows [n_emit, dc] F32. Group g's row
  // reads positions [(g - 1) m, (g + 1) m) (overlapped: the first half of the channels for the
  // previous group, the second for g's own) or [g m, (g + 1) m), from this step's rows where they
  // are in it, else from the state; positions below 0 are absent (a reset slot's scores are -inf:
  // positions never written since are absent too). Padding entries at the plan's end
  // (pad_emissions) leave their rows unwritten.
  virtual void compress(const TensorView& kv, const TensorView& score, const TensorView& ape,
                        const BatchView& batch, const EmitPlan& plan, const CompressParams& params,
                        const TensorView& state_kv, const TensorView& state_score, const TensorView& rows) = 0;
  // pool[plan.dst[i]] = rows[i] for rows not already cached (dst >= 0). pool [n_rows_total, width].
  virtual void store_rows(const TensorView& rows, const EmitPlan& plan, const TensorView& pool) = 0;
  // Lightning indexer (§4.7): for each token, score the visible indexer keys
  // (g < floor((pos+1)/ratio)) as sum_h w[t,h] * relu(q[t,h] . key_g) and write the top-k group
  // indices in ascending order to idx [T, k] (-1 padded; ties: lower index wins).
  // q [T, Hi, di], w [T, Hi] head weights (multiplied by weight_scale), keys [n_rows_total, di].
  virtual void indexer_topk(const TensorView& q, const TensorView& w, const TensorView& keys,
                            const BatchView& batch, int ratio, int32_t rows_per_block, float weight_scale,
                            const TensorView& idx) = 0;
  // Sparse shared-KV attention with sinks (§4.8). q [T, H, d]; kv_new [T, d] this step's raw rows;
  // window [n_slots, R, d] earlier rows (position p at p % R); comp [n_rows_total, d] compressed rows (ratio > 0);
  // comp_idx [T, k] group indices (CSA) or empty (HCA: all visible groups); sinks [H] F32;
  // out [T, H, d]. Every row is both key and value.
  virtual void sparse_attention(const TensorView& q, const TensorView& kv_new, const TensorView& window,
                                const TensorView& comp, const TensorView& comp_idx, const TensorView& sinks,
                                const BatchView& batch, const AttentionParams& params, const TensorView& out) = 0;

  // ---- MoE (§4.9) ----
  // Routing from router logits [T, E] F32: score = sqrt(softplus(logit)); selection = top-k of
  // score + bias (bias [E] F32), or tid2eid[token_ids] on hash layers (tid2eid [vocab, k] I64);
  // weights = route_scale * score / sum(selected scores). sel [T, k] I32, weights [T, k] F32.
  virtual void moe_route(const TensorView& logits, const TensorView& bias, const TensorView& tid2eid,
                         const TensorView& token_ids, const MoeParams& params, const TensorView& sel,
                         const TensorView& weights) = 0;
  // Routed experts: out [T, D] F32 (overwritten) = sum over the token's experts, in ascending expert
  // id, of W2_e (w * swiglu(W1_e x, W3_e x)). x [T, D]; with BF16 x the expert hidden and output are
  // rounded to BF16 as the reference stores them.
  virtual void moe_experts(const TensorView& x, const TensorView& sel, const TensorView& weights,
                           std::span<const ExpertWeights> experts, const MoeParams& params,
                           const TensorView& out) = 0;
  // The MoE sublayer's output: out [T, D] (activation dtype) = convert(routed + shared), routed as
  // moe_experts computes it (F32) and shared [T, D] (the shared expert's output, or empty: none)
  // added in F32. One call so a backend can fold the add and the rounding into its combine (same
  // bits as moe_experts + add + convert, which is the default).
  // shared_lane >= 0: `shared` is written by that lane's side region, ended and not yet joined;
  // the call joins it before reading `shared`, so a backend may run the routed experts beside the
  // region (the default joins first: program order).
  virtual void moe_experts_out(const TensorView& x, const TensorView& sel, const TensorView& weights,
                               std::span<const ExpertWeights> experts, const MoeParams& params,
                               const TensorView& shared, const TensorView& out, int shared_lane = -1) {
    if (shared_lane >= 0) side_join(shared_lane);
    const size_t mark = workspace_mark();
    const TensorView acc = alloc(DType::kF32, {x.shape[0], out.shape[1]});
    moe_experts(x, sel, weights, experts, params, acc);
    if (!shared.empty()) add(acc, shared, acc);
    convert(acc, out);
    workspace_release(mark);
  }

  // The routing and the MoE sublayer's output in one call: moe_route (into r.sel, r.weights), then
  // moe_experts_out (the default). One call so a backend can route inside the launch that groups
  // the pairs by expert (same bits, one kernel boundary fewer on the MoE's critical path).
  virtual void moe_route_experts_out(const MoeRouting& r, const TensorView& x, std::span<const ExpertWeights> experts,
                                     const MoeParams& params, const TensorView& shared, const TensorView& out,
                                     int shared_lane = -1) {
    moe_route(r.logits, r.bias, r.tid2eid, r.token_ids, params, r.sel, r.weights);
    moe_experts_out(x, r.sel, r.weights, experts, params, shared, out, shared_lane);
  }

  // ---- rows ----
  // out[i] = x[rows[i]]: x [T, n], rows [m] I32 (host), out [m, n].
  virtual void gather_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out) = 0;
  // out[rows[i]] = x[i]: x [m, n], rows [m] I32 (host, distinct), out [T, n]; the other rows of out
  // unchanged. Activation dtypes (converted as gather_rows does).
  virtual void scatter_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out) = 0;

  // tokens[t] = source[from[t]] for the rows where from[t] >= 0 and that id is not negative (a row
  // where nothing was sampled keeps its placeholder), the others unchanged: a step's
  // input tokens taken from ids an earlier step sampled on the device, which the host has not seen
  // yet (asynchronous scheduling). tokens [T] I32 and source [n] I32 on this backend's device,
  // from [T] on the host (every from[t] < n; the backend uploads it like gather_rows' rows).
  virtual void take_tokens(const TensorView& source, std::span<const int32_t> from, const TensorView& tokens) = 0;
  static void check_take_tokens(const TensorView& source, std::span<const int32_t> from, const TensorView& tokens) {
    DI_CHECK(source.dtype == DType::kI32 && tokens.dtype == DType::kI32 && source.is_contiguous() &&
                 tokens.is_contiguous() && static_cast<int64_t>(from.size()) == tokens.numel(),
             "take_tokens: source {} and tokens {} must be contiguous I32 with one source row per token ({} given)",
             source.shape_string(), tokens.shape_string(), from.size());
    for (int32_t r : from)
      DI_CHECK(r < source.numel(), "take_tokens: source row {} of {}", r, source.numel());
  }

  // ---- sampling ----
  // out[i] = greedy sampling's choice for row i of logits [R, V] F32 (unit column stride, row
  // stride >= V): the lowest id among the row's maxima, NaN read as -inf and +inf as the largest
  // finite float (sample/logits_processors.h: sanitize_logits, then argmax_lowest_id); -1 where
  // every entry is -inf or NaN. out [R] I32 on this backend's device. A greedy step copies R ids
  // to the host instead of R x V logits.
  virtual void argmax_rows(const TensorView& logits, const TensorView& out) = 0;
  // The shapes argmax_rows takes (every backend checks them the same way).
  static void check_argmax_rows(const TensorView& logits, const TensorView& out) {
    DI_CHECK(logits.dtype == DType::kF32 && logits.rank == 2 && logits.stride[1] == 1 &&
                 logits.stride[0] >= logits.shape[1],
             "argmax_rows logits {} must be [R, V] F32 with unit column stride", logits.shape_string());
    DI_CHECK(out.dtype == DType::kI32 && out.numel() == logits.shape[0] && out.is_contiguous(),
             "argmax_rows out {} for logits {}", out.shape_string(), logits.shape_string());
  }

  // The sampler's pipeline for the rows a device takes whole (sample::is_device_sampleable):
  // step 0 (sanitize), then greedy (temperature 0: argmax_rows' rule) or steps 6-10 of
  // docs/sampling.md — z = (l - max) / T in F32, top-k, top-p, min-p (exp(z - max z) >= min_p in
  // F64), and the Gumbel-max with the keyed noise of sample/keyed_noise.h (stream kToken, key
  // (seed, position, id)) in F64, lowest id on ties. Rows with bias, masks or penalties are sampled
  // from adjust_logits' output.
  struct SampleRow {
    float temperature = 0.0f;  // 0: greedy
    float min_p = 0.0f;        // 0: off
    uint64_t seed = 0;         // the sequence's seed (sample::resolve_sequence_seed)
    int64_t position = 0;      // the position the sampled token will occupy (noise key)
    int32_t top_k = 0;         // <= 0: off
    float top_p = 1.0f;        // 1: off
  };
  // out[i] = the host sampler's token for row i of logits [R, V] F32 (shapes as argmax_rows) with
  // rows[i]'s parameters; -1 where nothing is finite. Equal to Sampler::sample_row bit for bit on
  // the CPU; on a GPU up to the device's F64 log and exp (within 1 ulp of the host's: a token can
  // differ only where two candidates' scores agree to ~1e-16) and top-p's mass, summed in fixed
  // point there (its cut can differ only where the mass reaches the target within ~1e-9).
  virtual void sample_rows(const TensorView& logits, std::span<const SampleRow> rows, const TensorView& out) = 0;
  static void check_sample_rows(const TensorView& logits, std::span<const SampleRow> rows, const TensorView& out) {
    check_argmax_rows(logits, out);
    DI_CHECK(static_cast<int64_t>(rows.size()) == logits.shape[0], "sample_rows: {} row parameters for logits {}",
             rows.size(), logits.shape_string());
    for (const SampleRow& r : rows) {
      DI_CHECK(std::isfinite(r.temperature) && r.temperature >= 0.0f && r.min_p >= 0.0f && r.min_p <= 1.0f &&
                   r.top_p > 0.0f && r.top_p <= 1.0f,
               "sample_rows: temperature {} / min_p {} / top_p {} out of range", r.temperature, r.min_p, r.top_p);
    }
  }

  // Steps 0-4 of the host sampler (sample/sampler.h) where the logits are, into out [R, V] F32
  // (contiguous) from logits [R, V] (shapes as argmax_rows): sanitise; the row's token mask (a
  // grammar bitmask ANDed with allowed_token_ids: tokens whose bit is clear become -inf); logit
  // bias; min_tokens' stop ids -> -inf unless nothing else would stay finite; repetition penalty on
  // the ids seen (prompt and output), then frequency and presence penalties on the output's ids, in
  // F32 without contraction — Sampler::process_row's step 4 row bit for bit. A row's sparse inputs
  // are ranges of `entries` (one per distinct token: its bias, whether it was seen, its output
  // count) and `stops` (distinct ids); mask_row indexes `masks` [M, ceil(V / 32)] words (-1: none).
  // pending >= 0: the row's sequence has one more output token than its entries count, the id at
  // pending_ids[pending] (I32 on this backend's device: the ids the step before sampled, which a
  // step planned ahead of their return reads where they are; ids < 0 mean none) — seen, and its
  // output count one higher (an entry of its own, bias 0, when it has none).
  struct AdjustRow {
    int32_t entry_begin = 0, entry_end = 0;  // [begin, end) of entries
    int32_t stop_begin = 0, stop_end = 0;    // [begin, end) of stops (empty unless min_tokens holds)
    int32_t mask_row = -1;
    float repetition = 1.0f, presence = 0.0f, frequency = 0.0f;
    int32_t pending = -1;
  };
  struct AdjustEntry {
    int32_t token = 0;
    float bias = 0.0f;
    int32_t output_count = 0;  // > 0: presence / frequency apply
    int32_t seen = 0;          // 1: repetition applies
  };
  virtual void adjust_logits(const TensorView& logits, std::span<const AdjustRow> rows,
                             std::span<const AdjustEntry> entries, std::span<const int32_t> stops,
                             std::span<const uint32_t> masks, const TensorView& pending_ids,
                             const TensorView& out) = 0;
  static void check_adjust_logits(const TensorView& logits, std::span<const AdjustRow> rows,
                                  std::span<const AdjustEntry> entries, std::span<const int32_t> stops,
                                  std::span<const uint32_t> masks, const TensorView& pending_ids,
                                  const TensorView& out) {
    DI_CHECK(logits.dtype == DType::kF32 && logits.rank == 2 && logits.stride[1] == 1 &&
                 logits.stride[0] >= logits.shape[1],
             "adjust_logits logits {} must be [R, V] F32 with unit column stride", logits.shape_string());
    const int64_t R = logits.shape[0], V = logits.shape[1], words = (V + 31) / 32;
    DI_CHECK(out.dtype == DType::kF32 && out.rank == 2 && out.shape[0] == R && out.shape[1] == V && out.is_contiguous(),
             "adjust_logits out {} for logits {}", out.shape_string(), logits.shape_string());
    DI_CHECK(static_cast<int64_t>(rows.size()) == R && static_cast<int64_t>(masks.size()) % words == 0,
             "adjust_logits: {} rows for logits {}, {} mask words", rows.size(), logits.shape_string(), masks.size());
    const auto n_masks = static_cast<int32_t>(static_cast<int64_t>(masks.size()) / words);
    for (const AdjustRow& r : rows) {
      DI_CHECK(0 <= r.entry_begin && r.entry_begin <= r.entry_end && r.entry_end <= static_cast<int64_t>(entries.size()) &&
                   0 <= r.stop_begin && r.stop_begin <= r.stop_end && r.stop_end <= static_cast<int64_t>(stops.size()) &&
                   r.mask_row >= -1 && r.mask_row < n_masks && r.repetition > 0.0f,
               "adjust_logits: a row's ranges [{}, {}) / [{}, {}) / mask {} outside {} entries, {} stops, {} masks",
               r.entry_begin, r.entry_end, r.stop_begin, r.stop_end, r.mask_row, entries.size(), stops.size(), n_masks);
      DI_CHECK(r.pending < (pending_ids.empty() ? 0 : pending_ids.numel()),
               "adjust_logits: pending id {} outside the {} ids given", r.pending, pending_ids.empty() ? 0 : pending_ids.numel());
    }
    DI_CHECK(pending_ids.empty() || (pending_ids.dtype == DType::kI32 && pending_ids.is_contiguous()),
             "adjust_logits: pending ids {} must be contiguous I32", pending_ids.shape_string());
    for (const AdjustEntry& e : entries) DI_CHECK(e.token >= 0 && e.token < V, "adjust_logits: token {} outside [0, {})", e.token, V);
    for (int32_t id : stops) DI_CHECK(id >= 0 && id < V, "adjust_logits: stop id {} outside [0, {})", id, V);
  }

  // Raw logprobs (LogprobsMode::kRaw) where the logits are: for row i of logits [R, V] F32 (shapes as
  // argmax_rows), sanitised (NaN -> -inf, +inf -> the largest float): logprob[i] = its log-softmax at
  // tokens[i] (-inf where tokens[i] < 0 or the entry is -inf), and its n = top_ids.shape[1] most
  // likely tokens — value descending, lower id first among equals, -inf entries only when fewer
  // than n are finite, id -1 past V — into top_ids [R, n] I32 and their log-softmax into
  // top_logprobs [R, n] F32 (n <= kMaxLogprobTop). tokens [R] I32 and every output on this backend's
  // device. sample::compute_logprobs's result: bit for bit on the CPU; on a GPU the ids are the
  // same and the values within a float ulp or two (the F64 log-sum-exp is summed per fixed slices
  // of the row, an order that depends on V alone, so a row's result never depends on the batch).
  static constexpr int64_t kMaxLogprobTop = 20;
  virtual void logprob_rows(const TensorView& logits, const TensorView& tokens, const TensorView& logprob,
                            const TensorView& top_ids, const TensorView& top_logprobs) = 0;
  static void check_logprob_rows(const TensorView& logits, const TensorView& tokens, const TensorView& logprob,
                                 const TensorView& top_ids, const TensorView& top_logprobs) {
    check_argmax_rows(logits, tokens);
    const int64_t R = logits.shape[0];
    DI_CHECK(logprob.dtype == DType::kF32 && logprob.numel() == R && logprob.is_contiguous(),
             "logprob_rows logprob {} for logits {}", logprob.shape_string(), logits.shape_string());
    DI_CHECK(top_ids.dtype == DType::kI32 && top_ids.rank == 2 && top_ids.shape[0] == R && top_ids.is_contiguous() &&
                 top_ids.shape[1] <= kMaxLogprobTop,
             "logprob_rows top_ids {} must be [{}, n <= {}] I32", top_ids.shape_string(), R, kMaxLogprobTop);
    DI_CHECK(top_logprobs.dtype == DType::kF32 && top_logprobs.rank == 2 && top_logprobs.shape[0] == R &&
                 top_logprobs.shape[1] == top_ids.shape[1] && top_logprobs.is_contiguous(),
             "logprob_rows top_logprobs {} for top_ids {}", top_logprobs.shape_string(), top_ids.shape_string());
  }
  // The rank of a row's token in its distribution (prompt logprobs report it for the prompt's
  // token, which need not be in the top-n): rank[i] = 1 + the number of entries of row i of logits
  // [R, V] F32 (shapes as argmax_rows; sanitised as logprob_rows) that come before tokens[i] in the
  // top-n order — value descending, lower id first among equals — so a token in logprob_rows' list
  // at index j has rank j + 1. rank [R] I32 (0 where tokens[i] < 0), tokens [R] I32, on this
  // backend's device. An exact count: the same on every backend, whatever the batch.
  virtual void token_rank_rows(const TensorView& logits, const TensorView& tokens, const TensorView& rank) = 0;
  static void check_token_rank_rows(const TensorView& logits, const TensorView& tokens, const TensorView& rank) {
    check_argmax_rows(logits, tokens);
    DI_CHECK(rank.dtype == DType::kI32 && rank.numel() == logits.shape[0] && rank.is_contiguous(),
             "token_rank_rows rank {} for logits {}", rank.shape_string(), logits.shape_string());
  }

  // ---- DeepSeek-V4.1 (model_v41_flash.md). Default bodies fail: a backend overrides them when it
  // runs V4.1 (CPU reference: ops/cpu/cpu_v41_*.cc). ----

  // In place over each row of x [N, width] (width a multiple of the format's block): quantise to
  // the format's grid and dequantise (RNE; FP4 ties to the even code), §3.4.
  virtual void kv_fake_quant(const TensorView& x, KvQuantFormat format) {
    (void)x, (void)format;
    DI_CHECK(false, "kv_fake_quant is not implemented on this backend");
  }
  // Single-pass mHC (§5): the coefficient sets of streams x [T, hc, D] without collapsing them:
  // pre [T, hc], post [T, hc], comb [T, hc, hc] (Sinkhorn-projected), all F32.
  virtual void hc_mix(const TensorView& x, const HcWeights& w, const HcParams& params, const TensorView& pre,
                      const TensorView& post, const TensorView& comb) {
    (void)x, (void)w, (void)params, (void)pre, (void)post, (void)comb;
    DI_CHECK(false, "hc_mix is not implemented on this backend");
  }
  // u [T, D] = sum_i pre[t, i] * x[t, i, :] with a given pre [T, hc] F32 (the previous sublayer's).
  virtual void hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& u) {
    (void)x, (void)pre, (void)u;
    DI_CHECK(false, "hc_collapse is not implemented on this backend");
  }
  // V4.1 indexer top-k (§3.2): q [T, Hi, di], w [T, Hi] (weights_proj output), keys
  // [n_rows_total, di] (history rows via the block tables); idx [T, k] ascending entry indices,
  // -1 padded, ties to the lower index. candidates [T, candidate_topk_blocks] I32 (ascending
  // block ids, -1 padded): written under kPublish — top blocks by their max visible score, the
  // block of the newest visible entry always kept — and read under kRestrict.
  virtual void indexer_topk_v41(const TensorView& q, const TensorView& w, const TensorView& keys,
                                const BatchView& batch, const IndexerV41Params& params, const TensorView& candidates,
                                const TensorView& idx) {
    (void)q, (void)w, (void)keys, (void)batch, (void)params, (void)candidates, (void)idx;
    DI_CHECK(false, "indexer_topk_v41 is not implemented on this backend");
  }
  // Engram gating into the streams (§4.2): kv [T, (hc+1)*D] = hc keys then one value;
  // gate_i = sigmoid(signed sqrt(dot_i)) with dot_i = sum_d x_i*q_i*k_i*key_i * rsqrt(mean x_i^2 + eps)
  // * rsqrt(mean key_i^2 + eps) / sqrt(D); out[t, i] = x[t, i] + gate_i * value (gate 0 where
  // live[t] == 0; live [T] I32 or empty = all live). x, out [T, hc, D]; q/k_weight [hc, D] F32.
  virtual void engram_gate(const TensorView& x, const TensorView& kv, const TensorView& q_weight,
                           const TensorView& k_weight, const TensorView& live, float eps, const TensorView& out) {
    (void)x, (void)kv, (void)q_weight, (void)k_weight, (void)live, (void)eps, (void)out;
    DI_CHECK(false, "engram_gate is not implemented on this backend");
  }
  // DSpark draft attention (§7.2): every row of a sequence's block attends to the window ring
  // positions [start_pos - W, start_pos) (>= window_floor) and to all rows of its own block
  // (bidirectional), with sinks. q [T, H, d], kv_block [T, d], window [n_slots, R >= W, d] (position
  // p at p % R), out [T, H, d].
  virtual void block_attention(const TensorView& q, const TensorView& kv_block, const TensorView& window,
                               const TensorView& sinks, const BatchView& batch, const AttentionParams& params,
                               const TensorView& out) {
    (void)q, (void)kv_block, (void)window, (void)sinks, (void)batch, (void)params, (void)out;
    DI_CHECK(false, "block_attention is not implemented on this backend");
  }

  // ---- DeepSeek-V4.1 vision tower (model_v41_flash.md §8). Default bodies fail like the V4.1
  // ops above (CPU reference: ops/cpu/cpu_vision.cc). ----

  // out [N, C] = x [N, C] + bias [C] (bias BF16/F32, broadcast over rows); out may alias x. The
  // vision Linears carry biases; the model runs them as linear() into F32 then add_bias into the
  // activation dtype, so a BF16 output is rounded once, as a fused GEMM epilogue would.
  virtual void add_bias(const TensorView& x, const TensorView& bias, const TensorView& out) {
    (void)x, (void)bias, (void)out;
    DI_CHECK(false, "add_bias is not implemented on this backend");
  }
  // out = x * 0.5 * (1 + erf(x / sqrt(2))) elementwise (exact GELU, not the tanh form); same
  // shapes; out may alias x.
  virtual void gelu_erf(const TensorView& x, const TensorView& out) {
    (void)x, (void)out;
    DI_CHECK(false, "gelu_erf is not implemented on this backend");
  }
  // The ViT's 2D rotary embedding, in place over x [T, H, hd] (hd a multiple of 4) for the T =
  // grid_h * grid_w patches of one image in row-major grid order: rotate-half pairs (j, j + hd/2),
  // angle j = row * f_j for j < hd/4 and col * f_(j - hd/4) otherwise, f_i = theta^(-4i/hd)
  // (hd 64: theta^(-2i/32), §8), all in F32.
  virtual void vision_rope(const TensorView& x, const VisionAttentionParams& params) {
    (void)x, (void)params;
    DI_CHECK(false, "vision_rope is not implemented on this backend");
  }
  // The ViT's attention for one image: qkv [T, 3*H*hd] (q | k | v, head-major inside each),
  // vision_rope on q and k, then full bidirectional softmax attention over all T patches, scale
  // hd^-0.5, no sinks: out [T, H*hd]. A BF16 qkv has its rotated q and k rounded to BF16 (the
  // reference holds them so); scores, softmax and the weighted sum stay F32, out rounded once.
  virtual void vision_attention(const TensorView& qkv, const VisionAttentionParams& params, const TensorView& out) {
    (void)qkv, (void)params, (void)out;
    DI_CHECK(false, "vision_attention is not implemented on this backend");
  }

 protected:
  // The backend's part of begin_step(): reset the per-step workspace.
  virtual void on_begin_step() = 0;
  // Side-region hooks (default: program order).
  virtual void on_side_begin(int lane) { (void)lane; }
  virtual void on_side_end(int lane) { (void)lane; }
  virtual void on_side_join(int lane) { (void)lane; }

 private:
  enum class SideState : uint8_t { kNone, kOpen, kEnded };
  SideState side_[kSideLanes] = {SideState::kNone, SideState::kNone};
  int open_lane_ = -1;  // the lane whose region is open, -1: none
};

}  // namespace deepinfer::ops
