// The host-side entry points of the CUDA kernels: plain parameter structs (raw pointers, sizes,
// dtype tags) and launch_<op>(params, stream) functions, defined in ops/cuda/launch_*.cu. Pure
// C++ (no CUDA syntax), so the launchers in ops/cuda/*.cc compile with the host compiler and
// kernels never see engine types.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

enum class ActType : int { kF32 = 0, kBF16 = 1 };

// ---- elementwise / norms -----------------------------------------------------------------
struct EmbedParams { const int32_t* ids; const void* table; ActType table_type; void* out; ActType out_type; int64_t T, D; };
cudaError_t launch_embed(const EmbedParams& p, cudaStream_t stream);
struct BroadcastParams { const void* x; void* out; ActType type; int64_t T, D; int hc; };
cudaError_t launch_broadcast_streams(const BroadcastParams& p, cudaStream_t stream);
// quant_block > 0: out's rows then FP8 fake-quantised per block in the same launch (same bits as
// launch_fp8_fake_quant after it), where rms_norm_fuses_quant(n, quant_block).
struct RmsNormParams { const void* x; ActType x_type; const void* weight; ActType w_type; void* out; ActType out_type; int64_t rows, n; float eps; int quant_block = 0; };
bool rms_norm_fuses_quant(int64_t n, int block);
cudaError_t launch_rms_norm(const RmsNormParams& p, cudaStream_t stream);
// swiglu with quant_block > 0: the BF16 output FP8 fake-quantised per block in the same launch,
// where swiglu_fuses_quant(row width, quant_block, out type) (4-element aligned rows).
struct BinaryParams { const void* a; ActType a_type; const void* b; ActType b_type; void* out; ActType out_type; int64_t n; float limit; int quant_block = 0; };
bool swiglu_fuses_quant(int64_t width, int block, ActType out_type);
cudaError_t launch_add(const BinaryParams& p, cudaStream_t stream);
cudaError_t launch_swiglu(const BinaryParams& p, cudaStream_t stream);  // a = gate, b = up
struct ConvertParams { const void* x; ActType x_type; void* out; ActType out_type; int64_t n; };
cudaError_t launch_convert(const ConvertParams& p, cudaStream_t stream);
struct FillParams { void* out; int kind; /* 0 F32, 1 BF16, 2 I32 */ float value; int64_t n; };
cudaError_t launch_fill(const FillParams& p, cudaStream_t stream);
struct GatherParams { const void* x; ActType x_type; const int32_t* rows; void* out; ActType out_type; int64_t n_rows, width; };
cudaError_t launch_gather_rows(const GatherParams& p, cudaStream_t stream);
// out[rows[i]] = x[i], i < n_rows (Ops::scatter_rows; the GatherParams fields, rows naming out's).
cudaError_t launch_scatter_rows(const GatherParams& p, cudaStream_t stream);
// tokens[t] = source[from[t]] where from[t] >= 0 (Ops::take_tokens), t < n.
struct TakeTokensParams { const int32_t* source; const int32_t* from; int32_t* tokens; int64_t n; };
cudaError_t launch_take_tokens(const TakeTokensParams& p, cudaStream_t stream);
// Greedy sampling: out[r] = the argmax of logits row r (Ops::argmax_rows' rules). Small batches
// split each row over argmax_workspace_slots(rows, V) blocks whose (value, id) pairs go through
// part_v / part_i (that many F32 / I32 each; null when 0) and a merge kernel.
struct ArgmaxParams { const float* logits; int64_t rows, ld, V; int32_t* out; float* part_v; int32_t* part_i; };
int64_t argmax_workspace_slots(int64_t rows, int64_t V);
cudaError_t launch_argmax_rows(const ArgmaxParams& p, cudaStream_t stream);
// Temperature sampling (Ops::sample_rows): argmax_rows into out first (the rows' maxima; greedy
// rows' answers), with `filters` (some row has top-k / top-p) each row's cut into cut [rows] F32,
// then the Gumbel-max of the sampled rows. Workspace: part_v / part_i argmax_workspace_slots F32 /
// I32 (the argmax's), part_s / part_si sample_workspace_slots F64 / I32 (the Gumbel-max's; null
// when 0). params: [rows] DeviceSampleRow on the device (Ops::SampleRow's layout).
struct SampleLaunchParams { const float* logits; int64_t rows, ld, V; const void* params; int32_t* out;
                            float* part_v; int32_t* part_i; double* part_s; int32_t* part_si; bool filters; float* cut;
                            int32_t* pre; unsigned long long* part_check; };
