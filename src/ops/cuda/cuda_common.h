// Helpers shared by the CudaOps launcher files (host code): checked CUDA calls and the
// TensorView -> kernel-parameter conversions.
#pragma once

#include "kernels/launch.h"
#include "ops/cuda/cuda_check.h"
#include "tensor/linear_weight.h"
#include "tensor/tensor.h"

namespace deepinfer::ops::cuda {

// The kernel element type of an activation view (F32 or BF16 on the device; anything else aborts).
kernels::ActType act_type(const tensor::TensorView& v);
// A LinearWeight's device storage as a kernel weight descriptor.
kernels::WeightDesc weight_desc(const tensor::LinearWeight& w);

// A kernel launch inside a CudaOps member: runs it (checked) unless the step is being prepared
// for graph replay, where only the launch site enters the step's signature.
#define DI_LAUNCH(call)                                      \
  do {                                                       \
    if (this->launch_site(__FILE__, __LINE__)) DI_CUDA_CHECK(call); \
  } while (0)

template <typename T>
T* dptr(const tensor::TensorView& v) {
  return static_cast<T*>(v.data);
}

}  // namespace deepinfer::ops::cuda
