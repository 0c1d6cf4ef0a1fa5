// Probe (device only, not part of the build): does a chain of Hopper wgmma.m64nNk16 BF16 steps
// accumulate bit for bit like the same chain of mma.sync.m16n8k16 steps? The CUDA backend's
// batch invariance rests on every GEMM kernel doing the same F32 operations in the same order;
// a wgmma large-M kernel may join the mma.sync small-M kernel only if the tensor core rounds the
// same way in both. Each CTA (one warpgroup) draws its own A [64][K], B [64][K] (BF16 with a wide
// exponent spread, so alignment and truncation inside a step matter), then computes C = A B^T
// three ways: mma.sync k16 chain, wgmma with A in registers, wgmma with A in shared memory (no
// swizzle, K-major core matrices). Prints mismatching elements and the worst error against an
// F64 reference (a layout bug shows as a large error, a rounding difference as bit mismatches).
//
// Build here: nvcc -std=c++20 -O2 -gencode arch=compute_90a,code=sm_90a -I src -o wgmma_probe \
//   tools/device/probes/wgmma_probe.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/common/wgmma_utils.cuh"  // mma.sync, descriptor and wgmma sync primitives

using namespace deepinfer::kernels;

constexpr int M = 64, N = 64, K = 512;

__device__ __host__ inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
  return x;
}
__device__ __host__ inline float draw(uint32_t seed, uint32_t i, int spread) {
  const uint32_t h = hash32(seed * 0x9e3779b9u + i * 0x85ebca6bu + 12345u);
  const float mant = 1.0f + (h & 0xffff) / 65536.0f;
  const int e = static_cast<int>((h >> 16) % (2 * spread + 1)) - spread;
  return ((h >> 31) ? -1.0f : 1.0f) * ldexpf(mant, e);
}

__global__ void fill(__nv_bfloat16* A, __nv_bfloat16* B, int spread) {
  const int cta = blockIdx.x;
  for (int i = threadIdx.x; i < M * K; i += blockDim.x) {
    A[cta * M * K + i] = __float2bfloat16_rn(draw(2 * cta + 1, i, spread));
    B[cta * N * K + i] = __float2bfloat16_rn(draw(2 * cta + 2, i, spread));
  }
}

// Core-matrix (8 rows x 16 bytes) K-major layout without swizzle: LBO = 128 (next 8 k),
// SBO = 256 (next 8 rows) within one k16 step; steps are rows*32 bytes apart.
__device__ inline int core_off(int row, int k, int rows) {
  const int step = k / 16, kk = k % 16;
  return step * rows * 32 + (row / 8) * 256 + (kk / 8) * 128 + (row % 8) * 16 + (kk % 8) * 2;
}

#define D32(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),        \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),      \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define DREGS "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"

__device__ inline void wgmma_rs(float* d, const uint32_t* a, uint64_t bdesc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " DREGS
               ", {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
               : D32(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(bdesc));
}
__device__ inline void wgmma_ss(float* d, uint64_t adesc, uint64_t bdesc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " DREGS
               ", %32, %33, p, 1, 1, 0, 0;\n}\n"
               : D32(d)
               : "l"(adesc), "l"(bdesc));
}

