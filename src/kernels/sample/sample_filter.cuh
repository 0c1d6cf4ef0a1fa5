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
// A cluster of CTAs per row at small batch (each CTA histograms its own ids, every CTA reads all
// the histograms), one CTA per row at large; rows without top-k / top-p write -inf (no cut).
// gumbel_sample_kernel then drops z < cut[r] before min-p and the Gumbel-max.
//
// Draw first, filter only where needed (top-p rows; DEEPINFER_SAMPLE_DRAW_FIRST, default on): the
// Gumbel-max over every min-p survivor draws j; if j survives the cut, it is the row's answer —
// the argmax over a subset that holds the argmax of its superset (same keyed noise, same tie
// rule) — and whether it survives needs no cut: with K* the cut's key (the largest key K with
// M(K) = double(mass of keys >= K) >= target, what radix_select finds), key_j >= K* exactly when
// M(key_j + 1) = double(mass of keys > key_j) < target. So one pass summing the mass above j
// (sample_check_kernel, spread over the Gumbel-max's slices) decides, and the filter and a second
// Gumbel-max run only for rows whose first draw fell outside: a draw lands outside a top-p cut
// with probability below ~1 - top_p whatever the row. Top-k rows filter first as before: a draw
// lands inside the top k with the probability of their mass, which a flat row makes tiny (H200,
// session 33: top-k 50 on the synthetic model's flat rows fell back every step, -2%). Rows with
// both take the filter too (top-p's total is over top-k's survivors, which needs top-k's cut).
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/common/cluster_utils.cuh"
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

// Distributed shared memory (sm_90): atomic adds into, and loads from, a shared::cluster address.
__device__ __forceinline__ void cluster_add_u64(uint32_t addr, unsigned long long v) {
#ifdef DEEPINFER_NO_CLUSTERS
  __trap();
#else
  asm volatile("red.shared::cluster.add.u64 [%0], %1;\n" ::"r"(addr), "l"(v) : "memory");
#endif
}
__device__ __forceinline__ unsigned long long cluster_load_u64(uint32_t addr) {
#ifdef DEEPINFER_NO_CLUSTERS
  __trap();
  return 0;
#else
  unsigned long long v;
  asm volatile("ld.shared::cluster.u64 %0, [%1];\n" : "=l"(v) : "r"(addr) : "memory");
  return v;
#endif
}
__device__ __forceinline__ void cluster_barrier() {
  cluster_arrive();
  cluster_wait();
}

// A row's filter state in each CTA's shared memory: one radix histogram per level (top-k's four,
// then top-p's four) of the CTA's own ids, all cleared before the first cluster barrier, so that a
// level needs one barrier — after its adds, every CTA sums the cluster's histograms and makes the
// same choice itself. The adds are reductions through the shared::cluster window into the CTA's
// own memory (native 64-bit adds; a plain 64-bit shared atomicAdd was ~10x slower on the few bins
// most ids share). One CTA taking every CTA's adds, as before, queued them at its SM: a kernel
// trace had that CTA spend 28-40 us on each of the first two levels (96 us per top-p launch, 46
// with the adds spread; session 31). CTA 0's copy also holds the finite count and total mass.
inline constexpr int kFilterLevels = 4;  // 8-bit digits of a 32-bit key
struct FilterShared {
  unsigned long long hist[2 * kFilterLevels][256];
  unsigned long long n_finite, total;
};

// Block-wide sum of one value per thread, added into `addr` (CTA 0's shared::cluster address).
// `scratch` is zero on entry (the caller clears it and synchronises).
__device__ __forceinline__ void add_block_sum(unsigned long long v, uint32_t addr, unsigned long long* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(scratch, v);
  __syncthreads();
  if (threadIdx.x == 0) cluster_add_u64(addr, *scratch);
}

