// The K split of the canonical GEMM summation order (gemm_common.cuh): a function of K alone,
// shared by the kernels and by the host-side launch plans (plain C++: tested on the CPU).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DI_HOST_DEVICE __host__ __device__
#else
#define DI_HOST_DEVICE
#endif

namespace deepinfer::kernels {

inline constexpr int kGemmBK = 128;

// Sub-range length: K is cut into P = min(8, ceil(K / 512)) sub-ranges of R elements, R a multiple
// of kGemmBK.
DI_HOST_DEVICE inline int64_t gemm_subrange(int64_t K) {
  int64_t P = (K + 511) / 512;
  P = P < 1 ? 1 : (P > 8 ? 8 : P);
  const int64_t per = (K + P - 1) / P;
  return (per + kGemmBK - 1) / kGemmBK * kGemmBK;
}
DI_HOST_DEVICE inline int gemm_n_subranges(int64_t K) {
  const int64_t R = gemm_subrange(K);
  return static_cast<int>((K + R - 1) / R);
}

}  // namespace deepinfer::kernels
