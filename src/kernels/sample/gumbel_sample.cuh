// Temperature sampling on the device (Ops::sample_rows): the host sampler's steps 6-10 for rows
// without bias / masks / penalties — z = (l - m) / T in F32 (m = the row's sanitised maximum,
// found first by argmax_rows_kernel, whose id is in out[r]), top-k / top-p as a threshold on z
// (sample_filter.cuh), min-p as exp(z) >= min_p in F64, then the argmax of z + G over the survivors with G = -log(-log(u)) in
// F64 and u from the keyed noise of sample/keyed_noise.h (the same 64-bit integer arithmetic as the
// host, so the same u bit for bit). The choice is a total order on (score desc, id asc), so the
// reduction order cannot change it; only the device's F64 log / exp (within 1 ulp of glibc's) can,
// where two scores agree to ~1e-16. Rows of small batches split over slices (sample_slices).
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/common/device_utils.cuh"
#include "sample/keyed_noise.h"

namespace deepinfer::kernels {

// One row's parameters (layout of Ops::SampleRow).
struct DeviceSampleRow {
  float temperature, min_p;
  uint64_t seed;
  int64_t position;
  int32_t top_k;  // <= 0: off
  float top_p;    // >= 1: off
};

// Whether candidate (score, id) beats (best_s, best): larger, or equal with a lower id; id -1
// (nothing found) beats nothing.
__device__ __forceinline__ bool sample_beats(double s, int32_t id, double best_s, int32_t best) {
  return id >= 0 && (best < 0 || s > best_s || (s == best_s && id < best));
}

__device__ __forceinline__ float sanitized_logit(float v) {
  return isnan(v) ? -INFINITY : (v == INFINITY ? FLT_MAX : v);
}

// The warp's best (score, id) in every lane.
__device__ __forceinline__ void warp_best(double& best_s, int32_t& best) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const double s = __shfl_xor_sync(0xffffffffu, best_s, o);
    const int32_t id = __shfl_xor_sync(0xffffffffu, best, o);
    if (sample_beats(s, id, best_s, best)) best_s = s, best = id;
  }
}

// Slices per sampled row (a power of two <= 128): doubled while the blocks stay within two per SM
// and a slice keeps >= 1,024 ids. A sampled id costs far more than an argmax's (a keyed hash and
// two F64 logarithms), so the rows of small batches spread over more SMs than argmax_slices':
// batch 1 at V = 129,280 on 132 SMs: 64 slices (16 took 14 us per step, session 31's ncu).
inline int sample_slices(int64_t rows, int64_t V, int sms) {
  int s = 1;
  while (s < 128 && rows * (2 * s) <= 2 * static_cast<int64_t>(sms) && V / (2 * s) >= 1024) s *= 2;
  return s;
}

// A cut of NaN: the row's draw over every min-p survivor (`pre`, the first pass of a draw-first
// launch, sample_filter.cuh) is already its answer.
__device__ __forceinline__ bool cut_takes_pre(const float* cut, int64_t r) { return cut != nullptr && isnan(cut[r]); }

