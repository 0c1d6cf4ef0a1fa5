// Host side of programmatic dependent launch (PDL, sm_90+): every kernel of the backend is
// launched through launch_pdl(), which sets the programmatic-stream-serialization attribute, and
// starts with pdl_prologue() (device_utils.cuh). The next kernel in the stream may then be
// scheduled while this one still runs and waits in its own prologue, so a decode step's ~160
// short kernels stop paying the launch gap between them. Correctness does not depend on it:
// each kernel's griddepcontrol.wait returns only once its predecessor has completed and its
// writes are visible, and a kernel completes only after its own wait returned, so the ordering
// is the ordinary stream order, transitively. DEEPINFER_CUDA_PDL=0 launches plainly (an A/B
// switch; results are bit-identical either way).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/common/env_knob.h"

namespace deepinfer::kernels {

// An attribute of the current device, `fallback` if it cannot be read.
inline int device_attribute(cudaDeviceAttr attr, int fallback) {
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess) return fallback;
  return v;
}
// Compute capability major of the current device (0 if it cannot be read), read once.
inline int device_cc_major() {
  static const int major = device_attribute(cudaDevAttrComputeCapabilityMajor, 0);
  return major;
}
// SMs of the current device (132, an H200's, if it cannot be read), read once.
inline int device_sm_count() {
  static const int n = device_attribute(cudaDevAttrMultiProcessorCount, 132);
  return n;
}

// PDL on Hopper and newer unless DEEPINFER_CUDA_PDL=0.
inline bool pdl_enabled() {
  static const bool on = env_switch("DEEPINFER_CUDA_PDL") && device_cc_major() >= 9;
  return on;
}

// A launch configuration with the attributes attr[0 .. n_attrs).
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                        cudaLaunchAttribute* attr, unsigned n_attrs) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = n_attrs;
  return cfg;
}
inline void set_pdl_attribute(cudaLaunchAttribute& a) {
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
}
inline void set_cluster_attribute(cudaLaunchAttribute& a, unsigned cluster_x) {
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = cluster_x;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
}

// kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent launch. Returns the
// launch error (also recorded as the runtime's last error, like a <<<>>> launch).
template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                       cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  set_pdl_attribute(attr[0]);
  cudaLaunchConfig_t cfg = launch_config(grid, block, smem, stream, attr, pdl_enabled() ? 1 : 0);
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// The same launch in clusters of (cluster_x, 1, 1) CTAs (grid.x a multiple of cluster_x).
template <typename... Params, typename... Args>
cudaError_t launch_pdl_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                               unsigned cluster_x, Args&&... args) {
  cudaLaunchAttribute attr[2];
  set_cluster_attribute(attr[0], cluster_x);
  set_pdl_attribute(attr[1]);
  cudaLaunchConfig_t cfg = launch_config(grid, block, smem, stream, attr, pdl_enabled() ? 2 : 1);
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// How many clusters of (cluster_x, 1, 1) CTAs of `kernel` the device runs at once (0 if it cannot).
template <typename... Params>
int max_active_clusters(void (*kernel)(Params...), dim3 block, size_t smem, unsigned cluster_x) {
  cudaLaunchAttribute attr[1];
  set_cluster_attribute(attr[0], cluster_x);
  const cudaLaunchConfig_t cfg = launch_config(dim3(cluster_x, 1, 1), block, smem, nullptr, attr, 1);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();  // not a launch error: the caller takes the one-CTA kernel
    return 0;
  }
  return n;
}

}  // namespace deepinfer::kernels
