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
//      (DeepSeek-V3's report: ~14 bits kept in a chain; the official GEMM promotes every block);
//   2b. that the register-A m64n8k32 form and the shared-memory m64n128k32 form give the same F32
//      bits per element (decode and prefill kernels in one order: batch invariance);
//   3. the FP4 route's data path: E2M1 weight codes in a proposed device layout (per 32-bit word
//      of 8 codes, codes 0-3 at the E4M3 bits s 7, e1 4, e0 3, m 2 of bytes 0-3 and codes 4-7 at
//      bits 5, 6, 1, 0, so that lo = w & 0x9C9C9C9C and hi = ((w << 2) & 0x8C8C8C8C) |
//      ((w >> 2) & 0x10101010) are each four E4M3 codes of value x 2^-6, subnormal 0.5 included)
//      decoded in registers into wgmma's A, one k32 step per scale block (32 codes of a row), each
//      step's partial scaled by 2^6 x the row's UE8M0 scale into the F32 total — against the exact
//      sum of the dequantised products.
// Build here: nvcc -std=c++20 -O2 -gencode arch=compute_90a,code=sm_90a -I src -o wgmma_fp8_probe \
//   tools/device/probes/wgmma_fp8_probe.cu
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

// ---- 2b. Batch invariance across the two forms a GEMM kernel would use ----
// Decode: m64n8k32 with A from registers; prefill: m64n128k32 with A and B from shared memory.
// The same 8 B rows placed at columns n0 .. n0 + 7 of a 128-row B (the others random), the same
// 128-input block promotion: the F32 bits must equal the decode form's (`blocks` above), else the
// FP8 order cannot serve small and large M alike.
constexpr int NW = 128;

__device__ inline void wgmma_fp8_ss128(float (&d)[64], uint64_t adesc, uint64_t bdesc, bool accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " DI_WGMMA_D64_REGS ", %64, %65, p, 1, 1;\n}\n"
               : DI_WGMMA_D64_OPERANDS(d)
               : "l"(adesc), "l"(bdesc), "r"(static_cast<int>(accumulate)));
}

// Bw: [cta][NW][K] E4M3 (rows n0 .. n0 + 7 are B's rows). outw: [cta][M][NW].
__global__ void __launch_bounds__(128) probe_wide(const uint8_t* A, const uint8_t* Bw, float* outw) {
  extern __shared__ __align__(128) uint8_t sm[];
  uint8_t* sA = sm;               // [kSteps][64 x 32] core-matrix layout
  uint8_t* sB = sm + M * K;       // [kSteps][128 x 32]
  const int cta = blockIdx.x;
  A += static_cast<size_t>(cta) * M * K;
  Bw += static_cast<size_t>(cta) * NW * K;
  for (int i = threadIdx.x; i < M * K; i += 128) {
    const int m = i / K, k = i % K, s = k / 32, kk = k % 32;
    sA[s * M * 32 + (m / 8) * 256 + (kk / 16) * 128 + (m % 8) * 16 + kk % 16] = A[i];
  }
  for (int i = threadIdx.x; i < NW * K; i += 128) {
    const int n = i / K, k = i % K, s = k / 32, kk = k % 32;
    sB[s * NW * 32 + (n / 8) * 256 + (kk / 16) * 128 + (n % 8) * 16 + kk % 16] = Bw[i];
  }
  fence_proxy_async();
  __syncthreads();
  float total[64];
  for (int e = 0; e < 64; ++e) total[e] = 0;
  for (int b = 0; b < kSteps / 4; ++b) {
    float part[64];
    for (int e = 0; e < 64; ++e) part[e] = 0;
    wgmma_fence();
    for (int s = 4 * b; s < 4 * b + 4; ++s)
      wgmma_fp8_ss128(part, wgmma_desc(sA + s * M * 32, 128, 256), wgmma_desc(sB + s * NW * 32, 128, 256), s > 4 * b);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(part);
    for (int e = 0; e < 64; ++e) total[e] += part[e];
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  float* o = outw + static_cast<size_t>(cta) * M * NW;
  for (int j = 0; j < 16; ++j)
    for (int e = 0; e < 4; ++e) o[(16 * warp + g + (e >= 2 ? 8 : 0)) * NW + 8 * j + 2 * c + (e & 1)] = total[4 * j + e];
}

// Runs probe_wide on the data `probe` just used; compares against its `blocks` output (h, per =
// the size of one of its three outputs). Returns the number of differing F32 words.
long run_wide(int ctas, const uint8_t* A, const std::vector<uint8_t>& hb, const std::vector<float>& h, size_t per) {
  std::vector<uint8_t> hw(static_cast<size_t>(ctas) * NW * K);
  std::vector<int> n0s(ctas);
  for (int cta = 0; cta < ctas; ++cta) {
    n0s[cta] = 8 * (cta % (NW / 8));
    for (int n = 0; n < NW; ++n)
      for (int k = 0; k < K; ++k) {
        const size_t i = (static_cast<size_t>(cta) * NW + n) * K + k;
        hw[i] = (n >= n0s[cta] && n < n0s[cta] + 8) ? hb[(static_cast<size_t>(cta) * N + n - n0s[cta]) * K + k]
                                                   : draw_e4m3(11 + cta, static_cast<uint32_t>(n * K + k), 3);
      }
  }
  uint8_t* Bw;
  float* outw;
  cudaMalloc(&Bw, hw.size());
  cudaMalloc(&outw, sizeof(float) * ctas * M * NW);
  cudaMemcpy(Bw, hw.data(), hw.size(), cudaMemcpyHostToDevice);
  const int smem = M * K + NW * K;
  cudaFuncSetAttribute(probe_wide, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  probe_wide<<<ctas, 128, smem>>>(A, Bw, outw);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    printf("CUDA error (wide): %s\n", cudaGetErrorString(cudaGetLastError()));
    return -1;
  }
  std::vector<float> w(static_cast<size_t>(ctas) * M * NW);
  cudaMemcpy(w.data(), outw, w.size() * 4, cudaMemcpyDeviceToHost);
  long diff = 0;
  for (int cta = 0; cta < ctas; ++cta)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        const float a = h[per + (static_cast<size_t>(cta) * M + m) * N + n];
        const float b = w[(static_cast<size_t>(cta) * M + m) * NW + n0s[cta] + n];
        diff += memcmp(&a, &b, 4) != 0;
      }
  cudaFree(Bw);
  cudaFree(outw);
  return diff;
}

