// Raw logprobs on the device (Ops::logprob_rows): a row's log-sum-exp and its top-n tokens, so a
// step with logprobs copies (1 + 2n) numbers per row to the host instead of the row's 129,280
// logits; and a token's rank in its row (Ops::token_rank_rows, token_rank_kernel at the end). The
// host's rules (sample/logprobs.h): the row sanitised (NaN -> -inf, +inf -> FLT_MAX);
// lse = m + log(sum exp(l - m)) in F64; the top-n in (value desc, id asc) order, -inf entries
// counting like any other (so they appear only when fewer than n are finite).
//   * logprob_slice_kernel: block (s, r) takes slice s of row r — kLogprobSlices slices, a number
//     fixed by V alone, so the F64 sum's order (and so every bit of the result) never depends on
//     the batch. It writes the slice's max m_s, sum_s = sum exp(l - m_s) (threads in a fixed
//     stride, a fixed tree), and its top-n list. The top-n is a warp-wide sorted list (lane j holds
//     the j-th best) that a candidate enters only when it beats the list's last entry — one ballot
//     per 32 ids, an insertion per entry that gets in (~n log(V / n) of them on real logits).
//   * logprob_merge_kernel: a warp per row merges the slices (lse = M + log sum_s sum_s e^(m_s - M),
//     in slice order) and their lists, then writes the chosen token's logprob and the top-n.
// The (value, id) order is total, so the lists are exact whatever the merge order; only the lse's
// F64 rounding differs from the host's single pass (~1e-16 relative: the float results within an
// ulp).
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/common/device_utils.cuh"