int64_t sample_workspace_slots(int64_t rows, int64_t V);
// With top-k / top-p rows (filters): pre I32 [rows] and part_check U64 of this many slots, when
// the launch draws first (DEEPINFER_SAMPLE_DRAW_FIRST, default on; 0: none needed).
int64_t sample_check_slots(int64_t rows, int64_t V);
cudaError_t launch_sample_rows(const SampleLaunchParams& p, cudaStream_t stream);
// Raw logprobs (Ops::logprob_rows) of logits [rows, V]: the log-softmax at tokens [rows] into
// logprob [rows], the top-n (n <= 20) into top_ids / top_lp [rows, n]. Workspace: part_m F32 and
// part_sum F64 of logprob_workspace_slots(rows) each, part_v F32 / part_i I32 of n times that.
struct LogprobLaunchParams {
  const float* logits; int64_t rows, ld, V; int n; const int32_t* tokens;
  float* logprob; int32_t* top_ids; float* top_lp;
  float* part_m; double* part_sum; float* part_v; int32_t* part_i;
};
int64_t logprob_workspace_slots(int64_t rows);
// Ops::token_rank_rows of logits [rows, V] (row stride ld): rank [rows] of tokens [rows] (no workspace).
struct TokenRankLaunchParams { const float* logits; int64_t rows, ld, V; const int32_t* tokens; int32_t* rank; };
cudaError_t launch_token_rank_rows(const TokenRankLaunchParams& p, cudaStream_t stream);
// Steps 0-4 of the sampler (Ops::adjust_logits) from logits [rows, V] into out [rows, V]: rows,
// entries (DeviceAdjustRow / DeviceAdjustEntry: Ops::AdjustRow / AdjustEntry's layouts), stops and
// masks on the device; pending_ids: the ids rows' `pending` index (null when none does);
// part_finite: adjust_workspace_slots(rows) I32.
struct AdjustLaunchParams {
  const float* logits; int64_t rows, ld, V; const void* rows_params; const void* entries; const int32_t* stops;
  const uint32_t* masks; const int32_t* pending_ids; float* out; int32_t* part_finite;
};
int64_t adjust_workspace_slots(int64_t rows);
cudaError_t launch_adjust_logits(const AdjustLaunchParams& p, cudaStream_t stream);
cudaError_t launch_logprob_rows(const LogprobLaunchParams& p, cudaStream_t stream);
struct RopeLaunchParams { void* x; ActType type; const int32_t* positions; const float* inv_freq; int64_t N, heads, width; int n_rope; float sign; };
cudaError_t launch_rope(const RopeLaunchParams& p, cudaStream_t stream);
// rms_norm + rope + (quant_dims > 0) fp8_fake_quant of rows [N x heads, width] in place, one launch
// (norm_rope_fusable says when: the V4 head geometry, width 512 with 64 RoPE dims).
struct NormRopeParams {
  void* x; ActType type; const void* weight; ActType w_type;  // weight [width] or null
  int64_t N, heads, width; float eps;
  const int32_t* positions; const float* inv_freq; int n_rope; float sign;
  int64_t quant_dims; int quant_block;
};
bool norm_rope_fusable(const NormRopeParams& p);
cudaError_t launch_norm_rope(const NormRopeParams& p, cudaStream_t stream);
struct FakeQuantParams { void* x; ActType type; int64_t rows, width, n_dims; int block; };
cudaError_t launch_fp8_fake_quant(const FakeQuantParams& p, cudaStream_t stream);
// n_dims = width. Rows of 32..256 (aligned) run one warp per row unless warp_rows is false or
// DEEPINFER_HADAMARD_WARP=0 (then one block per row): the same bits either way.
cudaError_t launch_hadamard_fp4(const FakeQuantParams& p, cudaStream_t stream, bool warp_rows = true);
struct ActQuantParams { const void* x; ActType x_type; void* out_bf16; int64_t rows, width; int block; };
cudaError_t launch_act_quant_bf16(const ActQuantParams& p, cudaStream_t stream);

