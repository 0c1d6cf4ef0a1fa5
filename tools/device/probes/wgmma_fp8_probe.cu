// Probe (device only, not part of the build): the FP8 route's first questions (docs/cuda.md "The
// FP8-operand route"). Hopper's FP8 tensor cores are reached only through wgmma (mma.sync with
// E4M3 operands compiles to E4M3->F16 conversions and F16 HMMA, session 44), so a decode kernel
// with FP8 operands would run wgmma.m64n8k32 with the weights as A from registers and the staged
// activations as B from shared memory. This probe checks, on one warpgroup per CTA:
//   1. the register layout of A assumed for E4M3 (per warp, mma.m16n8k32's: lane 4g + c holds
//      rows g / g + 8 at k 4c .. 4c + 3 (a0 / a1) and 16 + 4c .. (a2 / a3)) and B's K-major core
//      matrices (8 rows x 16 bytes, LBO 128, SBO 256) — a wrong layout shows as errors of the
//      size of the products;
//   2. how the tensor core accumulates E4M3 products: a whole-K chain in one accumulator, chains
//      of 4 steps (one 128-input block) each from zero added into an F32 total, and every step
//      from zero — each against an exact (double) sum, relative to the sum of |products|
//      (DeepSeek-V3's report: ~14 bits kept in a chain; the official GEMM promotes every block).
// Build here: nvcc -std=c++20 -O2 -gencode arch=compute_90a,code=sm_90a -I src -o wgmma_fp8_probe \
//   tools/device/probes/wgmma_fp8_probe.cu
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/common/wgmma_utils.cuh"  // descriptor and wgmma sync primitives

using namespace deepinfer::kernels;

constexpr int M = 64, N = 8, K = 1024, kSteps = K / 32;

__device__ __host__ inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
  return x;
}
// A finite E4M3 code (no NaN), exponents spread over `spread` binades around 1.
__device__ __host__ inline uint8_t draw_e4m3(uint32_t seed, uint32_t i, int spread) {
  const uint32_t h = hash32(seed * 0x9e3779b9u + i * 0x85ebca6bu + 777u);
  const int e = 7 + static_cast<int>((h >> 8) % (2 * spread + 1)) - spread;  // biased exponent 1..14
  return static_cast<uint8_t>(((h >> 31) << 7) | (e << 3) | (h & 7));
}
inline double e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (b & 0x80) ? -v : v;
}

__global__ void fill(uint8_t* A, uint8_t* B, int spread) {
  for (int i = threadIdx.x; i < M * K; i += blockDim.x) A[blockIdx.x * M * K + i] = draw_e4m3(2 * blockIdx.x + 1, i, spread);
  for (int i = threadIdx.x; i < N * K; i += blockDim.x) B[blockIdx.x * N * K + i] = draw_e4m3(2 * blockIdx.x + 2, i, spread);
}

// D += A B^T for one k32 step: A [64][32] E4M3 from registers, B [8][32] from shared memory.
__device__ inline void wgmma_fp8_rs(float (&d)[4], const uint32_t (&a)[4], uint64_t bdesc, bool accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(bdesc), "r"(static_cast<int>(accumulate)));
}

