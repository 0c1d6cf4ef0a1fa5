// CudaOps memory: the per-step workspace arena, persistent allocations, copies and fills, plus
// the view -> launch-parameter helpers shared by the other launcher files.
#include "ops/cuda/cuda_ops.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "kernels/common/env_knob.h"
#include "ops/cuda/cuda_common.h"

namespace deepinfer::ops::cuda {

bool cuda_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

kernels::ActType act_type(const TensorView& v) {
  DI_CHECK(v.dtype == DType::kF32 || v.dtype == DType::kBF16, "activation dtype {} not supported on CUDA",
           tensor::dtype_name(v.dtype));
  DI_CHECK(v.device == tensor::Device::kCuda, "CUDA op given a host tensor {}", v.shape_string());
  return v.dtype == DType::kF32 ? kernels::ActType::kF32 : kernels::ActType::kBF16;
}

CudaOps::CudaOps(const CudaOpsOptions& options) : device_(options.device) {
  DI_CUDA_CHECK(cudaSetDevice(device_));
  DI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  main_stream_ = stream_;
  arena_size_ = options.workspace_bytes;
  DI_CUDA_CHECK(cudaMalloc(&arena_, arena_size_));
  graphs_on_ = options.graphs && kernels::env_switch("DEEPINFER_CUDA_GRAPHS");
  side_on_ = options.side_streams && kernels::env_switch("DEEPINFER_CUDA_SIDE_STREAM");
  graph_cache_ = std::make_unique<GraphCache>(options.graph_cache);
  staging_wanted_ = options.staging_bytes;
  one_upload_ = kernels::env_switch("DEEPINFER_CUDA_ONE_UPLOAD");
  DI_CUDA_CHECK(cudaEventCreateWithFlags(&graph_done_, cudaEventDisableTiming));
  n_staging_slots_ = one_upload_ ? kStagingSlots : 1;
  for (cudaEvent_t& e : slot_copied_) DI_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (cudaEvent_t& e : host_copy_done_) DI_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  create_copy_streams();
}

CudaOps::~CudaOps() {
  for (const SideLane& l : side_)
    if (l.stream != nullptr) cudaStreamSynchronize(l.stream);
  cudaStreamSynchronize(main_stream_);
  destroy_copy_streams();
  drop_graphs();
  cudaEventDestroy(graph_done_);
  for (cudaEvent_t e : slot_copied_) cudaEventDestroy(e);
  for (cudaEvent_t e : host_copy_done_) cudaEventDestroy(e);
  for (uint8_t* p : staging_slots_)
    if (p != nullptr) cudaFreeHost(p);
  if (staging_dev_ != nullptr) cudaFree(staging_dev_);
  for (void* p : retired_) cudaFree(p);
  for (void* p : persistent_) cudaFree(p);
  for (void* p : pinned_) cudaFreeHost(p);
  if (eager_ring_ != nullptr) cudaFreeHost(eager_ring_);
  cudaFree(arena_);
  for (const SideLane& l : side_) {
    if (l.stream == nullptr) continue;
    cudaStreamDestroy(l.stream);
    cudaEventDestroy(l.fork);
    cudaEventDestroy(l.join);
  }
  cudaStreamDestroy(main_stream_);
}

void CudaOps::on_begin_step() {
  stream_ = main_stream_;  // a pass abandoned inside a side region (an error mid-forward) left it set
  side_lane_ = -1;
  if (!retired_.empty()) {
    DI_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (void* p : retired_) DI_CUDA_CHECK(cudaFree(p));
    retired_.clear();
  }
  arena_used_ = 0;
}

size_t CudaOps::workspace_mark() { return static_cast<size_t>(arena_epoch_ << 44) | arena_used_; }

void CudaOps::workspace_release(size_t mark) {
  // A side region's kernels may still use its memory until the main stream has joined them.
  DI_CHECK(side_idle(), "workspace released inside a side region (side_join first)");
  // Kernels queued on the stream may still read released memory: they run before any later
  // kernel writes it (one stream), so reuse is safe without a sync.
  if ((mark >> 44) == arena_epoch_) arena_used_ = std::min(arena_used_, mark & ((size_t{1} << 44) - 1));
}

void* CudaOps::arena_alloc(size_t bytes) {
  bytes = (bytes + 255) / 256 * 256;
  if (arena_used_ + bytes > arena_size_) {
    // Grow: keep the old chunk alive until the next step (queued kernels may still read it).
    const size_t grown = std::max(arena_size_ * 2, arena_used_ + bytes);
    log_warn("CUDA workspace grows from {} to {} MiB (size it up front to avoid this)", arena_size_ >> 20, grown >> 20);
    // Recorded graphs address the old chunk, which is freed next step: none may run again. (A
    // pass being prepared or recorded now hashes the new addresses, so it cannot match them.)
    if (mode_ != Mode::kCapture) drop_graphs();
    retired_.push_back(arena_);
    ++arena_epoch_;
    DI_CUDA_CHECK(cudaMalloc(&arena_, grown));
    arena_size_ = grown;
    arena_used_ = 0;
  }
  void* p = static_cast<char*>(arena_) + arena_used_;
  arena_used_ += bytes;
  if (mode_ != Mode::kEager) {
    mix(reinterpret_cast<uintptr_t>(p));
    mix(bytes);
  }
  return p;
}

TensorView CudaOps::alloc(DType dtype, std::initializer_list<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  void* p = arena_alloc(static_cast<size_t>(n) * tensor::dtype_size(dtype));
  return TensorView::contiguous(p, dtype, shape.begin(), static_cast<int>(shape.size()), tensor::Device::kCuda);
}

void CudaOps::free_persistent(const TensorView& t) {
  const auto it = std::find(persistent_.begin(), persistent_.end(), t.data);
  DI_CHECK(it != persistent_.end(), "free_persistent: {} was not allocated by alloc_persistent", t.shape_string());
  DI_CHECK(mode_ != Mode::kCapture, "free_persistent while a step graph is being recorded");
  // Recorded graphs may address it (and a later allocation may reuse the address): none runs again.
  drop_graphs();
  DI_CUDA_CHECK(cudaDeviceSynchronize());  // every stream's queued work that may still read it
  DI_CUDA_CHECK(cudaFree(*it));
  persistent_.erase(it);
}

int64_t CudaOps::device_free_bytes() const {
  size_t free_b = 0, total = 0;
  if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return static_cast<int64_t>(free_b);
}

TensorView CudaOps::alloc_persistent(DType dtype, std::initializer_list<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t bytes = std::max<size_t>(static_cast<size_t>(n) * tensor::dtype_size(dtype), 1);
  void* p = nullptr;
  DI_CUDA_CHECK(cudaMalloc(&p, bytes));
  // Zeroed in the current lane's stream order: work on that stream (and on streams that join it
  // later) sees the zeros; anything launched on another stream first must wait for it.
  DI_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  persistent_.push_back(p);
  return TensorView::contiguous(p, dtype, shape.begin(), static_cast<int>(shape.size()), tensor::Device::kCuda);
}

TensorView CudaOps::alloc_host(DType dtype, std::initializer_list<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t bytes = std::max<size_t>(static_cast<size_t>(n) * tensor::dtype_size(dtype), 1);
  void* p = nullptr;
  DI_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  std::memset(p, 0, bytes);
  pinned_.push_back(p);
  return TensorView::contiguous(p, dtype, shape.begin(), static_cast<int>(shape.size()), tensor::Device::kCpu);
}

const void* CudaOps::eager_stage(const void* host, size_t bytes) {
  const size_t need = (bytes + 255) / 256 * 256;
  if (eager_ring_used_ + need > eager_ring_size_) {
    DI_CUDA_CHECK(cudaDeviceSynchronize());  // every queued copy out of the ring is done
    if (need > eager_ring_size_ / 4) {
      if (eager_ring_ != nullptr) DI_CUDA_CHECK(cudaFreeHost(eager_ring_));
      eager_ring_size_ = std::max({size_t{4} << 20, 2 * eager_ring_size_, 4 * need});
      DI_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&eager_ring_), eager_ring_size_, cudaHostAllocDefault));
    }
    eager_ring_used_ = 0;
  }
  uint8_t* dst = eager_ring_ + eager_ring_used_;
  std::memcpy(dst, host, bytes);
  eager_ring_used_ += need;
  return dst;
}

