// Launcher of the L2 prefetch hint (kernels/common/l2_prefetch.cuh).
#include "kernels/common/l2_prefetch.cuh"
#include "kernels/common/pdl_launch.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {

cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, cudaStream_t stream) {
  if (p.n <= 0 || p.ctas <= 0) return cudaSuccess;
  // The bulk prefetch exists from sm_90 on; older devices simply go without the hint.
  if (device_cc_major() < 9) return cudaSuccess;
  return launch_pdl(l2_prefetch_kernel, dim3(p.ctas), dim3(kL2PrefetchThreads), 0, stream, p);
}

}  // namespace deepinfer::kernels