// fn(j, z) for this thread's ids i of [begin, end) (begin + threadIdx.x, then blockDim.x apart, in
// order; j = i - begin), z = (sanitized logit - m) / T. Eight loads are issued before any is used:
// the row is in the L2 (the LM head just wrote it), and one dependent load per element left every
// pass of the filter waiting on L2 latency (ncu, session 31: 40% of its stall samples).
template <typename Fn>
__device__ __forceinline__ void for_each_z(const float* row, int64_t begin, int64_t end, float m, float temperature,
                                           Fn fn) {
  constexpr int kUnroll = 8;
  const int64_t step = blockDim.x;
  for (int64_t i0 = begin + threadIdx.x; i0 < end; i0 += kUnroll * step) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = i0 + u * step < end ? __ldg(row + i0 + u * step) : 0.0f;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (i0 + u * step < end) fn(i0 + u * step - begin, __fdiv_rn(__fsub_rn(sanitized_logit(v[u]), m), temperature));
    }
  }
}

// The digit a level chooses, by one warp over the level's finished histograms (`hist`, this CTA's,
// and the same offset in every other CTA of the cluster, summed): the largest d whose weight plus
// the weight of the digits above it (plus `above`, the weight above the level's prefix) reaches
// `target`, else 0 — what a walk down from 255 finds first, from exact integer sums in any order. Lane l holds digits 255 - 8l
// down to 248 - 8l. Returns the digit in every lane and sets *above to the weight above it.
__device__ __forceinline__ uint32_t choose_digit(const unsigned long long* hist, int C, double target,
                                                unsigned long long* above) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  unsigned long long h[8], sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) h[j] = 0;
  for (int c = 0; c < C; ++c) {  // the level's histogram of every CTA of the cluster
    const uint32_t base = cluster_map(hist, c);
#pragma unroll
    for (int j = 0; j < 8; ++j) h[j] += cluster_load_u64(base + 8u * static_cast<uint32_t>(255 - 8 * lane - j));
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) sum += h[j];
  unsigned long long incl = sum;  // digits above and in this lane (lanes below hold higher digits)
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long t = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += t;
  }
  unsigned long long cum = *above + (incl - sum);
  int found = -1;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (found < 0) {
      if (255 - 8 * lane - j == 0 || static_cast<double>(cum + h[j]) >= target) {
        found = j;
      } else {
        cum += h[j];
      }
    }
  }
  const int src = __ffs(__ballot_sync(0xffffffffu, found >= 0)) - 1;  // lane 31 always finds (digit 0)
  *above = __shfl_sync(0xffffffffu, cum, src);
  return static_cast<uint32_t>(__shfl_sync(0xffffffffu, 255 - 8 * lane - found, src));
}

// Radix selection over the keys of this CTA's ids of one row, together with the other CTAs of the
// cluster (each its own ids), into histograms fs.hist[first_level ..]: the key whose digits are
// found most significant first; at each level, with `above` = the weight (count or mass) of the
// keys above the current prefix, the digit chosen is the largest whose weight plus the weight
// above it reaches `target`. for_each(fn) calls fn(key, weight) for each of the CTA's ids, in
// order, where weight() gives the id's weight (0: not a candidate; asked only of keys under the
// prefix). `choice` is this CTA's shared broadcast slot.
template <typename ForEach>
__device__ uint32_t radix_select(ForEach for_each, double target, FilterShared& fs, int first_level, uint32_t* choice) {
  uint32_t prefix = 0, mask = 0;
  unsigned long long above = 0;  // warp 0's: a new selection starts at nothing above
  for (int level = 0; level < kFilterLevels; ++level) {
    const int shift = 24 - 8 * level;
    unsigned long long* local = &fs.hist[first_level + level][0];  // this CTA's histogram of the level
    const uint32_t hist = cluster_map(local, cluster_cta_rank());
    // Each thread sums runs of one digit before an add: most of a row's keys share the leading
    // digits (one sign and a few exponents), and adding to one counter per element serialised
    // the first passes (~3 ms a row).
    int run_digit = -1;
    unsigned long long run = 0;
    for_each([&](uint32_t key, auto weight) {
      if ((key & mask) != prefix) return;
      const unsigned long long w = weight();
      if (w == 0) return;
      const int digit = static_cast<int>((key >> shift) & 255u);
      if (digit != run_digit) {
        if (run_digit >= 0) cluster_add_u64(hist + 8u * static_cast<uint32_t>(run_digit), run);
        run_digit = digit, run = 0;
      }
      run += w;
    });
    if (run_digit >= 0) cluster_add_u64(hist + 8u * static_cast<uint32_t>(run_digit), run);
    cluster_barrier();  // every add is in its CTA's histogram of this level
    if (threadIdx.x < 32) {
      const uint32_t d = choose_digit(local, static_cast<int>(gridDim.x), target, &above);
      if (threadIdx.x == 0) *choice = d;
    }
    __syncthreads();  // (the slot is written again only after the next cluster barrier)
    prefix |= *choice << shift;
    mask |= 255u << shift;
  }
  return prefix;
}