// ---- 3. FP4 (E2M1) weights decoded into E4M3 A fragments ----

constexpr int K4 = 512, kSteps4 = K4 / 32;

// A checkpoint word (8 E2M1 codes, code i in nibble i: bit 0 m, 1 e0, 2 e1, 3 sign) in the
// proposed device layout (above).
__host__ __device__ inline uint32_t fp4_e4m3_word(uint32_t w) {
  uint32_t d = 0;
  for (int i = 0; i < 8; ++i) {
    const uint32_t code = (w >> (4 * i)) & 15u, m = code & 1u, e0 = (code >> 1) & 1u, e1 = (code >> 2) & 1u,
                   sg = code >> 3;
    const int b = 8 * (i & 3);
    if (i < 4) {
      d |= (m << (b + 2)) | (e0 << (b + 3)) | (e1 << (b + 4)) | (sg << (b + 7));
    } else {
      d |= (m << (b + 0)) | (e0 << (b + 1)) | (e1 << (b + 6)) | (sg << (b + 5));
    }
  }
  return d;
}
inline double e2m1_value(uint32_t code) {
  const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8) ? -mag[code & 7] : mag[code & 7];
}

// A4: [M][K4 / 8] device-layout words; S4: [M][K4 / 32] UE8M0 codes; B4: [N][K4] E4M3 (physical
// k order). out4[cta][M][N].
__global__ void __launch_bounds__(128) probe_fp4(const uint32_t* A4, const uint8_t* S4, const uint8_t* B4, float* out4) {
  __shared__ __align__(128) uint8_t sB[N * K4];
  const int cta = blockIdx.x;
  A4 += cta * M * (K4 / 8);
  S4 += cta * M * (K4 / 32);
  B4 += cta * N * K4;
  // B staged at logical k (within a step) from physical k: lane c's word holds physical codes
  // 8c .. 8c + 7 of the block, which the A fragment uses as logical 4c .. 4c + 3 (lo) and
  // 16 + 4c .. (hi): B takes the same map.
  for (int i = threadIdx.x; i < N * K4; i += 128) {
    const int n = i / K4, k = i % K4, s = k / 32, kk = k % 32;
    const int phys = kk < 16 ? 8 * (kk / 4) + kk % 4 : 8 * ((kk - 16) / 4) + 4 + kk % 4;
    sB[s * N * 32 + (n / 8) * 256 + (kk / 16) * 128 + (n % 8) * 16 + kk % 16] = B4[n * K4 + 32 * s + phys];
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int r0 = 16 * warp + g, r1 = r0 + 8;
  float total[4] = {0, 0, 0, 0};
  for (int s = 0; s < kSteps4; ++s) {
    const uint32_t w0 = A4[r0 * (K4 / 8) + 4 * s + c], w1 = A4[r1 * (K4 / 8) + 4 * s + c];
    const uint32_t a[4] = {w0 & 0x9C9C9C9Cu, w1 & 0x9C9C9C9Cu, ((w0 << 2) & 0x8C8C8C8Cu) | ((w0 >> 2) & 0x10101010u),
                           ((w1 << 2) & 0x8C8C8C8Cu) | ((w1 >> 2) & 0x10101010u)};
    float part[4] = {0, 0, 0, 0};
    wgmma_fence();
    wgmma_fp8_rs(part, a, wgmma_desc(sB + s * N * 32, 128, 256), false);
    wgmma_commit();
    wgmma_wait<0>();
    // 2^6 x the rows' scales (2^(code - 127)), exact powers of two.
    const float s0 = ldexpf(64.0f, static_cast<int>(S4[r0 * (K4 / 32) + s]) - 127);
    const float s1 = ldexpf(64.0f, static_cast<int>(S4[r1 * (K4 / 32) + s]) - 127);
    total[0] = fmaf(part[0], s0, total[0]);
    total[1] = fmaf(part[1], s0, total[1]);
    total[2] = fmaf(part[2], s1, total[2]);
    total[3] = fmaf(part[3], s1, total[3]);
  }
  float* o = out4 + static_cast<size_t>(cta) * M * N;
  for (int e = 0; e < 4; ++e) o[(16 * warp + g + (e >= 2 ? 8 : 0)) * N + 2 * c + (e & 1)] = total[e];
}

bool run_fp4(int ctas) {
  std::vector<uint32_t> ha(static_cast<size_t>(ctas) * M * (K4 / 8)), hd(ha.size());
  std::vector<uint8_t> hs(static_cast<size_t>(ctas) * M * (K4 / 32)), hb(static_cast<size_t>(ctas) * N * K4);
  for (size_t i = 0; i < ha.size(); ++i) {
    ha[i] = hash32(static_cast<uint32_t>(i) * 2654435761u + 99u);
    hd[i] = fp4_e4m3_word(ha[i]);
  }
  for (size_t i = 0; i < hs.size(); ++i) hs[i] = static_cast<uint8_t>(120 + hash32(static_cast<uint32_t>(i) + 7u) % 15);
  for (size_t i = 0; i < hb.size(); ++i) hb[i] = draw_e4m3(5, static_cast<uint32_t>(i), 3);
  uint32_t* A4;
  uint8_t *S4, *B4;
  float* out4;
  cudaMalloc(&A4, hd.size() * 4);
  cudaMalloc(&S4, hs.size());
  cudaMalloc(&B4, hb.size());
  cudaMalloc(&out4, sizeof(float) * ctas * M * N);
  cudaMemcpy(A4, hd.data(), hd.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(S4, hs.data(), hs.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(B4, hb.data(), hb.size(), cudaMemcpyHostToDevice);
  probe_fp4<<<ctas, 128>>>(A4, S4, B4, out4);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    printf("CUDA error (FP4): %s\n", cudaGetErrorString(cudaGetLastError()));
    return false;
  }
  std::vector<float> h(static_cast<size_t>(ctas) * M * N);
  cudaMemcpy(h.data(), out4, h.size() * 4, cudaMemcpyDeviceToHost);
  double worst = 0;
  for (int cta = 0; cta < ctas; ++cta)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double ref = 0, mag = 0;
        for (int k = 0; k < K4; ++k) {
          const size_t row = static_cast<size_t>(cta) * M + m;
          const uint32_t code = (ha[row * (K4 / 8) + k / 8] >> (4 * (k % 8))) & 15u;
          const double wv = e2m1_value(code) * std::ldexp(1.0, static_cast<int>(hs[row * (K4 / 32) + k / 32]) - 127);
          const double p = wv * e4m3_value(hb[(static_cast<size_t>(cta) * N + n) * K4 + k]);
          ref += p;
          mag += std::fabs(p);
        }
        const double err = mag > 0 ? std::fabs(h[(static_cast<size_t>(cta) * M + m) * N + n] - ref) / mag : 0;
        worst = std::fmax(worst, err);
      }
  printf("FP4 -> E4M3 in registers, a scale block per k32 step: worst error / sum|products| %.3g\n", worst);
  return worst < 1e-3;
}

int main() {
  const int ctas = 32;
  uint8_t *A, *B;
  float* out;
  cudaMalloc(&A, static_cast<size_t>(ctas) * M * K);
  cudaMalloc(&B, static_cast<size_t>(ctas) * N * K);
  cudaMalloc(&out, sizeof(float) * 3 * ctas * M * N);
  bool layout_ok = true, invariant = true;
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
    const long diff = run_wide(ctas, A, hb, h, per);
    printf("spread %d: m64n128k32 (A, B from shared memory) vs m64n8k32 (A from registers), 128-block promotion: "
           "%ld of %zu F32 results differ in bits\n", spread, diff, per);
    invariant = invariant && diff == 0;
  }
  printf(invariant ? "WGMMA_FP8_PROBE: FORMS BITWISE EQUAL\n" : "WGMMA_FP8_PROBE: FORMS DIFFER\n");
  printf(layout_ok ? "WGMMA_FP8_PROBE: LAYOUT OK\n" : "WGMMA_FP8_PROBE: LAYOUT WRONG\n");
  const bool fp4_ok = run_fp4(ctas);
  printf(fp4_ok ? "WGMMA_FP8_PROBE: FP4 PATH OK\n" : "WGMMA_FP8_PROBE: FP4 PATH WRONG\n");
  return layout_ok && invariant && fp4_ok ? 0 : 1;
}
