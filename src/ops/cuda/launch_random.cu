// Random synthetic contents for device-generated benchmark weights and KV (counter-based hash, so
// contents are reproducible and independent of the launch shape).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "kernels/launch.h"

namespace deepinfer::kernels {
namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float normal(uint64_t seed, int64_t i) {
  const uint64_t a = mix64(seed ^ mix64(2 * i)), b = mix64(seed ^ mix64(2 * i + 1));
  const float u1 = (static_cast<float>(a >> 40) + 1.0f) * 5.9604645e-08f;  // (0, 1]
  const float u2 = static_cast<float>(b >> 40) * 5.9604645e-08f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

__global__ void fill_random_kernel(FillRandomParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  switch (p.kind) {
    case RandomKind::kF32Normal: static_cast<float*>(p.out)[i] = p.scale * normal(p.seed, i); break;
    case RandomKind::kBF16Normal:
      static_cast<__nv_bfloat16*>(p.out)[i] = __float2bfloat16_rn(p.scale * normal(p.seed, i));
      break;
    case RandomKind::kFp8Code: {
      __nv_fp8_e4m3 v(fminf(fmaxf(64.0f * normal(p.seed, i), -448.0f), 448.0f));
      static_cast<uint8_t*>(p.out)[i] = v.__x;
      break;
    }
    case RandomKind::kE8M0Const: static_cast<uint8_t*>(p.out)[i] = static_cast<uint8_t>(p.extra); break;
    case RandomKind::kFp4Byte: static_cast<uint8_t*>(p.out)[i] = static_cast<uint8_t>(mix64(p.seed ^ i) & 0xff); break;
    case RandomKind::kI64Experts: {
      const int64_t row = i / p.row_len, j = i % p.row_len;
      const int64_t base = static_cast<int64_t>(mix64(p.seed ^ row) % static_cast<uint64_t>(p.extra));
      static_cast<int64_t*>(p.out)[i] = (base + j) % p.extra;  // distinct within a row (row_len <= extra)
      break;
    }
  }
}

}  // namespace

cudaError_t launch_fill_random(const FillRandomParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  fill_random_kernel<<<static_cast<unsigned>((p.n + 255) / 256), 256, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