// out[3][cta][M][N]: mma.sync, wgmma A-regs, wgmma A-smem.
__global__ void __launch_bounds__(128) probe(const __nv_bfloat16* A, const __nv_bfloat16* B, float* out, float c0) {
  extern __shared__ __align__(128) uint8_t smem[];
  __nv_bfloat16* sA = reinterpret_cast<__nv_bfloat16*>(smem);                 // core layout
  __nv_bfloat16* sB = reinterpret_cast<__nv_bfloat16*>(smem + M * K * 2);     // core layout
  const int cta = blockIdx.x;
  A += cta * M * K;
  B += cta * N * K;
  for (int i = threadIdx.x; i < M * K; i += 128) {
    sA[core_off(i / K, i % K, M) / 2] = A[i];
    sB[core_off(i / K, i % K, N) / 2] = B[i];
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  auto a_frag = [&](int s, uint32_t* a) {  // rows 16 warp + g (+8), k 16 s + 2c (+1) (+8)
    auto pair = [&](int r, int k) {
      const __nv_bfloat16 lo = A[r * K + k], hi = A[r * K + k + 1];
      return static_cast<uint32_t>(__bfloat16_as_ushort(lo)) | (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
    };
    const int r = 16 * warp + g, k = 16 * s + 2 * c;
    a[0] = pair(r, k); a[1] = pair(r + 8, k); a[2] = pair(r, k + 8); a[3] = pair(r + 8, k + 8);
  };
  // D layout (both instructions): n8 tile j, rows g / g + 8 of the warp's 16, columns 2c, 2c + 1.
  auto store = [&](int which, const float* d) {
    float* o = out + (static_cast<size_t>(which) * gridDim.x + cta) * M * N;
    for (int j = 0; j < N / 8; ++j)
      for (int e = 0; e < 4; ++e)
        o[(16 * warp + g + (e >= 2 ? 8 : 0)) * N + 8 * j + 2 * c + (e & 1)] = d[4 * j + e];
  };
  // 1. mma.sync chain.
  {
    float d[32];
    for (int i = 0; i < 32; ++i) d[i] = c0;
    for (int s = 0; s < K / 16; ++s) {
      uint32_t a[4];
      a_frag(s, a);
      for (int j = 0; j < N / 8; ++j) {
        auto pair = [&](int n, int k) {
          return static_cast<uint32_t>(__bfloat16_as_ushort(B[n * K + k])) |
                 (static_cast<uint32_t>(__bfloat16_as_ushort(B[n * K + k + 1])) << 16);
        };
        const uint32_t b[2] = {pair(8 * j + g, 16 * s + 2 * c), pair(8 * j + g, 16 * s + 2 * c + 8)};
        mma_bf16_16816(&d[4 * j], a, b);
      }
    }
    store(0, d);
  }
  // 2. wgmma, A from registers.
  {
    float d[32];
    for (int i = 0; i < 32; ++i) d[i] = c0;
    for (int s = 0; s < K / 16; ++s) {
      uint32_t a[4];
      a_frag(s, a);
      wgmma_fence();
      wgmma_rs(d, a, wgmma_desc(smem + M * K * 2 + s * N * 32, 128, 256));
      wgmma_commit();
      wgmma_wait<0>();
    }
    store(1, d);
  }
  // 3. wgmma, A and B from shared memory.
  {
    float d[32];
    for (int i = 0; i < 32; ++i) d[i] = c0;
    for (int s = 0; s < K / 16; ++s) {
      wgmma_fence();
      wgmma_ss(d, wgmma_desc(smem + s * M * 32, 128, 256), wgmma_desc(smem + M * K * 2 + s * N * 32, 128, 256));
      wgmma_commit();
      wgmma_wait<0>();
    }
    store(2, d);
  }
}

int main() {
  const int ctas = 64;
  __nv_bfloat16 *A, *B;
  float* out;
  cudaMalloc(&A, sizeof(__nv_bfloat16) * ctas * M * K);
  cudaMalloc(&B, sizeof(__nv_bfloat16) * ctas * N * K);
  cudaMalloc(&out, sizeof(float) * 3 * ctas * M * N);
  const int smem = (M + N) * K * 2;
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  int failures = 0;
  for (int spread : {0, 6, 20}) {
    for (float c0 : {0.0f, 0.3f}) {
      fill<<<ctas, 256>>>(A, B, spread);
      probe<<<ctas, 128, smem>>>(A, B, out, c0);
      if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("CUDA error: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 2;
      }
      std::vector<float> h(3ull * ctas * M * N);
      std::vector<__nv_bfloat16> ha(ctas * M * K), hb(ctas * N * K);
      cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(ha.data(), A, ha.size() * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(hb.data(), B, hb.size() * 2, cudaMemcpyDeviceToHost);
      const size_t per = static_cast<size_t>(ctas) * M * N;
      size_t mis[3] = {0, 0, 0};
      double worst[3] = {0, 0, 0};
      for (int cta = 0; cta < ctas; ++cta)
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) {
            double ref = c0, mag = std::fabs(c0);
            for (int k = 0; k < K; ++k) {
              const double p = static_cast<double>(__bfloat162float(ha[(cta * M + m) * K + k])) *
                               __bfloat162float(hb[(cta * N + n) * K + k]);
              ref += p;
              mag += std::fabs(p);
            }
            const size_t i = (static_cast<size_t>(cta) * M + m) * N + n;
            for (int w = 0; w < 3; ++w) {
              const float v = h[w * per + i];
              worst[w] = std::fmax(worst[w], std::fabs(v - ref) / mag);
              if (w > 0 && std::memcmp(&v, &h[i], 4) != 0) ++mis[w];
            }
          }
      printf("spread %2d c0 %.1f: rel err (vs |products|) mma %.3g wgmma-rs %.3g wgmma-ss %.3g; "
             "bit mismatches vs mma.sync: rs %zu ss %zu of %zu\n",
             spread, c0, worst[0], worst[1], worst[2], mis[1], mis[2], per);
      if (mis[1] || mis[2] || worst[1] > 1e-3 || worst[2] > 1e-3) ++failures;
    }
  }
  printf(failures ? "WGMMA_PROBE: DIFFERENT\n" : "WGMMA_PROBE: BITWISE EQUAL\n");
  return failures ? 1 : 0;
}
