// Top-k and top-p on the device (Ops::sample_rows): each row's cut — the logit threshold below
// which the host sampler's steps 7 and 8 set a token to -inf — found without sorting, by radix
// selection over the processed logits z = (l - m) / T (F32, ordered as unsigned keys):
//   * top-k: the k-th largest finite z, counting equal values (std::nth_element's threshold);
//     every z >= it survives, ties with the k-th included;
//   * top-p: the host walks the survivors in (z desc, id asc) order summing exp(z - max z) until the
//     running mass reaches top_p * total, and keeps every z >= the value where it stopped. That
//     value is the largest v with mass(z >= v) >= top_p * total, whatever the id order inside a
//     tie group, so four 8-bit radix passes over the keys with each digit's mass find it. The
//     masses are summed in 2^-40 fixed point with integer atomics (the order cannot change a sum:
//     the cut is deterministic); against the host's F64 running sum the target can move by
//     ~1e-9 of the total, so the cut can differ only for a row whose mass reaches the target that
//     closely at a group boundary.
// One block per row; rows without top-k / top-p write -inf (no cut). gumbel_sample_kernel then
// drops z < cut[r] before min-p and the Gumbel-max.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/common/device_utils.cuh"
#include "kernels/sample/gumbel_sample.cuh"

namespace deepinfer::kernels {

inline constexpr int kFilterThreads = 1024;
inline constexpr double kMassScale = 1099511627776.0;  // 2^40: exp(z) <= 1, 129,280 of them < 2^57

// Monotone map of a float onto uint32 (larger float, larger key); -0 is read as +0 (they compare
// equal, as in the host's thresholds).
__device__ __forceinline__ uint32_t ordered_key(float z) {
  if (z == 0.0f) z = 0.0f;
  const uint32_t b = __float_as_uint(z);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Radix selection over the keys of one row: the key whose digits are found most significant
// first; at each level, with `above` = the weight (count or mass) of the keys above the current
// prefix, the digit d chosen is the largest whose weight above it plus its own reaches `target`.
// `weight(z)` gives an element's weight (0: not a candidate); W: uint32 counts or uint64 masses.
template <typename W, typename WeightFn>
__device__ uint32_t radix_select(const float* row, int64_t V, float m, float temperature, double target,
                                 WeightFn weight, W* hist, uint32_t* chosen, W* above_out) {
  uint32_t prefix = 0, mask = 0;
  W above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = 0;
    __syncthreads();
    // Each thread sums runs of one digit before an atomic: most of a row's keys share the leading
    // digits (one sign and a few exponents), and 1,024 threads adding to one shared counter per
    // element serialised the first passes (~3 ms a row before this).
    int run_digit = -1;
    W run = 0;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      const float z = __fdiv_rn(__fsub_rn(sanitized_logit(__ldg(row + i)), m), temperature);
      const uint32_t key = ordered_key(z);
      if ((key & mask) != prefix) continue;
      const W w = weight(z);
      if (w == 0) continue;
      const int digit = static_cast<int>((key >> shift) & 255u);
      if (digit != run_digit) {
        if (run_digit >= 0) atomicAdd(hist + run_digit, run);
        run_digit = digit, run = 0;
      }
      run += w;
    }
    if (run_digit >= 0) atomicAdd(hist + run_digit, run);
    __syncthreads();
    if (threadIdx.x == 0) {
      W cum = above;
      int d = 255;
      for (; d > 0; --d) {
        if (static_cast<double>(cum + hist[d]) >= target) break;
        cum += hist[d];
      }
      *chosen = static_cast<uint32_t>(d);
      *above_out = cum;
    }
    __syncthreads();
    prefix |= *chosen << shift;
    mask |= 255u << shift;
    above = *above_out;
    __syncthreads();  // every thread has read *chosen before the next level overwrites it
  }
  return prefix;
}

__global__ void __launch_bounds__(kFilterThreads)
    sample_filter_kernel(const float* logits, int64_t ld, int64_t V, const DeviceSampleRow* rows, const int32_t* argmax,
                         float* cut) {
  pdl_prologue();
  const int64_t r = blockIdx.x;
  const DeviceSampleRow p = rows[r];
  const int32_t arg = argmax[r];
  const bool top_k = p.top_k > 0, top_p = p.top_p < 1.0f;
  if (p.temperature == 0.0f || arg < 0 || (!top_k && !top_p)) {
    if (threadIdx.x == 0) cut[r] = -INFINITY;
    return;  // uniform across the block
  }
  const float* row = logits + r * ld;
  const float m = sanitized_logit(row[arg]);
  __shared__ unsigned long long hist[256];
  __shared__ uint32_t chosen;
  __shared__ unsigned long long above, total_fx;
  __shared__ uint32_t n_finite;
  float k_cut = -INFINITY;
  if (top_k) {
    if (threadIdx.x == 0) n_finite = 0;
    __syncthreads();
    uint32_t mine = 0;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      mine += __fdiv_rn(__fsub_rn(sanitized_logit(__ldg(row + i)), m), p.temperature) != -INFINITY;
    }
    atomicAdd(&n_finite, mine);
    __syncthreads();
    if (n_finite > static_cast<uint32_t>(p.top_k)) {  // else top-k keeps every finite token
      auto count = [](float z) -> unsigned long long { return z != -INFINITY ? 1ull : 0ull; };
      k_cut = key_value(radix_select<unsigned long long>(row, V, m, p.temperature, static_cast<double>(p.top_k), count,
                                                         hist, &chosen, &above));
    }
  }
  float p_cut = -INFINITY;
  if (top_p) {
    // The survivors' mass exp(z - max z), max z = +0 (top-k keeps the maximum), in fixed point.
    auto mass = [k_cut](float z) -> unsigned long long {
      return z != -INFINITY && z >= k_cut ? static_cast<unsigned long long>(exp(static_cast<double>(z)) * kMassScale) : 0ull;
    };
    if (threadIdx.x == 0) total_fx = 0;
    __syncthreads();
    unsigned long long mine = 0;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      mine += mass(__fdiv_rn(__fsub_rn(sanitized_logit(__ldg(row + i)), m), p.temperature));
    }
    atomicAdd(&total_fx, mine);
    __syncthreads();
    const double target = static_cast<double>(p.top_p) * static_cast<double>(total_fx);
    p_cut = key_value(radix_select<unsigned long long>(row, V, m, p.temperature, target, mass, hist, &chosen, &above));
  }
  if (threadIdx.x == 0) cut[r] = top_p ? p_cut : k_cut;
}

}  // namespace deepinfer::kernels