// out[3][cta][M][N]: one chain over K; chains of 4 steps added in F32; every step added in F32.
__global__ void __launch_bounds__(128) probe(const uint8_t* A, const uint8_t* B, float* out) {
  __shared__ __align__(128) uint8_t sB[N * K];  // per step: core matrices (8 rows x 16 bytes), K-major
  const int cta = blockIdx.x;
  A += cta * M * K;
  B += cta * N * K;
  for (int i = threadIdx.x; i < N * K; i += 128) {
    const int n = i / K, k = i % K, s = k / 32, kk = k % 32;
    sB[s * N * 32 + (n / 8) * 256 + (kk / 16) * 128 + (n % 8) * 16 + kk % 16] = B[i];
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  auto a_frag = [&](int s, uint32_t (&a)[4]) {
    auto word = [&](int r, int k) { return *reinterpret_cast<const uint32_t*>(A + r * K + k); };
    const int r = 16 * warp + g, k = 32 * s + 4 * c;
    a[0] = word(r, k), a[1] = word(r + 8, k), a[2] = word(r, k + 16), a[3] = word(r + 8, k + 16);
  };
  auto store = [&](int which, const float (&d)[4]) {
    float* o = out + (static_cast<size_t>(which) * gridDim.x + cta) * M * N;
    for (int e = 0; e < 4; ++e) o[(16 * warp + g + (e >= 2 ? 8 : 0)) * N + 2 * c + (e & 1)] = d[e];
  };
  auto step = [&](float (&d)[4], int s, bool accumulate) {
    uint32_t a[4];
    a_frag(s, a);
    wgmma_fence();
    wgmma_fp8_rs(d, a, wgmma_desc(sB + s * N * 32, 128, 256), accumulate);
    wgmma_commit();
    wgmma_wait<0>();
  };
  float chain[4] = {0, 0, 0, 0}, blocks[4] = {0, 0, 0, 0}, steps[4] = {0, 0, 0, 0};
  for (int s = 0; s < kSteps; ++s) step(chain, s, s > 0);
  for (int b = 0; b < kSteps / 4; ++b) {
    float part[4] = {0, 0, 0, 0};
    for (int s = 4 * b; s < 4 * b + 4; ++s) step(part, s, s > 4 * b);
    for (int e = 0; e < 4; ++e) blocks[e] += part[e];
  }
  for (int s = 0; s < kSteps; ++s) {
    float part[4] = {0, 0, 0, 0};
    step(part, s, false);
    for (int e = 0; e < 4; ++e) steps[e] += part[e];
  }
  store(0, chain);
  store(1, blocks);
  store(2, steps);
}

int main() {
  const int ctas = 32;
  uint8_t *A, *B;
  float* out;
  cudaMalloc(&A, static_cast<size_t>(ctas) * M * K);
  cudaMalloc(&B, static_cast<size_t>(ctas) * N * K);
  cudaMalloc(&out, sizeof(float) * 3 * ctas * M * N);
  bool layout_ok = true;
  for (int spread : {0, 3, 6}) {
    fill<<<ctas, 256>>>(A, B, spread);
    probe<<<ctas, 128>>>(A, B, out);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      printf("CUDA error: %s\n", cudaGetErrorString(cudaGetLastError()));
      return 2;
    }
    std::vector<float> h(3ull * ctas * M * N);
    std::vector<uint8_t> ha(static_cast<size_t>(ctas) * M * K), hb(static_cast<size_t>(ctas) * N * K);
    cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(ha.data(), A, ha.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(hb.data(), B, hb.size(), cudaMemcpyDeviceToHost);
    const size_t per = static_cast<size_t>(ctas) * M * N;
    double worst[3] = {0, 0, 0}, mean[3] = {0, 0, 0};
    for (int cta = 0; cta < ctas; ++cta)
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          double ref = 0, mag = 0;
          for (int k = 0; k < K; ++k) {
            const double p = e4m3_value(ha[(static_cast<size_t>(cta) * M + m) * K + k]) *
                             e4m3_value(hb[(static_cast<size_t>(cta) * N + n) * K + k]);
            ref += p;
            mag += std::fabs(p);
          }
          const size_t i = (static_cast<size_t>(cta) * M + m) * N + n;
          for (int w = 0; w < 3; ++w) {
            const double err = std::fabs(h[w * per + i] - ref) / mag;
            worst[w] = std::fmax(worst[w], err);
            mean[w] += err / per;
          }
        }
    printf("spread %d: error / sum|products|, worst (mean): whole-K chain %.3g (%.3g), 128-blocks %.3g (%.3g), "
           "every step %.3g (%.3g)\n",
           spread, worst[0], mean[0], worst[1], mean[1], worst[2], mean[2]);
    layout_ok = layout_ok && worst[2] < 1e-3;
  }
  printf(layout_ok ? "WGMMA_FP8_PROBE: LAYOUT OK\n" : "WGMMA_FP8_PROBE: LAYOUT WRONG\n");
  return layout_ok ? 0 : 1;
}