// ---- hyper-connections -------------------------------------------------------------------
struct HcParamsDev {
  const void* x; ActType x_type;   // [T, hc, D]
  const float* fn; const float* base; const float* scale;
  float* partial;                  // workspace [T, n_split, n_mix + 1]
  int64_t T, D; int hc; int n_split; int sinkhorn_iters; float hc_eps, norm_eps;
  void* u; ActType u_type;         // hc_pre: [T, D]; hc_head: y
  float* post; float* comb;        // hc_pre only
  // hc_pre only: u = RMSNorm(u) with this weight (F32 or BF16; null = unweighted) folded in when
  // fold_norm (hc_pre_folds_norm(D) must hold): rms_norm's bits, one launch fewer.
  bool fold_norm = false; const void* norm = nullptr; ActType norm_type = ActType::kF32; float rms_eps = 0.0f;
  // hc_pre with the fold only: u's quantised copy [T, D] BF16 (FP8 fake-quant per 128 channels,
  // the bits of a copy then launch_fp8_fake_quant) written by the same launch, where
  // hc_pre_quant_copies(D); null = none.
  void* uq = nullptr;
  // hc_pre only: x = hc_post(post_o, post_x, post_in, comb_in) first (the streams after the
  // previous sublayer; x is then written, post_in / comb_in may alias post / comb), folded into the
  // mixing pass where hc_pre_folds_post says so.
  const void* post_o = nullptr; ActType post_o_type = ActType::kF32; const void* post_x = nullptr;
  const float* post_in = nullptr; const float* comb_in = nullptr;
  // hc_pre: the finalize's collapse with 16-byte loads (the same bits): -1 = as
  // DEEPINFER_HC_VEC_COLLAPSE says (default: prefill-sized launches), 0 / 1 = off / on (tests
  // compare the two).
  int vec_collapse = -1;
  // hc_pre with the norm folded, decode-sized: the finalize over a cluster of this many CTAs per
  // token (hc_cluster.cuh; the same bits): -1 = as DEEPINFER_HC_CLUSTER says (default: the
  // automatic size), 0 / 1 = the one-CTA finalize, 2 / 4 / 8 = that size where the shape allows.
  int cluster = -1;
};
cudaError_t launch_hc_pre(const HcParamsDev& p, cudaStream_t stream);
// The cluster size launch_hc_pre's finalize takes for p (1: the one-CTA kernel; HcParamsDev::cluster).
int hc_pre_cluster_size(const HcParamsDev& p);
// Whether launch_hc_pre computes hc_post inside its mixing pass for T tokens of hc streams.
bool hc_pre_folds_post(int64_t T, int hc);
// Whether launch_hc_pre can fold the RMS norm of u for width D (the widths launch_rms_norm gives
// to its one-block-per-row kernel, whose arithmetic the fold repeats).
bool hc_pre_folds_norm(int64_t D);
// Whether launch_hc_pre with the norm folded can also write u's quantised copy per `block` channels.
bool hc_pre_quant_copies(int64_t D, int block);
// Whether the mixing pass of n_mix columns over T tokens, reduced in splits of `chunk`, runs the
// prefill kernel (hc_mix_prefill.cuh; DEEPINFER_HC_MIX_TOKENS = 32, the default, or 64).
bool hc_mix_uses_prefill_kernel(int n_mix, int64_t T, int64_t chunk);
cudaError_t launch_hc_head(const HcParamsDev& p, cudaStream_t stream);
struct HcPostParams { const void* o; ActType o_type; const void* x; void* out; ActType x_type; const float* post; const float* comb; int64_t T, D; int hc; };
cudaError_t launch_hc_post(const HcPostParams& p, cudaStream_t stream);

