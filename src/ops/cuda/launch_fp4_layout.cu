// FP4 weight codes into the device layout the CUDA decoders read (kernels/gemm/fp4_layout.h): one
// pass over a weight when it reaches the device, in place.
#include <algorithm>

#include "kernels/gemm/fp4_layout.h"
#include "kernels/launch.h"

namespace deepinfer::kernels {
namespace {

// words: [n] checkpoint-layout words -> device-layout words.
__global__ void fp4_to_device_layout_kernel(uint32_t* words, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    words[i] = fp4_to_device_word(words[i]);
}

}  // namespace

cudaError_t launch_fp4_to_device_layout(uint8_t* codes, int64_t bytes, cudaStream_t stream) {
  if (bytes % 4 != 0 || reinterpret_cast<uintptr_t>(codes) % 4 != 0) return cudaErrorInvalidValue;
  const int64_t n = bytes / 4;
  if (n == 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65536);
  fp4_to_device_layout_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(reinterpret_cast<uint32_t*>(codes), n);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
