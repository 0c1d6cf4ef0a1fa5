// A step's input tokens taken from ids an earlier step sampled on the device (Ops::take_tokens):
// asynchronous scheduling launches step n + 1 before the host has seen step n's tokens, so the
// decode rows' ids are read where the sampler wrote them. One thread per token row.
#pragma once

#include "kernels/common/device_utils.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {

__global__ void take_tokens_kernel(TakeTokensParams p) {
  pdl_prologue();  // launched like every kernel of the backend (pdl_launch.cuh)
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.n) return;
  const int32_t r = p.from[t];
  if (r < 0) return;
  // A row where nothing was finite sampled -1: its placeholder stays (the host ends that sequence
  // and drops this step's row for it), so no step embeds an id outside the vocabulary.
  const int32_t id = p.source[r];
  if (id >= 0) p.tokens[t] = id;
}

}  // namespace deepinfer::kernels
