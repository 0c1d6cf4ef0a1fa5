// Launch functions of the GEMM kernels: the tensor-core dequant GEMMs (streaming small-M kernel
// for <= 32 rows, tiled kernel above; bitwise equal, see gemm_common.cuh) and the plain F32 GEMM,
// in dense, grouped and expert modes.
#include <algorithm>

#include "kernels/common/act_dispatch.cuh"
#include "kernels/gemm/dequant_gemm.cuh"
#include "kernels/gemm/dequant_gemv.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {
namespace {

template <WeightFmt F>
cudaError_t launch_gemv(const GemmParams& p, int64_t rows, cudaStream_t s) {
  const int P = gemm_n_subranges(p.K);
  const int G = std::max(1, kGemvMaxWarps / P);  // column groups per CTA
  const int64_t col_tiles = (p.N + kGemvWarpCols * G - 1) / (kGemvWarpCols * G);
  const int64_t outer = p.experts != nullptr ? std::min<int64_t>(p.n_experts, p.max_active) : p.n_groups;
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(outer));
  if (grid.x == 0 || grid.y == 0) return cudaSuccess;
  if (rows <= 16) {
    dequant_gemv_kernel<F, 1><<<grid, 32 * P * G, 0, s>>>(p, P, G);
  } else {
    dequant_gemv_kernel<F, 2><<<grid, 32 * P * G, 0, s>>>(p, P, G);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_dequant_gemm(const GemmParams& p, cudaStream_t s) {
  const bool experts = p.experts != nullptr;
  const int64_t rows = experts ? p.max_rows_per_expert : p.M;
  // The streaming kernel applies one scale per 16-byte run: FP8 blocks must not split a run.
  const bool runs_ok = p.w.fmt != WeightFmt::kFp8Block || p.w.block_in % 16 == 0;
  if (rows <= kGemvMaxRows && runs_ok && (!experts || p.active != nullptr)) {
    switch (p.w.fmt) {
      case WeightFmt::kBF16: return launch_gemv<WeightFmt::kBF16>(p, rows, s);
      case WeightFmt::kFp8Block: return launch_gemv<WeightFmt::kFp8Block>(p, rows, s);
      case WeightFmt::kFp4Block: return launch_gemv<WeightFmt::kFp4Block>(p, rows, s);
    }
  }
  const int m_tiles = static_cast<int>((rows + kGemmBM - 1) / kGemmBM);
  const int n_outer = experts ? p.n_experts : p.n_groups;
  const dim3 grid(static_cast<unsigned>((p.N + kGemmBN - 1) / kGemmBN), static_cast<unsigned>(m_tiles * n_outer));
  if (grid.x == 0 || grid.y == 0) return cudaSuccess;
  dequant_gemm_kernel<<<grid, 128, 0, s>>>(p, m_tiles);
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
