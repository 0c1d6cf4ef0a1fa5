// Launcher of the token hand-over kernel (kernels/sample/take_tokens.cuh).
#include "kernels/common/pdl_launch.cuh"
#include "kernels/sample/take_tokens.cuh"

namespace deepinfer::kernels {

cudaError_t launch_take_tokens(const TakeTokensParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  // A plain launch ahead of the step's PDL-launched kernels left a ~10 us gap before the next one
  // in the replayed graph (session 32's timeline): programmatic like the rest.
  launch_pdl(take_tokens_kernel, dim3(static_cast<unsigned>((p.n + 127) / 128)), dim3(128), 0, stream, p);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
