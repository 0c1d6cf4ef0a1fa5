// Greedy sampling on the device: each row's argmax with the host sampler's rules (Ops::argmax_rows):
// NaN never wins (read as -inf), +inf counts as the largest finite float, and among equal maxima
// the lowest id wins; -1 where nothing is finite-or-+inf. The rule is a total order on (value, id)
// pairs, so any reduction order gives the host's answer: the block reduces in whatever order is
// fastest. A greedy decode step then copies R ids to the host instead of R x 129,280 F32 logits.
#pragma once

#include <cfloat>
#include <algorithm>
#include <cstdint>

#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kArgmaxThreads = 1024;

// Whether candidate (v, id) beats (best_v, best): strictly larger, or equal with a lower id. A
// candidate that never won anything (id -1, value -inf) beats nothing.
__device__ __forceinline__ bool argmax_beats(float v, int32_t id, float best_v, int32_t best) {
  return id >= 0 && (v > best_v || (v == best_v && (best < 0 || id < best)));
}

// Block (s, r) reduces slice s of row r: ids [s V / S, (s + 1) V / S) of logits [R, V] F32 (row
// stride ld; S = gridDim.x slices). One slice per row (S = 1) writes out [R] I32; with S > 1 each
// slice writes its (value, id) to part_v / part_i [R, S] and argmax_merge_kernel reduces them — a
// small batch's rows then spread over the SMs instead of one block per 0.5 MB row.
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_rows_kernel(const float* logits, int64_t ld, int64_t V, int32_t* out, float* part_v, int32_t* part_i) {
  pdl_prologue();
  const int64_t S = gridDim.x, s = blockIdx.x, r = blockIdx.y;
  // A slice starts on a multiple of 4 ids so the float4 path stays aligned.
  const int64_t per = (V / S + 3) / 4 * 4;
  const int64_t begin = std::min(V, s * per), end = s + 1 == S ? V : std::min(V, begin + per);
  const float* row = logits + r * ld + begin;
  const int64_t n = end - begin;
  float best_v = -INFINITY;
  int32_t best = -1;
  // Ids ascending per thread: the strict '>' keeps a thread's lowest id among its equal maxima.
  auto take = [&](float v, int64_t i) {
    if (v == INFINITY) v = FLT_MAX;
    if (v > best_v) best_v = v, best = static_cast<int32_t>(begin + i);  // NaN and -inf never pass
  };
  const bool vec = ld % 4 == 0 && reinterpret_cast<uintptr_t>(row) % 16 == 0;
  int64_t tail = 0;
  if (vec) {
    const int64_t n4 = n / 4;
    const float4* row4 = reinterpret_cast<const float4*>(row);
    for (int64_t j = threadIdx.x; j < n4; j += blockDim.x) {
      const float4 q = __ldg(row4 + j);
      take(q.x, 4 * j), take(q.y, 4 * j + 1), take(q.z, 4 * j + 2), take(q.w, 4 * j + 3);
    }
    tail = 4 * n4;
  }
  for (int64_t i = tail + threadIdx.x; i < n; i += blockDim.x) take(__ldg(row + i), i);
  // Warps, then the block (any order: argmax_beats is a total order).
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best_v, o);
    const int32_t id = __shfl_xor_sync(0xffffffffu, best, o);
    if (argmax_beats(v, id, best_v, best)) best_v = v, best = id;
  }
  __shared__ float sv[kArgmaxThreads / 32];
  __shared__ int32_t si[kArgmaxThreads / 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = blockDim.x >> 5;
  if (lane == 0) sv[warp] = best_v, si[warp] = best;
  __syncthreads();
  if (warp == 0) {
    best_v = lane < n_warps ? sv[lane] : -INFINITY;
    best = lane < n_warps ? si[lane] : -1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, best_v, o);
      const int32_t id = __shfl_xor_sync(0xffffffffu, best, o);
      if (argmax_beats(v, id, best_v, best)) best_v = v, best = id;
    }
    if (lane == 0) {
      if (S == 1) {
        out[r] = best;
      } else {
        part_v[r * S + s] = best_v;
        part_i[r * S + s] = best;
      }
    }
  }
}

// The slices' (value, id) pairs of each row [R, S] (S <= 32) reduced into out [R]: a warp per row.
__global__ void __launch_bounds__(32)
    argmax_merge_kernel(const float* part_v, const int32_t* part_i, int S, int32_t* out) {
  pdl_prologue();
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x;
  float best_v = lane < S ? part_v[r * S + lane] : -INFINITY;
  int32_t best = lane < S ? part_i[r * S + lane] : -1;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best_v, o);
    const int32_t id = __shfl_xor_sync(0xffffffffu, best, o);
    if (argmax_beats(v, id, best_v, best)) best_v = v, best = id;
  }
  if (lane == 0) out[r] = best;
}

// Slices per row (a power of two <= 32): doubled while the blocks stay within two per SM and a
// slice keeps >= 4,096 ids (two rounds of the block's 16-byte loads). Batch 1 at V = 129,280: 16.
inline int argmax_slices(int64_t rows, int64_t V, int sms) {
  int s = 1;
  while (s < 32 && rows * (2 * s) <= 2 * static_cast<int64_t>(sms) && V / (2 * s) >= 4096) s *= 2;
  return s;
}

}  // namespace deepinfer::kernels