// The mass above a row's first draw j (pre[r]), per slice of the Gumbel-max's (S of them):
// part[(r S + s) 2 + 0] the slice's top-p mass of every id (the filter's `total`), + 1 its mass of
// the ids whose key is above j's — the filter's own per-id masses (exp(z) in 2^-40 fixed point),
// so the sums are the same integers.
inline constexpr int kCheckSums = 2;
__device__ __forceinline__ bool takes_draw_check(const DeviceSampleRow& p, int32_t arg) {
  return p.temperature != 0.0f && arg >= 0 && p.top_p < 1.0f && p.top_k <= 0;  // top-p alone
}
__device__ __forceinline__ unsigned long long top_p_mass(float z) {
  return z != -INFINITY ? static_cast<unsigned long long>(exp(static_cast<double>(z)) * kMassScale) : 0ull;
}

// Grid (S, R), 1,024 threads: slice s of row r, the Gumbel-max's slicing (gumbel_sample_kernel).
__global__ void __launch_bounds__(1024)
    sample_check_kernel(const float* logits, int64_t ld, int64_t V, const DeviceSampleRow* rows, const int32_t* argmax,
                        const int32_t* pre, unsigned long long* part) {
  pdl_prologue();
  const int64_t S = gridDim.x, s = blockIdx.x, r = blockIdx.y;
  const DeviceSampleRow p = rows[r];
  const int32_t arg = argmax[r], j = pre[r];  // both loads in flight at once
  if (!takes_draw_check(p, arg)) return;  // uniform across the block
  const float* row = logits + r * ld;
  // j: the draw over the min-p survivors, never -1 (the maximum, z = 0, survives min-p).
  const float m = sanitized_logit(row[arg]), l_j = sanitized_logit(row[j]);
  const uint32_t key_j = ordered_key(__fdiv_rn(__fsub_rn(l_j, m), p.temperature));
  const int64_t per = (V / S + 3) / 4 * 4;
  const int64_t begin = min(V, s * per), end = s + 1 == S ? V : min(V, begin + per);
  unsigned long long sums[kCheckSums] = {0, 0};
  for_each_z(row, begin, end, m, p.temperature, [&](int64_t, float z) {
    const unsigned long long w = top_p_mass(z);
    sums[0] += w;
    if (ordered_key(z) > key_j) sums[1] += w;
  });
  __shared__ unsigned long long block_sums[kCheckSums];
  if (threadIdx.x < kCheckSums) block_sums[threadIdx.x] = 0;
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kCheckSums; ++k) {
    unsigned long long v = sums[k];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0 && v != 0) atomicAdd(&block_sums[k], v);
  }
  __syncthreads();
  if (threadIdx.x < kCheckSums) part[(r * S + s) * kCheckSums + threadIdx.x] = block_sums[threadIdx.x];
}

