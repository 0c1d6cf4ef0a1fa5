// DI_CUDA_CHECK: every CUDA runtime call is checked; a failure is a fatal error naming the call.
#pragma once

#include <cuda_runtime.h>

#include "base/check.h"

#define DI_CUDA_CHECK(expr)                                                                    \
  do {                                                                                         \
    const cudaError_t di_cuda_err_ = (expr);                                                   \
    DI_CHECK(di_cuda_err_ == cudaSuccess, "{} failed: {}", #expr, cudaGetErrorString(di_cuda_err_)); \
  } while (0)

// After a kernel launch: launch-configuration errors surface immediately.
#define DI_CUDA_LAUNCH_CHECK() DI_CUDA_CHECK(cudaGetLastError())
