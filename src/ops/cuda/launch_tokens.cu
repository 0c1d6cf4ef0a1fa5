// Launcher of the token hand-over kernel (kernels/sample/take_tokens.cuh).
#include "kernels/sample/take_tokens.cuh"

namespace deepinfer::kernels {

cudaError_t launch_take_tokens(const TakeTokensParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  take_tokens_kernel<<<static_cast<unsigned>((p.n + 127) / 128), 128, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