TensorView CudaOps::upload(const void* host, DType dtype, std::initializer_list<int64_t> shape) {
  if (mode_ != Mode::kEager && staging_dev_ != nullptr) {
    // A step pass: the bytes go to pinned staging and the view into its device copy, which the
    // recorded graph fills in one copy before its first kernel (graph_capture_begin) — one copy
    // node per step instead of one per upload, each of which the replayed step waited on.
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const size_t bytes = static_cast<size_t>(n) * tensor::dtype_size(dtype);
    const void* staged = bytes == 0 ? nullptr : stage(host, bytes);
    if (staged != nullptr) {
      void* dev = staging_dev_ + (static_cast<const uint8_t*>(staged) - staging_);
      return TensorView::contiguous(dev, dtype, shape.begin(), static_cast<int>(shape.size()), tensor::Device::kCuda);
    }
    // Empty, or no room (the step is then not replayable and runs eagerly): a workspace view.
    return alloc(dtype, shape);
  }
  TensorView v = alloc(dtype, shape);
  if (v.nbytes() == 0) return v;
  if (mode_ == Mode::kEager) {
    // Large uploads (bandwidth-bound: a prefill's gathered rows) copy from where they are.
    constexpr size_t kRingMaxUpload = size_t{8} << 20;
    const void* src = v.nbytes() <= kRingMaxUpload ? eager_stage(host, v.nbytes()) : host;
    join_host_copies();  // v may reuse the workspace a pending copy back reads
    DI_CUDA_CHECK(cudaMemcpyAsync(v.data, src, v.nbytes(), cudaMemcpyHostToDevice, stream_));
    return v;
  }
  // Prepare and capture stage the bytes at the same pinned offset; the recorded copy reads them
  // from there, so a replay uploads whatever the latest prepare staged.
  const void* staged = stage(host, v.nbytes());
  if (mode_ == Mode::kCapture && staged != nullptr)
    DI_CUDA_CHECK(cudaMemcpyAsync(v.data, staged, v.nbytes(), cudaMemcpyHostToDevice, stream_));
  return v;
}

