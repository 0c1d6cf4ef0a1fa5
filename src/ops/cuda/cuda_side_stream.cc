// CudaOps side regions (ops.h, "concurrency"): a stream per lane that a region's ops are launched
// on, forked from the main stream at side_begin() and joined back at side_join(). Under stream
// capture the event record / wait pairs become a fork and a join in the step graph, so a replayed
// decode step runs, e.g., the shared expert beside the routing chain. Why it pays: most batch-1
// kernels are latency bound (one-CTA norms and mHC, short GEMVs), leaving SMs and HBM idle that an
// independent chain can use.
//
// What must not be shared between concurrent streams: the small-M GEMM's tile counters (kernels
// count arrivals on them), so each lane's GEMMs get their own set. Workspace memory is not an
// issue: a region's allocations are distinct from the main path's until the workspace is released,
// which side_join() must precede (checked).
// DEEPINFER_CUDA_SIDE_STREAM=0 runs regions in program order on the main stream (an A/B switch;
// results are bit-identical either way).
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

void CudaOps::on_side_begin(int lane) {
  if (!side_on_) return;
  SideLane& l = side_[lane];
  if (l.stream == nullptr) {
    DI_CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    DI_CUDA_CHECK(cudaEventCreateWithFlags(&l.fork, cudaEventDisableTiming));
    DI_CUDA_CHECK(cudaEventCreateWithFlags(&l.join, cudaEventDisableTiming));
  }
  // The fork is part of the step's launch sequence: it enters the graph signature.
  if (launch_site(__FILE__, __LINE__)) {
    DI_CUDA_CHECK(cudaEventRecord(l.fork, main_stream_));
    DI_CUDA_CHECK(cudaStreamWaitEvent(l.stream, l.fork, 0));
  }
  stream_ = l.stream;
  side_lane_ = lane;
}

void CudaOps::on_side_end(int lane) {
  if (!side_on_) return;
  if (launch_site(__FILE__, __LINE__)) DI_CUDA_CHECK(cudaEventRecord(side_[lane].join, side_[lane].stream));
  stream_ = main_stream_;
  side_lane_ = -1;
}

void CudaOps::on_side_join(int lane) {
  if (!side_on_) return;
  if (launch_site(__FILE__, __LINE__)) DI_CUDA_CHECK(cudaStreamWaitEvent(main_stream_, side_[lane].join, 0));
}

}  // namespace deepinfer::ops::cuda