// Whether row r's first draw survives its top-p cut, from sample_check_kernel's sums: the
// filter's comparison (choose_digit), the mass as a double against top_p * total.
__device__ __forceinline__ bool draw_survives(const DeviceSampleRow& p, const unsigned long long* part, int64_t r,
                                              int S) {
  unsigned long long total = 0, mass_above = 0;
  for (int s = 0; s < S; ++s) total += part[(r * S + s) * kCheckSums], mass_above += part[(r * S + s) * kCheckSums + 1];
  const double target = static_cast<double>(p.top_p) * static_cast<double>(total);
  return static_cast<double>(mass_above) < target;
}

// Grid (C, R) in clusters of (C, 1, 1): the C CTAs of row r each take a C-th of its ids (C = 1: a
// plain launch, one CTA per row — a cluster of one). With cache_elems >= a CTA's share of ids
// (dynamic shared memory of kFilterCacheBytes each), the first pass keeps each id's key and
// top-p mass there and the radix levels read them instead of the row: a level then costs a
// shared load and a compare per id, not a division and an F64 exp (ncu, session 31: the passes'
// per-id instructions on a cluster's 8 SMs were most of a top-p launch's ~100 us).
inline constexpr int kFilterCacheBytes = 12;  // per id: key (4) + mass (8)
inline constexpr int kFilterCacheMaxBytes = 200 << 10;  // beside FilterShared's 16 KB: within 227 KB
// With `part` (draw first: S_check slices of sample_check_kernel's sums), rows whose first draw
// is their answer get a NaN cut (gumbel_sample_kernel's cut_takes_pre) instead of a cut.
__global__ void __launch_bounds__(kFilterThreads)
    sample_filter_kernel(const float* logits, int64_t ld, int64_t V, const DeviceSampleRow* rows, const int32_t* argmax,
                         float* cut, int64_t cache_elems, const unsigned long long* part, int S_check) {
  pdl_prologue();
  const int64_t r = blockIdx.y;
  const int rank = cluster_cta_rank(), C = static_cast<int>(gridDim.x);
  const DeviceSampleRow p = rows[r];
  const int32_t arg = argmax[r];
  const bool top_k = p.top_k > 0, top_p = p.top_p < 1.0f;
  if (p.temperature == 0.0f || arg < 0 || (!top_k && !top_p)) {
    // Greedy and empty rows keep their argmax either way; a plain temperature row's first draw is its answer.
    const bool drawn = part != nullptr && p.temperature != 0.0f && arg >= 0;
    if (rank == 0 && threadIdx.x == 0) cut[r] = drawn ? NAN : -INFINITY;
    return;  // uniform across the cluster (one row)
  }
  if (part != nullptr && takes_draw_check(p, arg) && draw_survives(p, part, r, S_check)) {
    if (rank == 0 && threadIdx.x == 0) cut[r] = NAN;
    return;  // every CTA of the cluster reads the same sums: uniform
  }
  const float* row = logits + r * ld;
  const float m = sanitized_logit(row[arg]);
  const int64_t per = (V + C - 1) / C;
  const int64_t begin = min(V, rank * per), end = min(V, begin + per), n = end - begin;
  // The cache: masses [cache_elems] U64, then keys [cache_elems] U32 (thread t's ids at t + k blockDim.x).
  extern __shared__ unsigned long long filter_cache[];
  const bool cached = cache_elems >= n;
  unsigned long long* mass_of = filter_cache;
  uint32_t* key_of = reinterpret_cast<uint32_t*>(filter_cache + cache_elems);
  __shared__ FilterShared fs;
  __shared__ unsigned long long scratch;
  __shared__ uint32_t choice;
  if (threadIdx.x == 0) scratch = 0;
  for (int i = threadIdx.x; i < 2 * kFilterLevels * 256; i += blockDim.x) (&fs.hist[0][0])[i] = 0;
  if (rank == 0 && threadIdx.x == 0) fs.n_finite = fs.total = 0;
  cluster_barrier();  // the histograms and counters are cleared before anyone adds into them
  // The CTA's ids as (key, weight) for radix_select: from the cache, or recomputed from the row.
  auto from_row = [&](auto weight_of_z) {
    return [&, weight_of_z](auto fn) {
      for_each_z(row, begin, end, m, p.temperature, [&](int64_t, float z) { fn(ordered_key(z), [&] { return weight_of_z(z); }); });
    };
  };
  auto from_cache = [&](auto weight_of_id) {
    return [&, weight_of_id](auto fn) {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const uint32_t key = key_of[j];
        fn(key, [&] { return weight_of_id(j, key); });
      }
    };
  };
  constexpr uint32_t kNoKey = 0x007fffffu;  // ordered_key(-inf)
  float k_cut = -INFINITY;
  if (top_k) {
    unsigned long long mine = 0;
    for_each_z(row, begin, end, m, p.temperature, [&](int64_t j, float z) {
      mine += z != -INFINITY;
      if (cached) key_of[j] = ordered_key(z);  // read back by this thread only
    });
    add_block_sum(mine, cluster_map(&fs.n_finite, 0), &scratch);
    cluster_barrier();
    if (cluster_load_u64(cluster_map(&fs.n_finite, 0)) > static_cast<unsigned long long>(p.top_k)) {
      // (else top-k keeps every finite token)
      const double target = static_cast<double>(p.top_k);
      const uint32_t key =
          cached ? radix_select(from_cache([](int64_t, uint32_t k) { return k != kNoKey ? 1ull : 0ull; }), target, fs, 0, &choice)
                 : radix_select(from_row([](float z) { return z != -INFINITY ? 1ull : 0ull; }), target, fs, 0, &choice);
      k_cut = key_value(key);
    }
  }
  float p_cut = -INFINITY;
  if (top_p) {
    // The survivors' mass exp(z - max z), max z = +0 (top-k keeps the maximum), in fixed point.
    auto mass = [k_cut](float z) -> unsigned long long { return z >= k_cut ? top_p_mass(z) : 0ull; };
    if (threadIdx.x == 0) scratch = 0;
    __syncthreads();
    unsigned long long mine = 0;
    if (cached && top_k) {  // the keys are there: z is key_value(key) (-0 read as +0: the same mass)
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mine += mass_of[j] = mass(key_value(key_of[j]));
    } else {
      for_each_z(row, begin, end, m, p.temperature, [&](int64_t j, float z) {
        const unsigned long long w = mass(z);
        mine += w;
        if (cached) key_of[j] = ordered_key(z), mass_of[j] = w;
      });
    }
    add_block_sum(mine, cluster_map(&fs.total, 0), &scratch);
    cluster_barrier();
    const double target = static_cast<double>(p.top_p) * static_cast<double>(cluster_load_u64(cluster_map(&fs.total, 0)));
    const uint32_t key = cached ? radix_select(from_cache([&](int64_t j, uint32_t) { return mass_of[j]; }), target, fs,
                                               kFilterLevels, &choice)
                                : radix_select(from_row(mass), target, fs, kFilterLevels, &choice);
    p_cut = key_value(key);
  }
  if (rank == 0 && threadIdx.x == 0) cut[r] = top_p ? p_cut : k_cut;
  cluster_barrier();  // no CTA leaves while another may still read its shared memory
}

// CTAs per row: a cluster of 8 while the batch is small (a row's passes spread over 8 SMs; each
// CTA's share of a 129,280-id row, 16,160 ids, fits the cache), one CTA per row once the rows
// alone fill the GPU (uncached).
inline int sample_filter_cluster(int64_t rows, int sms) { return rows * 8 <= 2 * static_cast<int64_t>(sms) ? 8 : 1; }

}  // namespace deepinfer::kernels