// ---- GEMM ------------------------------------------------------------------------------
enum class WeightFmt : int { kBF16 = 0, kFp8Block = 1, kFp4Block = 2 };
struct WeightDesc {
  const uint8_t* w = nullptr;      // row-major storage
  const uint8_t* scale = nullptr;  // FP8: [ceil(N/bo), ceil(K/bi)]; FP4: [N, K/32]
  WeightFmt fmt = WeightFmt::kBF16;
  int block_out = 1, block_in = 1;
  bool scale_f32 = false;          // F32 scales (Flash-Base) instead of UE8M0
  int64_t row_bytes = 0;           // bytes per stored row
  int64_t scale_cols = 0;          // columns of the scale grid
  // The whole weight already in the packed GEMM's layout (launch_pack_weight: [n tiles][k tiles]
  // blocks of one group), which ungrouped launches on the packed path read instead of packing it
  // (the same bits); null: packed per launch.
  const uint8_t* packed = nullptr;
  // FP8 weights: the whole weight already as the FP8-order large-M kernel's blocks
  // (launch_fp8_prepare_weight: [column tiles][128-input blocks]), read instead of packing it per
  // launch (the same bits); null: packed per launch.
  const uint8_t* fp8_blocks = nullptr;
  // FP4 codes in the fold layout (fp4_fold_layout.h: DEEPINFER_GEMM_FP8_EXPERTS=1) instead of
  // fp4_layout.h's device layout: only the FP8-order expert kernel and dequant_weight read it.
  bool fp4_fold = false;
  // Field by field: the struct has padding, which a byte comparison would read (the MoE layers'
  // descriptor cache compared bytes, missed every time and re-uploaded 43 KB per layer per step).
  friend bool operator==(const WeightDesc&, const WeightDesc&) = default;
};
struct GemmParams {
  int64_t M = 0, N = 0, K = 0;
  const void* A = nullptr;         // BF16 activations (tensor-core path) or F32 (f32 path)
  int64_t lda = 0;
  // FP8 activation quantisation folded into the small-M kernel's A staging (gemm_fuses_act_quant
  // says when a launch takes it): A holds the rows before quantisation (F32 when a_f32, else
  // BF16) and every block of a_quant_block columns is quantised as act_quant_bf16 would — the
  // same bits, one launch and one activation round trip fewer. 0: A is the GEMM's BF16 operand.
  int a_quant_block = 0;
  bool a_f32 = false;
  // > 0: A's rows are already FP8-quantised per this many columns (their producer's act_quant):
  // the FP8-order kernel (fp8_gemv.cuh) may take them as E4M3 codes. 0: A's values are arbitrary.
  int a_fp8_block = 0;
  void* C = nullptr;               // F32 or BF16
  int64_t ldc = 0;
  bool c_bf16 = false;
  WeightDesc w;                    // single weight (groups slice its rows)
  int n_groups = 1;                // block-diagonal groups: A cols g*K.., W rows g*N.., C cols g*N..
  // MoE: one weight per expert (device array); rows of expert e are perm[offsets[e] .. offsets[e+1]).
  const WeightDesc* experts = nullptr;
  int n_experts = 0;
  const int32_t* offsets = nullptr;
  const int32_t* perm = nullptr;
  int a_div = 1;                   // A row = perm[i] / a_div
  int max_rows_per_expert = 0;     // host bound on any expert's rows: T (gemm_expert_rows)
  // Two weight sets over the same A in one launch (n_sets = 2; the MoE gate and up projections,
  // a shared expert's, a compressor's two, the query and KV latents): set 1 takes w1 (dense; K
  // and format as w, N1 output columns) or experts[n_experts ..] (expert mode, N1 = N) and
  // writes C1 (row stride ldc1, C's type). Numerically the same as one launch per set.
  int n_sets = 1;
  WeightDesc w1;
  void* C1 = nullptr;
  int64_t N1 = 0, ldc1 = 0;
  // Experts with rows in ascending id, active[n_experts] = their count (device); with it the
  // small-M kernel launches max_active CTA rows instead of one per expert. p.w.fmt must name
  // the experts' (common) weight format.
  const int32_t* active = nullptr;
  int max_active = 0;
  // Workspace of split-K launches: F32 sub-range partials [gemm_n_subranges(K)][M][ldc]
  // (gemm_partial_floats); without it M <= 32 takes the tiled kernel and the pipelined kernel
  // does not split K (same bits, slower).
  float* partial = nullptr;
  // Zeroed counters, one per output tile of a split-K launch, left zeroed again
  // (gemm_counter_slots); with them the last CTA of a tile folds its partials.
  int32_t* tile_counters = nullptr;
  int64_t n_tile_counters = 0;
  // Workspace of the packed large-M path (gemm_staging_bytes): the activations and dequantised
  // weights rewritten into wgmma's shared-memory layout. Without it (or with fewer bytes) the
  // launch takes the dequantising kernel (same bits, slower for large M).
  uint8_t* staging = nullptr;
  int64_t staging_bytes = 0;
};
// Counters GemmParams::tile_counters needs for this launch shape (0 when none).
int64_t gemm_counter_slots(const GemmParams& p);
// The row bound the GEMM launcher plans an expert-mode GEMM of T tokens with: up to 512 tokens
// the small-M kernel takes every expert (chunks of <= 32 rows, weights re-streamed per chunk),
// so the bound is min(T, 32); beyond (prefill) the tiled kernel, bound T.
int64_t gemm_expert_rows(int64_t T);
// Whether launch_dequant_gemm can quantise p's activations itself in blocks of `block` columns
// (GemmParams::a_quant_block): p as it will be launched but for A, the quantisation fields and the
// partials (the caller attaches gemm_partial_floats(p) of them, as always). True for streaming
// small-M launches of at most DEEPINFER_GEMV_FUSE_QUANT rows per weight (default 4; 0 = never)
// whose K sub-ranges the blocks tile. Same bits either way.
bool gemm_fuses_act_quant(const GemmParams& p, int block);
// Bytes of GemmParams::staging the launch of p (every field but the workspaces set) packs its
// operands into; 0: it does not take the packed path (kernels/gemm/packed_plan.h; dense launches
// of at least DEEPINFER_GEMM_PACKED_ROWS rows, default 512, with a wave of output tiles).
int64_t gemm_staging_bytes(const GemmParams& p);
// Bytes launch_pack_weight writes for an N x K weight; 0: the packed path cannot read it (K not
// whole 128-element tiles, or no wgmma kernel on this device).
int64_t packed_weight_bytes(int64_t N, int64_t K);
// Packs (dequantises) the whole N x K weight w into `out` (packed_weight_bytes(N, K) bytes) in the
// layout WeightDesc::packed names, as every packed launch would.
cudaError_t launch_pack_weight(const WeightDesc& w, int64_t N, int64_t K, uint8_t* out, cudaStream_t stream);
// Rewrites FP4 weight codes (`bytes` of the checkpoint's [out, in / 2] bytes, in % 8 == 0) in place
// into the device layout every FP4 decoder reads (kernels/gemm/fp4_layout.h): once per weight.
cudaError_t launch_fp4_to_device_layout(uint8_t* codes, int64_t bytes, cudaStream_t stream);
// Floats of GemmParams::partial the launch of p (every field but partial and the counters set)
// splits K into; 0: none needed.
int64_t gemm_partial_floats(const GemmParams& p);
// BF16 tensor-core GEMM with on-the-fly dequantisation (A must be BF16). Rows <= 32 (per expert
// in expert mode) take the streaming small-M kernel, more the tiled one; both sum in the same
// canonical order (kernels/gemm/gemm_common.cuh), so results are bitwise independent of M.
cudaError_t launch_dequant_gemm(const GemmParams& p, cudaStream_t stream);
// Plain F32 GEMM (A F32, C F32), sequential F32 sums like the CPU reference.
cudaError_t launch_f32_gemm(const GemmParams& p, cudaStream_t stream);

