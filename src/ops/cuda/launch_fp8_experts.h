// The FP4 experts in the FP8 order (kernels/gemm/fp8_expert_gemm.cuh), for launch_gemm.cu (which
// launches take them) and CudaOps (the weights' fold layout). Defined in launch_packed_gemm.cu,
// beside the packed expert launches whose header-defined kernels they share.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm/fp4_fold_layout.h"
#include "kernels/gemm/fp8_expert_plan.h"
#include "kernels/launch.h"

namespace deepinfer::kernels {

// DEEPINFER_GEMM_FP8_EXPERTS=1 (default off: see docs/engine.md) on a Hopper build and device.
// When on, CudaOps stores every FP4 weight in the fold layout (WeightDesc::fp4_fold) and every FP4
// expert launch must take fp8_expert_plan: no other tensor-core kernel reads that layout (the F32
// kernels of plain numerics do, through dequant_weight).
bool fp8_experts_enabled();
// FP4 codes in place into the fold layout (whole 64-byte row blocks: K % 128 == 0).
cudaError_t launch_fp4_fold_layout(uint8_t* codes, int64_t bytes, cudaStream_t stream);
// The plan of p when it takes the FP8-order expert kernel: the knob on, an expert launch of fold-
// layout FP4 weights (one or two sets of N columns) whose BF16 activations are FP8-quantised per
// 128 (a_fp8_block) in 16-byte aligned rows; tiles per plan_fp8_experts. It needs
// plan.staging_bytes() of GemmParams::staging.
bool fp8_expert_plan(const GemmParams& p, Fp8ExpertPlan& plan);
// The tile table and code blocks into p.staging, then the GEMM per weight set.
cudaError_t launch_fp8_experts(const GemmParams& p, const Fp8ExpertPlan& plan, cudaStream_t s);

}  // namespace deepinfer::kernels
