// The prefill form of the mHC mixing pass (hc_mix_partial_kernel's partials for the V4 mix, N =
// 24 columns + the sum of squares, for >= 64 tokens). hc_mix_partial_kernel's 4-token blocks
// re-read their split's 96 KB slice of the mixing matrix from L2 for every 4 tokens and reduce
// each token's 25 columns through shared memory in turn (two barriers per token): in an 8K
// prefill a launch took 1.09 ms, ~10% of the FP32 peak. Here a block takes TB tokens of one split:
// each thread keeps the matrix values of its (at most 4) k in registers, loaded once per block,
// and the tokens go in groups of 4 whose 4 x 25 thread partials are reduced together (two
// barriers per group); the next group's inputs load while the current group is reduced.
// Every token's FMA chain (k = k0 + tid + 256 j in j order, from zero) and reduction (the warp's
// butterfly pairing from shared memory, then the warps in order) are hc_mix_partial_kernel's, so
// the partials are bit for bit the same (HyperConnectionsAreBitwiseBatchInvariant: decode-sized
// batches run the other kernel).
#pragma once

#include "kernels/norm/hc.cuh"

namespace deepinfer::kernels {

inline constexpr int kHcPrefillN = 24;       // the V4 mix: (2 + hc) hc columns, hc = 4
inline constexpr int kHcPrefillGroup = 4;    // tokens reduced together
inline constexpr int kHcPrefillKPerThread = 4;  // chunk <= 4 x 256
inline constexpr int kHcPrefillRows = kHcPrefillGroup * (kHcPrefillN + 1);
// Dynamic shared memory: lanes [rows][threads + 4] (the +4 keeps the float4 row reads
// conflict-free), then warp_sums [rows][warps].
inline constexpr size_t kHcPrefillSmem =
    sizeof(float) * kHcPrefillRows * ((kHcMixThreads + 4) + kHcMixWarps);

// Whether the prefill kernel covers a launch (N mix columns, T tokens, a split of `chunk`).
inline bool hc_mix_prefill_covers(int N, int64_t T, int64_t chunk) {
  return N == kHcPrefillN && T >= 64 && chunk <= kHcPrefillKPerThread * kHcMixThreads;
}

// grid (ceil(T / TB), n_split), kHcMixThreads threads, kHcPrefillSmem bytes.
template <typename T, int TB>
__global__ void __launch_bounds__(kHcMixThreads, 1)
    hc_mix_prefill_kernel(const T* x, const float* fn, float* partial, int64_t K, int64_t chunk, int64_t n_tokens) {
  static_assert(TB % kHcPrefillGroup == 0);
  constexpr int N = kHcPrefillN, C = N + 1, G = kHcPrefillGroup, KPT = kHcPrefillKPerThread;
  constexpr int ROWS = kHcPrefillRows, LD = kHcMixThreads + 4;
  pdl_prologue();
  extern __shared__ __align__(16) float hcp_smem[];
  float* lanes = hcp_smem;                 // [ROWS][LD]: row tt C + m = token tt's column m
  float* warp_sums = hcp_smem + ROWS * LD;  // [ROWS][kHcMixWarps]
  const int tid = threadIdx.x, split = blockIdx.y, n_split = gridDim.y;
  const int64_t k0 = split * chunk, k1 = min64(K, k0 + chunk);
  const int64_t tb0 = static_cast<int64_t>(blockIdx.x) * TB;
  // This thread's k = k0 + tid + 256 j (j < KPT; valid while below k1) and their matrix columns.
  bool kv[KPT];
  float f[KPT][N];
#pragma unroll
  for (int j = 0; j < KPT; ++j) {
    const int64_t k = k0 + tid + j * kHcMixThreads;
    kv[j] = k < k1;
#pragma unroll
    for (int m = 0; m < N; ++m) f[j][m] = kv[j] ? fn[m * K + k] : 0.0f;
  }
  // Group inputs: token t0 + tt at this thread's k (0 past the tokens or past k1: never used),
  // kept in the stream dtype until the FMAs use them — converting at the load made the thread
  // wait for the next group's loads before reducing this one (ncu: 47% of the stalls). Token
  // rows are K apart and the thread's k 256 apart: one pointer per token, constant offsets.
  T v[G][KPT];
  const T* xk = x + k0 + tid;
  auto load = [&](int64_t t0) {
    const int here = static_cast<int>(min64(G, n_tokens - t0));
    const T* row = xk + t0 * K;
#pragma unroll
    for (int tt = 0; tt < G; ++tt, row += K)
#pragma unroll
      for (int j = 0; j < KPT; ++j) v[tt][j] = tt < here && kv[j] ? row[j * kHcMixThreads] : from_f32<T>(0.0f);
  };
  // All KPT k of the thread inside the split (every split of the V4 mix: chunk 1,024 = 4 x 256):
  // then the chains run without the per-step bound check.
  const bool full = kv[KPT - 1];
  load(tb0);
  for (int g0 = 0; g0 < TB; g0 += G) {
    const int64_t t0 = tb0 + g0;
    if (t0 >= n_tokens) break;  // block-uniform
    float acc[G][C];
    // hc_mix_partial_kernel's step, k in order: the square, then the columns.
    auto step = [&](int j) {
#pragma unroll
      for (int tt = 0; tt < G; ++tt) {
        const float vt = to_f32(v[tt][j]);
        acc[tt][N] = __fmaf_rn(vt, vt, acc[tt][N]);
#pragma unroll
        for (int m = 0; m < N; ++m) acc[tt][m] = __fmaf_rn(vt, f[j][m], acc[tt][m]);
      }
    };
#pragma unroll
    for (int tt = 0; tt < G; ++tt)
#pragma unroll
      for (int m = 0; m < C; ++m) acc[tt][m] = 0.0f;
    if (full) {
#pragma unroll
      for (int j = 0; j < KPT; ++j) step(j);
    } else {
#pragma unroll
      for (int j = 0; j < KPT; ++j) {
        if (!kv[j]) break;  // kv is a prefix of j
        step(j);
      }
    }
    if (g0 + G < TB) load(t0 + G);  // in flight while this group is reduced
#pragma unroll
    for (int tt = 0; tt < G; ++tt)
#pragma unroll
      for (int m = 0; m < C; ++m) lanes[(tt * C + m) * LD + tid] = acc[tt][m];
    __syncthreads();
    for (int jw = tid; jw < ROWS * kHcMixWarps; jw += kHcMixThreads) {
      const int row = jw % ROWS, w = jw / ROWS;
      warp_sums[row * kHcMixWarps + w] = hc_warp_partial_sum(&lanes[row * LD + 32 * w]);
    }
    __syncthreads();
    if (tid < ROWS && t0 + tid / C < n_tokens) {
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kHcMixWarps; ++w) s += warp_sums[tid * kHcMixWarps + w];
      partial[((t0 + tid / C) * n_split + split) * C + tid % C] = s;
    }
    // The next group writes lanes only after this barrier pair, and warp_sums after its first.
  }
}

}  // namespace deepinfer::kernels