// ---- KV state, indexer, attention ------------------------------------------------------
struct SeqSpanDev { int32_t slot, token_begin, n_tokens, start_pos, n_cached, window_floor; };
struct WindowStoreParams { const void* kv; ActType kv_type; const SeqSpanDev* seqs; void* window; ActType w_type; int64_t n_seqs, W, d; };
cudaError_t launch_window_store(const WindowStoreParams& p, cudaStream_t stream);
struct CompressLaunchParams {
  const float* kv; const float* score; const float* ape; const SeqSpanDev* seqs; const int32_t* token_seq;
  const int32_t* emit_token;  // the emission plan's token column [n_emit] (pads >= n_tokens)
  float* state_kv; float* state_score; float* rows;
  int64_t n_seqs, n_tokens, n_emit; int ratio; bool overlapped; int64_t dc, width, n_state;
  int64_t ring;  // positions a slot's state holds (position p at p % ring), >= n_state
};
cudaError_t launch_compress(const CompressLaunchParams& p, cudaStream_t stream);
struct StoreRowsParams { const void* rows; ActType rows_type; const int32_t* dst; void* pool; ActType pool_type; int64_t n, width; };
cudaError_t launch_store_rows(const StoreRowsParams& p, cudaStream_t stream);
struct IndexerParams {
  const void* q; ActType q_type; const float* w; const void* keys; ActType k_type;
  const int32_t* positions; const int32_t* token_seq; const int32_t* block_tables;
  int max_blocks, ratio, rows_per_block, Hi, di, K; float weight_scale;
  float* scores; int64_t ld, T; int32_t* idx;
};
cudaError_t launch_indexer_topk(const IndexerParams& p, cudaStream_t stream);
struct AttentionLaunchParams {
  const void* q; const void* kv_new; const void* window; const void* comp; ActType type;
  const int32_t* comp_idx; const float* sinks; const int32_t* positions; const int32_t* token_seq;
  const SeqSpanDev* seqs; const int32_t* block_tables; void* out;
  int64_t T, H, d, W; int ratio; bool all_compressed; int rows_per_block, max_blocks, K;
  float softmax_scale; bool round_probs;
  // Output de-rotation folded into the kernel (rope_inv_freq non-null; only where
  // attention_folds_rope says so): rope() of the output with these parameters.
  const float* rope_inv_freq = nullptr; int rope_n = 0; float rope_sign = 1.0f;
  // CTAs per (token, 16 heads) on the tensor-core path (attention_cluster_size): -1 = automatic,
  // 0 or 1 = the one-CTA kernel, 2 / 4 / 8 = that cluster where the head_dim allows. Same bits.
  int cluster = -1;
  // Rows of a slot's window ring (position p at p % ring; >= W: spare positions); 0 = W.
  int64_t ring = 0;
};
cudaError_t launch_sparse_attention(const AttentionLaunchParams& p, cudaStream_t stream);
// Whether launch_sparse_attention takes the tensor-core kernel for p, which can fold the output's
// RoPE de-rotation (the scalar kernel cannot: the caller runs rope() after it).
bool attention_folds_rope(const AttentionLaunchParams& p);
// The cluster size a tensor-core (mma.sync) launch of p takes: 1 = the one-CTA kernel.
int attention_cluster_size(const AttentionLaunchParams& p);

