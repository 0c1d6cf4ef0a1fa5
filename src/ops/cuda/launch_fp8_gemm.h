// The FP8-order GEMM launchers (launch_fp8_gemm.cu), for launch_gemm.cu (and CudaOps::prepare_linear,
// which keeps FP8 weights as the large-M kernel's blocks): which launches take the
// FP8 order (fp8_gemv.cuh: FP8 weights x FP8 activation codes on wgmma, per-128-block promotion).
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm/fp8_gemv_plan.h"
#include "kernels/launch.h"

namespace deepinfer::kernels {

// The plan of p when it takes the FP8-order decode kernel (up to DEEPINFER_GEMM_FP8_DECODE_ROWS
// rows: 16 by default, at most 32): DEEPINFER_GEMM_FP8_ORDER=1
// (default off: see docs/engine.md), a Hopper build, a dense ungrouped launch
// of FP8 weights (UE8M0 128 x 128 blocks, 16-byte aligned rows) whose activations are FP8-quantised
// per 128 columns (a_quant_block or a_fp8_block) in 16-byte aligned rows, shape per plan_fp8_gemv.
bool fp8_gemv_plan(const GemmParams& p, Fp8GemvPlan& plan);
// Launches it (clusters of plan.shape.P CTAs).
cudaError_t launch_fp8_gemv(const GemmParams& p, const Fp8GemvPlan& plan, cudaStream_t s);
// The plan of p when it takes the large-M kernel of the same order (fp8_gemm.cuh):
// DEEPINFER_GEMM_FP8_ORDER=1, a Hopper build, a dense ungrouped
// launch of more rows than the decode kernel takes, of FP8 weights (as above) whose BF16 activations are FP8-quantised
// per 128 columns already (a_fp8_block; 16-byte aligned rows), shape per plan_fp8_gemm; it needs
// plan.staging_bytes of GemmParams::staging (gemm_staging_bytes reports them).
bool fp8_gemm_plan(const GemmParams& p, Fp8GemmPlan& plan);
// The activations' code blocks and (where a set has no WeightDesc::fp8_blocks) the weight blocks
// into p.staging, then the GEMM.
cudaError_t launch_fp8_gemm(const GemmParams& p, const Fp8GemmPlan& plan, cudaStream_t s);

// Whether launches of few output tiles take the split forms of the FP8-order large kernels
// (DEEPINFER_GEMM_FP8_SPLIT=1; default off): a cluster per tile, one K sub-range per CTA.
bool fp8_split();

// Whether the FP8 order is on and `rows` are more than its decode kernel takes: such launches need
// their activations quantised first (the large-M kernel reads codes), so the streaming kernels'
// in-staging quantisation must not take them (gemm_fuses_act_quant).
bool fp8_order_past_decode_rows(int64_t rows);

// Bytes of an N x K FP8 weight's prepared blocks for the large-M kernel (WeightDesc::fp8_blocks),
// or 0 when launches would not read them (the FP8 order off, not Hopper, a weight layout or shape
// the FP8-order kernels do not take).
int64_t fp8_order_weight_bytes(const WeightDesc& w, int64_t N, int64_t K);
// Writes them (fp8_order_weight_bytes(N, K) bytes at out).
cudaError_t launch_fp8_prepare_weight(const WeightDesc& w, int64_t N, int64_t K, uint8_t* out, cudaStream_t s);

}  // namespace deepinfer::kernels
