// CudaOps's copies between the host and the device that run beside the main stream (cuda_ops.h,
// "copy queues"): the staging upload of a replayed decode step and the copies back of sampled ids
// (copy_to_host_async). Why: in the asynchronous decode loop (docs/engine.md) the main stream runs
// step n's forward, its sampling, then step n + 1's graph. With both copies on the main stream the
// device idles between the sampling's last kernel and the next graph's first while the ids go back
// and the next step's uploads come in (~8 us of a 0.9 ms batch-1 step on the H200, session 32's
// timeline). Beside it, the upload waits only for the last graph — the one reader of staging_dev_
// — so it overlaps the sampling, and the copy back overlaps the next forward.
//
// The hazard this opens: device work queued after a copy back could overwrite its source before the
// copy has read it (the next step's sampling writes the same ids buffer). So the main stream joins
// the pending copy back before its next eager work (launch_site, uploads) and right after the next
// graph launch (whose kernels may read the source — take_tokens does — but do not write it), and
// before a recording starts (a capture must not wait on work outside it).
#include "kernels/common/env_knob.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

void CudaOps::create_copy_streams() {
  copy_streams_on_ = kernels::env_switch("DEEPINFER_CUDA_COPY_STREAMS");
  if (!copy_streams_on_) return;
  DI_CUDA_CHECK(cudaStreamCreateWithFlags(&h2d_stream_, cudaStreamNonBlocking));
  DI_CUDA_CHECK(cudaStreamCreateWithFlags(&d2h_stream_, cudaStreamNonBlocking));
  DI_CUDA_CHECK(cudaEventCreateWithFlags(&copy_fork_, cudaEventDisableTiming));
}

void CudaOps::destroy_copy_streams() {
  if (!copy_streams_on_) return;
  cudaStreamSynchronize(h2d_stream_);
  cudaStreamSynchronize(d2h_stream_);
  cudaStreamDestroy(h2d_stream_);
  cudaStreamDestroy(d2h_stream_);
  cudaEventDestroy(copy_fork_);
}

void CudaOps::join_host_copies() {
  if (!host_copy_pending_) return;
  host_copy_pending_ = false;
  // The copy stream is in order: its last copy's event covers the earlier ones.
  cudaEvent_t last = host_copy_done_[(next_host_copy_ - 1) % kHostCopiesInFlight];
  DI_CUDA_CHECK(cudaStreamWaitEvent(main_stream_, last, 0));
  if (stream_ != main_stream_) DI_CUDA_CHECK(cudaStreamWaitEvent(stream_, last, 0));
}

void CudaOps::upload_staging_beside() {
  // staging_dev_ is read only by replayed (and just-recorded) graphs, each followed by a record of
  // graph_done_: once the last one is done the slot's bytes may overwrite it. The main stream
  // waits for the copy before the graph it is for.
  DI_CUDA_CHECK(cudaStreamWaitEvent(h2d_stream_, graph_done_, 0));
  if (prepared_staged_ > 0 && prepared_staged_ <= staging_size_)
    DI_CUDA_CHECK(cudaMemcpyAsync(staging_dev_, staging_, prepared_staged_, cudaMemcpyHostToDevice, h2d_stream_));
  DI_CUDA_CHECK(cudaEventRecord(slot_copied_[staging_slot_], h2d_stream_));
  DI_CUDA_CHECK(cudaStreamWaitEvent(main_stream_, slot_copied_[staging_slot_], 0));
}

uint64_t CudaOps::copy_to_host_async(const TensorView& src, const TensorView& dst) {
  DI_CHECK(mode_ == Mode::kEager, "copy_to_host_async inside a step pass");
  DI_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel() && src.is_contiguous() && dst.is_contiguous(),
           "copy_to_host_async {} -> {}", src.shape_string(), dst.shape_string());
  DI_CHECK(src.device == tensor::Device::kCuda && dst.device == tensor::Device::kCpu,
           "copy_to_host_async: device {} -> host {}", src.shape_string(), dst.shape_string());
  const uint64_t ticket = next_host_copy_++;
  cudaEvent_t done = host_copy_done_[ticket % kHostCopiesInFlight];
  // Events are reused every kHostCopiesInFlight tickets (the Ops contract bounds the outstanding ones).
  cudaStream_t s = main_stream_;
  if (copy_streams_on_) {
    DI_CUDA_CHECK(cudaEventRecord(copy_fork_, main_stream_));  // behind the work queued so far
    DI_CUDA_CHECK(cudaStreamWaitEvent(d2h_stream_, copy_fork_, 0));
    s = d2h_stream_;
  }
  if (src.nbytes() > 0) DI_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToHost, s));
  DI_CUDA_CHECK(cudaEventRecord(done, s));
  host_copy_pending_ = copy_streams_on_;
  return ticket;
}

void CudaOps::wait_host_copy(uint64_t ticket) {
  if (ticket == 0) return;
  DI_CHECK(ticket < next_host_copy_ && next_host_copy_ - ticket <= kHostCopiesInFlight,
           "wait_host_copy: ticket {} is not one of the last {} copies", ticket, kHostCopiesInFlight);
  DI_CUDA_CHECK(cudaEventSynchronize(host_copy_done_[ticket % kHostCopiesInFlight]));
}

}  // namespace deepinfer::ops::cuda