void CudaOps::copy(const TensorView& src, const TensorView& dst) {
  DI_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel(), "copy {} -> {}", src.shape_string(), dst.shape_string());
  DI_CHECK(src.is_contiguous() && dst.is_contiguous(), "copy needs contiguous tensors");
  if (src.nbytes() == 0) return;
  const bool host = src.device == tensor::Device::kCpu || dst.device == tensor::Device::kCpu;
  if (mode_ != Mode::kEager && host) {
    replayable_ = false;  // host memory outside staging: the step runs eagerly instead
    return;
  }
  if (!launch_site(__FILE__, __LINE__)) return;
  DI_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDefault, stream_));
  if (host) DI_CUDA_CHECK(cudaStreamSynchronize(stream_));  // host memory: complete before returning
}

void CudaOps::fill(const TensorView& dst, float value) {
  if (dst.numel() == 0) return;
  int kind = 0;
  switch (dst.dtype) {
    case DType::kF32: kind = 0; break;
    case DType::kBF16: kind = 1; break;
    case DType::kI32: kind = 2; break;
    default: DI_CHECK(false, "fill of dtype {}", tensor::dtype_name(dst.dtype));
  }
  DI_LAUNCH(kernels::launch_fill({dst.data, kind, value, dst.numel()}, stream_));
}

void CudaOps::synchronize() {
  if (mode_ == Mode::kPrepare) return;  // nothing was launched
  if (copy_streams_on_) {
    DI_CUDA_CHECK(cudaStreamSynchronize(h2d_stream_));
    DI_CUDA_CHECK(cudaStreamSynchronize(d2h_stream_));
  }
  for (const SideLane& l : side_)
    if (l.stream != nullptr) DI_CUDA_CHECK(cudaStreamSynchronize(l.stream));
  DI_CUDA_CHECK(cudaStreamSynchronize(main_stream_));
}

}  // namespace deepinfer::ops::cuda