namespace deepinfer::kernels {

inline constexpr int kLogprobSlices = 16;   // per row, whatever the batch
inline constexpr int kLogprobThreads = 256;
inline constexpr int kLogprobMaxTop = 20;   // Ops::kMaxLogprobTop (<= 32: one list entry per lane)

__device__ __forceinline__ float sanitized(float v) {
  if (v != v) return -INFINITY;
  return v == INFINITY ? FLT_MAX : v;
}

// (v, i) before (bv, bi) in the top-n order: larger value, or equal with a lower id; id -1 is the
// empty entry, after everything.
__device__ __forceinline__ bool lp_before(float v, int32_t i, float bv, int32_t bi) {
  return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

// A warp's sorted top-n list: lane j < n holds entry j. Every lane calls these with the same n.
struct WarpTopList {
  float v = -INFINITY;
  int32_t id = -1;

  // The last entry (the bar a candidate must pass), on every lane.
  __device__ __forceinline__ void last(int n, float* bv, int32_t* bi) const {
    *bv = __shfl_sync(0xffffffffu, v, n - 1);
    *bi = __shfl_sync(0xffffffffu, id, n - 1);
  }
  // Inserts (cv, ci), which passes the bar: entries before it stay, the rest shift down one lane.
  __device__ __forceinline__ void insert(int n, float cv, int32_t ci) {
    const int lane = threadIdx.x & 31;
    const int pos = __popc(__ballot_sync(0xffffffffu, lane < n && lp_before(v, id, cv, ci)));
    const float up_v = __shfl_up_sync(0xffffffffu, v, 1);
    const int32_t up_i = __shfl_up_sync(0xffffffffu, id, 1);
    if (lane == pos) {
      v = cv, id = ci;
    } else if (lane > pos) {
      v = up_v, id = up_i;
    }
  }
  // Offers one candidate per lane (id -1: none); those that pass the bar go in, in lane order.
  __device__ __forceinline__ void offer(int n, float cv, int32_t ci) {
    float bv;
    int32_t bi;
    last(n, &bv, &bi);
    unsigned pass = __ballot_sync(0xffffffffu, lp_before(cv, ci, bv, bi));
    while (pass != 0) {
      const int src = __ffs(pass) - 1;
      insert(n, __shfl_sync(0xffffffffu, cv, src), __shfl_sync(0xffffffffu, ci, src));
      last(n, &bv, &bi);
      pass &= ~(1u << src);
      pass &= __ballot_sync(0xffffffffu, lp_before(cv, ci, bv, bi));  // the bar rose
    }
  }
};

// The ids [begin, end) of slice s of a row of V: slices of a multiple of 4 ids, fixed by V alone.
__device__ __forceinline__ void logprob_slice(int64_t V, int s, int64_t* begin, int64_t* end) {
  const int64_t per = ((V + kLogprobSlices - 1) / kLogprobSlices + 3) / 4 * 4;
  *begin = min(V, s * per);
  *end = s + 1 == kLogprobSlices ? V : min(V, *begin + per);
}

// Block (s, r): slice s of row r of logits [R, V] (row stride ld). Writes part_m / part_sum [R, S]
// (the slice's max, F32, and sum exp(l - max), F64) and part_v / part_i [R, S, n] (its top-n list).
__global__ void __launch_bounds__(kLogprobThreads)
    logprob_slice_kernel(const float* logits, int64_t ld, int64_t V, int n, float* part_m, double* part_sum,
                         float* part_v, int32_t* part_i) {
  pdl_prologue();
  const int s = blockIdx.x;
  const int64_t r = blockIdx.y;
  int64_t begin, end;
  logprob_slice(V, s, &begin, &end);
  const float* row = logits + r * ld;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  constexpr int kWarps = kLogprobThreads / 32;
  // Pass 1: the slice's max and each warp's top-n (32 consecutive ids per warp and round).
  float m = -INFINITY;
  WarpTopList list;
  for (int64_t base = begin + static_cast<int64_t>(warp) * 32; base < end; base += kLogprobThreads) {
    const int64_t i = base + lane;
    const float v = i < end ? sanitized(__ldg(row + i)) : -INFINITY;
    m = fmaxf(m, v);
    if (n > 0) list.offer(n, v, i < end ? static_cast<int32_t>(i) : -1);
  }
  __shared__ float sm[kWarps];
  __shared__ double ssum[kWarps];
  __shared__ float lv[kWarps][32];
  __shared__ int32_t li[kWarps][32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) sm[warp] = m;
  lv[warp][lane] = list.v, li[warp][lane] = list.id;
  __syncthreads();
  m = sm[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, sm[w]);
  // Pass 2 (the slice is in L1 / L2 now): sum exp(l - m) in F64, a fixed stride and tree.
  double sum = 0.0;
  if (m != -INFINITY) {
    for (int64_t i = begin + threadIdx.x; i < end; i += kLogprobThreads) {
      sum += exp(static_cast<double>(sanitized(__ldg(row + i))) - static_cast<double>(m));
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) ssum[warp] = sum;
  __syncthreads();
  if (warp != 0) return;
  // Warp 0: the block's sum in warp order, and the warps' lists merged into one.
  const int64_t slot = r * kLogprobSlices + s;
  if (lane == 0) {
    double total = 0.0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += ssum[w];
    part_m[slot] = m;
    part_sum[slot] = total;
  }
  if (n == 0) return;
  WarpTopList merged;
  for (int w = 0; w < kWarps; ++w) merged.offer(n, lv[w][lane], lane < n ? li[w][lane] : -1);
  if (lane < n) part_v[slot * n + lane] = merged.v, part_i[slot * n + lane] = merged.id;
}

// A warp per row: the slices merged into the row's lse, the logprob of tokens[r] into logprob[r]
// and the top-n into top_ids / top_lp [R, n].
__global__ void __launch_bounds__(32)
    logprob_merge_kernel(const float* logits, int64_t ld, int n, const float* part_m, const double* part_sum,
                         const float* part_v, const int32_t* part_i, const int32_t* tokens, float* logprob,
                         int32_t* top_ids, float* top_lp) {
  pdl_prologue();
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x;
  const int64_t slot0 = r * kLogprobSlices;
  const float ms = lane < kLogprobSlices ? part_m[slot0 + lane] : -INFINITY;
  float M = ms;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
  double lse = -INFINITY;
  if (M != -INFINITY) {
    double t = ms == -INFINITY ? 0.0 : part_sum[slot0 + lane] * exp(static_cast<double>(ms) - static_cast<double>(M));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    lse = static_cast<double>(M) + log(t);
  }
  // float(v - lse), -inf for a -inf entry or an all -inf row (the host's token_logprob).
  auto lp = [&](float v) { return v == -INFINITY || isinf(lse) ? -INFINITY : static_cast<float>(v - lse); };
  if (lane == 0) {
    const int32_t token = tokens[r];
    logprob[r] = token < 0 ? -INFINITY : lp(sanitized(logits[r * ld + token]));
  }
  if (n == 0) return;
  WarpTopList list;
  for (int s = 0; s < kLogprobSlices; ++s) {
    const int64_t k = (slot0 + s) * n + lane;
    list.offer(n, lane < n ? part_v[k] : -INFINITY, lane < n ? part_i[k] : -1);
  }
  if (lane < n) {
    top_ids[r * n + lane] = list.id;
    top_lp[r * n + lane] = list.id < 0 ? -INFINITY : lp(list.v);
  }
}

// A block per row (Ops::token_rank_rows): rank[r] = 1 + the entries of row r that come before
// tokens[r] in the top-n order (sanitised value descending, lower id first among equals), 0 for a
// negative token. Threads count a fixed stride of the row each, then a warp and a block sum: an
// integer count, exact in any order.
__global__ void __launch_bounds__(kLogprobThreads)
    token_rank_kernel(const float* logits, int64_t ld, int64_t V, const int32_t* tokens, int32_t* rank) {
  pdl_prologue();
  const int64_t r = blockIdx.x;
  const int32_t token = tokens[r];
  if (token < 0) {
    if (threadIdx.x == 0) rank[r] = 0;
    return;
  }
  const float* row = logits + r * ld;
  const float tv = sanitized(row[token]);
  int32_t before = 0;
  for (int64_t i = threadIdx.x; i < V; i += kLogprobThreads) {
    const float v = sanitized(__ldg(row + i));
    before += v > tv || (v == tv && i < token);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) before += __shfl_xor_sync(0xffffffffu, before, o);
  constexpr int kWarps = kLogprobThreads / 32;
  __shared__ int32_t counts[kWarps];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) counts[warp] = before;
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += counts[w];
    rank[r] = total + 1;
  }
}

}  // namespace deepinfer::kernels
