// The streamed FP4 expert kernel's launcher (launch_expert_stream.cu), for launch_gemm.cu: which
// decode expert launches take it and how it runs (kernels/gemm/expert_stream_gemv.cuh).
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm/expert_stream_plan.h"
#include "kernels/launch.h"

namespace deepinfer::kernels {

// Whether the streamed kernel takes p (counters aside: expert_stream_has_counters), and its plan:
// FP4 expert launches of at most DEEPINFER_GEMV_EXPERT_STREAM tokens (1, 2, 4 or 8; unset or 0:
// never) with UE8M0 scales, 16-byte aligned expert rows (GemmParams::experts_aligned) and BF16
// activations staged as given, on a Hopper device.
bool expert_stream_plan(const GemmParams& p, ExpertStreamPlan& plan);
// Whether p has what the plan's item hand-out needs: nothing in stride order; two zeroed
// GemmParams::tile_counters when items come from the counter (DEEPINFER_GEMV_EXPERT_STREAM_STATIC=0),
// which attach_gemm_workspace provides when gemm_needs_counters says so.
bool expert_stream_has_counters(const GemmParams& p, const ExpertStreamPlan& plan);
// Runs p on the streamed kernel (plan from expert_stream_plan; with the counter, p.tile_counters
// holds >= 2 zeroed counters, left zeroed).
cudaError_t launch_expert_stream(const GemmParams& p, const ExpertStreamPlan& plan, cudaStream_t s);

}  // namespace deepinfer::kernels
