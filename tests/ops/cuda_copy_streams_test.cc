// CudaOps copies on the copy streams beside the main stream (cuda_copy_streams.cc): a copy back
// (copy_to_host_async) reads its source before device work queued after it may overwrite it, with
// and without DEEPINFER_CUDA_COPY_STREAMS; and the ring of copies back in flight delivers each its
// own bytes. The source is large (64 MB: milliseconds over PCIe) and overwritten by a fast kernel
// right after, so a missing join shows as overwritten values on the host.
#include <cstdlib>
#include <string>

#include "op_test_harness.h"

namespace deepinfer::testing {
namespace {

class CudaCopyStreamsTest : public OpHarness {
 protected:
  // Fills src with `before`, queues its copy back, overwrites it with `after` (an eager kernel),
  // then waits for the copy: the host must hold `before` everywhere.
  static void expect_copy_reads_before_overwrite(ops::cuda::CudaOps& gpu, float before, float after) {
    constexpr int64_t n = int64_t{16} << 20;  // 64 MB of F32
    TensorView src = gpu.alloc_persistent(DType::kF32, {n});
    TensorView host = gpu.alloc_host(DType::kF32, {n});
    gpu.fill(src, before);
    const uint64_t ticket = gpu.copy_to_host_async(src, host);
    gpu.fill(src, after);
    gpu.wait_host_copy(ticket);
    const float* h = host.as<const float>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += h[i] != before;
    EXPECT_EQ(wrong, 0) << "elements the later fill overwrote before the copy read them";
    gpu.synchronize();
  }
};

TEST_F(CudaCopyStreamsTest, CopyBackReadsItsSourceBeforeLaterWorkOverwritesIt) {
  expect_copy_reads_before_overwrite(*gpu_, 1.0f, 2.0f);
}

TEST_F(CudaCopyStreamsTest, CopyBackOnTheMainStreamToo) {
  ::setenv("DEEPINFER_CUDA_COPY_STREAMS", "0", 1);
  ops::cuda::CudaOps main_only;
  ::unsetenv("DEEPINFER_CUDA_COPY_STREAMS");
  expect_copy_reads_before_overwrite(main_only, 3.0f, 4.0f);
}

// Copies back of one buffer as it changes, kHostCopiesInFlight of them outstanding (the engine's
// pattern: step n's ids go back while step n + 1 writes new ones): each host buffer holds the
// value the source had when its copy was queued.
TEST_F(CudaCopyStreamsTest, CopiesInFlightEachHoldTheirOwnBytes) {
  constexpr int64_t n = int64_t{4} << 20;
  constexpr int kInFlight = ops::Ops::kHostCopiesInFlight;
  TensorView src = gpu_->alloc_persistent(DType::kF32, {n});
  TensorView host[kInFlight];
  for (TensorView& h : host) h = gpu_->alloc_host(DType::kF32, {n});
  uint64_t tickets[kInFlight] = {};
  for (int i = 0; i < kInFlight; ++i) {
    gpu_->fill(src, static_cast<float>(10 + i));
    tickets[i] = gpu_->copy_to_host_async(src, host[i]);
  }
  for (int i = 0; i < kInFlight; ++i) {
    gpu_->wait_host_copy(tickets[i]);
    const float* h = host[i].as<const float>();
    int64_t wrong = 0;
    for (int64_t j = 0; j < n; ++j) wrong += h[j] != static_cast<float>(10 + i);
    EXPECT_EQ(wrong, 0) << "copy " << i;
  }
}

}  // namespace
}  // namespace deepinfer::testing