// Block (s, r): slice s of row r (sample_slices of them). arg[r] is the row's argmax
// (argmax_rows_kernel; -1: nothing finite). Greedy rows (T = 0) and rows with nothing finite keep
// argmax_rows_kernel's answer (dest untouched, or the slices' partials empty). One slice per row
// writes dest[r]; with S > 1 each slice writes its (score, id) to part_s / part_i [R, S] for
// sample_merge_kernel. Rows whose cut takes `pre` (cut_takes_pre) copy pre[r] into dest[r] (S = 1)
// or leave it to the merge. skip_top_k (a draw-first launch's first pass): top-k rows, which
// filter first, are left out like greedy ones.
__global__ void __launch_bounds__(1024)
    gumbel_sample_kernel(const float* logits, int64_t ld, int64_t V, const DeviceSampleRow* rows, const float* cut,
                         const int32_t* arg_ids, int32_t* dest, const int32_t* pre, double* part_s, int32_t* part_i,
                         bool skip_top_k) {
  pdl_prologue();
  const int64_t S = gridDim.x, s = blockIdx.x, r = blockIdx.y;
  const DeviceSampleRow p = rows[r];
  const int32_t arg = arg_ids[r];
  if (p.temperature == 0.0f || arg < 0 || (skip_top_k && p.top_k > 0)) {
    if (S > 1 && threadIdx.x == 0) part_s[r * S + s] = -INFINITY, part_i[r * S + s] = -1;
    return;  // uniform across the block: no barrier is skipped by part of it
  }
  if (cut_takes_pre(cut, r)) {
    if (S == 1) {
      __syncthreads();  // dest may be arg_ids: every thread has read it
      if (threadIdx.x == 0) dest[r] = pre[r];
    }
    return;
  }
  const float* row = logits + r * ld;
  const float m = sanitized_logit(row[arg]);
  const int64_t per = (V / S + 3) / 4 * 4;
  const int64_t begin = min(V, s * per), end = s + 1 == S ? V : min(V, begin + per);
  const bool min_p = p.min_p > 0.0f;
  const float z_cut = cut != nullptr ? cut[r] : -INFINITY;  // top-k / top-p (sample_filter_kernel)
  double best_s = -INFINITY;
  int32_t best = -1;
  // Ids ascending per thread: the strict '>' keeps a thread's lowest id among equal scores.
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    // __fsub_rn / __fdiv_rn: the host's F32 rounding, never contracted or approximated.
    const float z = __fdiv_rn(__fsub_rn(sanitized_logit(__ldg(row + i)), m), p.temperature);
    if (z == -INFINITY || z < z_cut) continue;
    if (min_p && exp(static_cast<double>(z)) < static_cast<double>(p.min_p)) continue;
    const double u = sample::bits_to_open_unit(
        sample::noise_bits(p.seed, sample::NoiseStream::kToken, p.position, static_cast<int32_t>(i)));
    const double score = __dadd_rn(static_cast<double>(z), -log(-log(u)));
    if (best < 0 || score > best_s) best_s = score, best = static_cast<int32_t>(i);
  }
  warp_best(best_s, best);
  __shared__ double ss[32];
  __shared__ int32_t si[32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = blockDim.x >> 5;
  if (lane == 0) ss[warp] = best_s, si[warp] = best;
  __syncthreads();
  if (warp == 0) {
    best_s = lane < n_warps ? ss[lane] : -INFINITY;
    best = lane < n_warps ? si[lane] : -1;
    warp_best(best_s, best);
    if (lane == 0) {
      if (S == 1) {
        dest[r] = best;
      } else {
        part_s[r * S + s] = best_s;
        part_i[r * S + s] = best;
      }
    }
  }
}

// The slices' (score, id) pairs of each sampled row [R, S] reduced into dest [R]: a warp per row
// (lane l folds slices l, l + 32, ...: the choice is a total order, so any fold gives it); greedy
// rows keep dest[r], rows whose cut takes `pre` get pre[r].
__global__ void __launch_bounds__(32)
    sample_merge_kernel(const DeviceSampleRow* rows, const double* part_s, const int32_t* part_i, int S, const float* cut,
                        const int32_t* pre, int32_t* dest) {
  pdl_prologue();
  const int64_t r = blockIdx.x;
  if (rows[r].temperature == 0.0f) return;
  if (cut_takes_pre(cut, r)) {
    if (threadIdx.x == 0) dest[r] = pre[r];
    return;
  }
  double best_s = -INFINITY;
  int32_t best = -1;
  for (int j = static_cast<int>(threadIdx.x); j < S; j += 32) {
    const double s = part_s[r * S + j];
    const int32_t id = part_i[r * S + j];
    if (sample_beats(s, id, best_s, best)) best_s = s, best = id;
  }
  warp_best(best_s, best);
  // A row with nothing finite kept -1 in every slice (and in argmax_rows_kernel's answer).
  if (threadIdx.x == 0) dest[r] = best;
}

}  // namespace deepinfer::kernels
