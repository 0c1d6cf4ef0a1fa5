// Host-side entry points of the DeepSeek-V4.1 kernels (model_v41_flash.md; the ops of ops.h's
// "DeepSeek-V4.1" section), defined in ops/cuda/launch_v41.cu. Plain parameter structs, as
// kernels/launch.h: no engine types, no CUDA syntax.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/launch.h"

namespace deepinfer::kernels {

// In place over x's rows of `width` (a multiple of the format's block): quantise each block to its
// grid and back (Ops::kv_fake_quant). format: 0 FP8 pow2 / 32, 1 FP4 E4M3 / 16, 2 FP4 pow2 / 32
// (ops::KvQuantFormat's order).
struct KvFakeQuantV41Params { void* x; ActType type; int64_t rows, width; int format; };
cudaError_t launch_kv_fake_quant_v41(const KvFakeQuantV41Params& p, cudaStream_t stream);

// Single-pass mHC coefficients (Ops::hc_mix): x [T, hc, D]; fn [(2+hc) hc, hc D], base [(2+hc) hc],
// scale [3] F32; pre / post [T, hc], comb [T, hc, hc] F32.
struct HcMixV41Params {
  const void* x; ActType type; const float* fn; const float* base; const float* scale;
  float* pre; float* post; float* comb; int64_t T, D; int hc, sinkhorn_iters; float hc_eps, norm_eps;
};
size_t hc_mix_v41_smem(int hc, int64_t D);  // the launch's dynamic shared memory (x's row in F32)
cudaError_t launch_hc_mix_v41(const HcMixV41Params& p, cudaStream_t stream);

// u [T, D] = sum_i pre[t, i] x[t, i, :] (Ops::hc_collapse).
struct HcCollapseV41Params { const void* x; ActType x_type; const float* pre; void* u; ActType u_type; int64_t T, D; int hc; };
cudaError_t launch_hc_collapse_v41(const HcCollapseV41Params& p, cudaStream_t stream);

// Engram gating (Ops::engram_gate): x, out [T, hc, D] (out may be x); kv [T, (hc+1) D];
// q_weight / k_weight [hc, D] F32; live [T] I32 or null (all live).
struct EngramGateParams {
  const void* x; ActType x_type; const void* kv; ActType kv_type; const float* q_weight; const float* k_weight;
  const int32_t* live; void* out; ActType out_type; int64_t T, D; int hc; float eps;
};
cudaError_t launch_engram_gate(const EngramGateParams& p, cudaStream_t stream);

// DSpark block attention (Ops::block_attention): q, out [T, H, d], kv_block [T, d], window
// [n_slots, ring, d], one dtype; sinks [H] F32; seqs / token_seq the batch's device arrays.
struct BlockAttentionParams {
  const void* q; const void* kv_block; const void* window; ActType type; const float* sinks;
  const SeqSpanDev* seqs; const int32_t* token_seq; void* out; int64_t T, H, d, W, ring; float softmax_scale;
  int max_rows;  // the longest row list of any token (window rows + its block): sizes shared memory
};
cudaError_t launch_block_attention(const BlockAttentionParams& p, cudaStream_t stream);

// The V4.1 indexer (Ops::indexer_topk_v41). candidates: 0 none, 1 publish, 2 restrict
// (IndexerV41Params::Candidates' order). Workspace: scores [T, ld] F32 (ld >= every token's
// visible entries) and, under publish, block_max [T, ld_blocks] F32.
struct IndexerV41LaunchParams {
  const void* q; ActType q_type; const float* w; const void* keys; ActType k_type;
  const int32_t* positions; const int32_t* token_seq; const int32_t* block_tables; int max_blocks;
  int ratio, rows_per_block, Hi, di, K; float score_scale, weight_scale;
  int candidates, candidate_topk_blocks, candidate_block_size; int32_t* cand;
  float* scores; int64_t ld; float* block_max; int64_t ld_blocks; int64_t T; int32_t* idx;
};
size_t indexer_v41_smem(int Hi, int di);
cudaError_t launch_indexer_topk_v41(const IndexerV41LaunchParams& p, cudaStream_t stream);

}  // namespace deepinfer::kernels
