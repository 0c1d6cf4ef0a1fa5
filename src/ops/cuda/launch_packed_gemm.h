// The packed large-M GEMMs' launchers (launch_packed_gemm.cu), for launch_gemm.cu: which
// launches take the path is decided there (gemm_staging_bytes), how they run here.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm/packed_plan.h"
#include "kernels/launch.h"

namespace deepinfer::kernels {

// Packs p's activations once and each weight set's dequantised weights into p.staging (at least
// plan.staging_bytes()), then runs the packed GEMM per set. p: a dense launch of one or two sets
// on whole K tiles whose A rows are 16-byte aligned.
cudaError_t launch_packed_gemm(const GemmParams& p, const PackedGemmPlan& plan, cudaStream_t s);
// The expert form: the (expert, tile) table and the packed activations into p.staging (at least
// plan.staging_bytes()), then per weight set the expert GEMM dequantising its weights in-kernel.
// p: an expert launch of FP4 experts on whole K tiles, 16-byte aligned A rows, E <= 1024.
// Plans of 32-pair tiles (plan.tile_rows) run on the swapped-operand kernel only.
cudaError_t launch_packed_experts(const GemmParams& p, const PackedExpertPlan& plan, cudaStream_t s);
// Whether expert launches take the swapped-operand kernel (DEEPINFER_GEMM_EXPERT_SWAP, default on).
bool expert_swap_enabled();
// DEEPINFER_GEMM_L2_PREFETCH (default 0 = none; l2_prefetch_weights): the 128-input blocks the
// FP8-order experts' lean form asks the L2 for ahead of its register ring, and when > 0 the lean
// kernel's multi-tile FP4 expert forms request all their tiles' rows up front. An A/B switch:
// hints do not change results.
int l2_prefetch_blocks();

}  // namespace deepinfer::kernels
