// Launch functions of the GEMM kernels (tensor-core dequant GEMM with optional split-K reduce,
// plain F32 GEMM), in dense, grouped and expert modes.
#include "kernels/common/act_dispatch.cuh"
#include "kernels/gemm/dequant_gemm.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {

cudaError_t launch_dequant_gemm(const GemmParams& p, cudaStream_t s) {
  const bool experts = p.experts != nullptr;
  const int64_t rows = experts ? p.max_rows_per_expert : p.M;
  const int bm = rows <= 16 ? 16 : 64;
  const int m_tiles = static_cast<int>((rows + bm - 1) / bm);
  const int n_outer = experts ? p.n_experts : p.n_groups;
  const dim3 grid(static_cast<unsigned>((p.N + kGemmBN - 1) / kGemmBN), static_cast<unsigned>(m_tiles * n_outer),
                  static_cast<unsigned>(p.splits));
  if (grid.x == 0 || grid.y == 0) return cudaSuccess;
  if (bm == 16) {
    dequant_gemm_kernel<16><<<grid, 128, 0, s>>>(p, m_tiles);
  } else {
    dequant_gemm_kernel<64><<<grid, 128, 0, s>>>(p, m_tiles);
  }
  if (p.splits > 1) {
    gemm_reduce_kernel<<<grid_for(p.M * p.ldc), 256, 0, s>>>(p.partial, p.splits, p.M, p.ldc, p.C, p.c_bf16);
  }
  return cudaGetLastError();
}

cudaError_t launch_f32_gemm(const GemmParams& p, cudaStream_t s) {
  if (p.experts != nullptr) {
    const dim3 grid(static_cast<unsigned>((p.N + 127) / 128), static_cast<unsigned>(p.max_rows_per_expert),
                    static_cast<unsigned>(p.n_experts));
    if (grid.y == 0) return cudaSuccess;
    f32_expert_gemm_kernel<<<grid, 128, 0, s>>>(static_cast<const float*>(p.A), p.lda, p.experts, p.offsets, p.perm,
                                                p.a_div, p.N, p.K, static_cast<float*>(p.C), p.ldc);
  } else {
    const dim3 grid(static_cast<unsigned>((p.N + 127) / 128), static_cast<unsigned>(p.M), static_cast<unsigned>(p.n_groups));
    if (grid.y == 0) return cudaSuccess;
    f32_gemm_kernel<<<grid, 128, 0, s>>>(static_cast<const float*>(p.A), p.lda, p.w, p.M, p.N, p.K, p.n_groups,
                                         static_cast<float*>(p.C), p.ldc);
  }
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