// ---- MoE -------------------------------------------------------------------------------
struct MoeRouteParams { const float* logits; const float* bias; const int64_t* tid2eid; const int32_t* ids; int64_t T; int E, k; float route_scale; int32_t* sel; float* weights; };
cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t stream);
// Groups (token, slot) pairs by expert: offsets [E + 1], perm [n_pairs], and active [E + 1]
// (experts with pairs in ascending id, active[E] = their count).
struct MoeGroupParams {
  const int32_t* sel; int64_t n_pairs; int E; int32_t* counts; int32_t* offsets; int32_t* cursor; int32_t* perm; int32_t* active;
  // Optionally x [x_rows, x_width] (F32 or BF16) FP8-quantised per 128 channels into BF16 xq in the
  // same launch (act_quant_bf16's bits), when moe_group_quantises says the launch can.
  const void* x = nullptr; ActType x_type = ActType::kBF16; int64_t x_rows = 0, x_width = 0; void* xq = nullptr;
  // Optionally the routing that writes sel (route.logits != nullptr; route.sel == sel): the
  // one-block grouping routes decode-sized batches itself (same bits as launch_moe_route before it,
  // one kernel boundary fewer), other launches run launch_moe_route first.
  MoeRouteParams route{};
};
cudaError_t launch_moe_group(const MoeGroupParams& p, cudaStream_t stream);  // counts, cursor: workspace
// Whether launch_moe_group can quantise p.x into p.xq (one block of decode-sized batches, width %
// 128 == 0, aligned rows); the caller quantises elsewhere otherwise.
bool moe_group_quantises(const MoeGroupParams& p);
struct MoeSwigluParams { const float* g; const float* u; const float* weights; int64_t n_pairs, F; float limit; bool bf16_round; float* h; };
cudaError_t launch_moe_swiglu_weight(const MoeSwigluParams& p, cudaStream_t stream);
// The same h FP8-quantised per block of 128 channels into BF16 hq [n_pairs, F] (p.h unused):
// act_quant_bf16's bits for block 128. Needs F % 128 == 0 and g, u 16-byte aligned
// (moe_swiglu_quant_fits).
bool moe_swiglu_quant_fits(const MoeSwigluParams& p);
cudaError_t launch_moe_swiglu_quant(const MoeSwigluParams& p, void* hq, cudaStream_t stream);
// out [T, D] (F32 or BF16) = the in-order sum (+ addend [T, D] in F32 when given), rounded once.
struct MoeCombineParams {
  const float* y; const int32_t* sel; int k; int64_t T, D; bool bf16_round;
  const void* addend; ActType addend_type; void* out; ActType out_type;
};
cudaError_t launch_moe_combine(const MoeCombineParams& p, cudaStream_t stream);

}  // namespace deepinfer::kernels

namespace deepinfer::kernels {

// Synthetic device weights for benchmarks (no files): counter-hash random contents per kind.
enum class RandomKind : int {
  kF32Normal = 0,   // N(0, scale)
  kBF16Normal = 1,  // N(0, scale)
  kFp8Code = 2,     // E4M3 codes of N(0, 1) * 64 (never NaN)
  kE8M0Const = 3,   // every byte = extra (a fixed power-of-two exponent)
  kFp4Byte = 4,     // two random E2M1 codes per byte
  kI64Experts = 5,  // rows of `row_len` distinct ids in [0, extra)
};
struct FillRandomParams { void* out; RandomKind kind; int64_t n; uint64_t seed; float scale; int extra; int row_len; };
cudaError_t launch_fill_random(const FillRandomParams& p, cudaStream_t stream);

}  // namespace deepinfer::kernels
