// Launch functions of the GEMM kernels: the tensor-core dequant GEMMs (streaming small-M kernel
// for <= 32 rows per weight and for MoE experts up to 512 tokens, tiled kernel otherwise;
// bitwise equal, see gemm_common.cuh) and the plain F32 GEMM, in dense, grouped and expert modes.
#include <algorithm>
#include <cstdlib>

#include "kernels/common/act_dispatch.cuh"
#include "kernels/gemm/dequant_gemm.cuh"
#include "kernels/gemm/dequant_gemm_pipelined.cuh"
#include "kernels/gemm/dequant_gemv.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {
namespace {

constexpr size_t kGemvMaxSmem = 200 << 10;

// Launch geometry: K sub-ranges per CTA (up to as many as keep >= 2 CTAs per SM of an H200 busy,
// capped below; all of K needs no partials) and only the rows that can hold data staged.
int64_t gemv_outer(const GemmParams& p) {
  return std::max<int64_t>(1, p.experts != nullptr ? std::min<int64_t>(p.n_experts, p.max_active) : p.n_groups);
}

// n8 tiles per warp: the widest that still gives every warp scheduler of an H200 (132 SMs x 4)
// about four warps; narrower warps for small weights (numerically neutral: columns are
// independent).
int gemv_nt(const GemmParams& p, int spc) {
  const int64_t y = (gemm_n_subranges(p.K) + spc - 1) / spc;
  for (int nt = kGemvMaxNt; nt > 1; nt /= 2) {
    const int64_t warps = (p.N + 8 * nt - 1) / (8 * nt) * y * gemv_outer(p);
    if (warps >= 4 * 4 * 132) return nt;
  }
  return 1;
}

GemvShape gemv_shape(const GemmParams& p, int64_t rows, int mt, int stages) {
  const int P = gemm_n_subranges(p.K);
  const int64_t base = (p.N + gemv_cta_cols(kGemvMaxNt) - 1) / gemv_cta_cols(kGemvMaxNt) * gemv_outer(p);
  const int64_t want_y = std::min<int64_t>(P, (2 * 132 + base - 1) / base);
  GemvShape sh;
  sh.spc = static_cast<int>((P + want_y - 1) / want_y);
  // Cap (DEEPINFER_GEMV_MAX_SPC, numerically neutral): measured on the H200, one sub-range per CTA
  // beat 2 and 8 at batch 1-32 (more CTAs, less staging each), so 1 is the default; the device
  // test procedure also runs cuda_ops_test with 8 to keep the multi-sub-range path verified.
  static const int max_spc = [] {
    const char* v = std::getenv("DEEPINFER_GEMV_MAX_SPC");
    return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : 1;
  }();
  sh.spc = std::min(sh.spc, max_spc);
  sh.a_rows = static_cast<int>(std::min<int64_t>(mt * 16, rows));
  for (;; sh.spc = (sh.spc + 1) / 2) {
    sh.n_codes = gemv_codes(p.w.fmt, p.w.block_in, p.K, sh.spc);
    if (gemv_smem_bytes(sh, p.K, stages) <= kGemvMaxSmem || sh.spc == 1) break;
  }
  return sh;
}

template <WeightFmt F, int MT, int NT, int S>
cudaError_t launch_gemv_mt(const GemmParams& p, const GemvShape& sh, cudaStream_t s) {
  static bool configured = false;  // opt in to large dynamic shared memory once per instantiation
  if (!configured) {
    cudaFuncSetAttribute(dequant_gemv_kernel<F, MT, NT, S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(kGemvMaxSmem));
    configured = true;
  }
  const int P = gemm_n_subranges(p.K);
  const dim3 grid(static_cast<unsigned>((p.N + gemv_cta_cols(NT) - 1) / gemv_cta_cols(NT)),
                  static_cast<unsigned>((P + sh.spc - 1) / sh.spc), static_cast<unsigned>(gemv_outer(p)));
  if (grid.x == 0 || grid.z == 0) return cudaSuccess;
  const bool split = grid.y > 1;
  const bool self_fold = split && p.tile_counters != nullptr && p.n_tile_counters >= static_cast<int64_t>(grid.x) * grid.z;
  GemmParams q = p;
  if (!self_fold) q.tile_counters = nullptr;
  dequant_gemv_kernel<F, MT, NT, S><<<grid, kGemvWarps * 32, gemv_smem_bytes(sh, p.K, S), s>>>(q, p.partial, sh);
  if (split && !self_fold) {
    gemv_reduce_kernel<<<grid_for(p.M * p.ldc), 256, 0, s>>>(p.partial, P, p.M, p.ldc, p.C, p.c_bf16);
  }
  return cudaGetLastError();
}

// Ring depth (DEEPINFER_GEMV_STAGES = 2 or 4, default 3: tuning only, numerically neutral).
// Measured on the H200 (decode, 4 full-width layers): 3 ~ 4 > 6 > 8 — shared memory per CTA,
// hence CTAs per SM, matters more than depth.
int gemv_stages() {
  static const int stages = [] {
    const char* v = std::getenv("DEEPINFER_GEMV_STAGES");
    const int n = v != nullptr ? std::atoi(v) : 3;
    return n == 2 || n == 4 ? n : 3;
  }();
  return stages;
}

template <WeightFmt F>
cudaError_t launch_gemv(const GemmParams& p, const GemvShape& sh, int mt, int stages, cudaStream_t s) {
  // Narrow warps (small weights) always use the default depth; the depth knob tunes wide ones.
  switch (gemv_nt(p, sh.spc)) {
    case 1: return mt == 1 ? launch_gemv_mt<F, 1, 1, 3>(p, sh, s) : launch_gemv_mt<F, 2, 1, 3>(p, sh, s);
    case 2: return mt == 1 ? launch_gemv_mt<F, 1, 2, 3>(p, sh, s) : launch_gemv_mt<F, 2, 2, 3>(p, sh, s);
    default: break;
  }
  switch (stages) {
    case 2: return mt == 1 ? launch_gemv_mt<F, 1, 4, 2>(p, sh, s) : launch_gemv_mt<F, 2, 4, 2>(p, sh, s);
    case 4: return mt == 1 ? launch_gemv_mt<F, 1, 4, 4>(p, sh, s) : launch_gemv_mt<F, 2, 4, 4>(p, sh, s);
    default: return mt == 1 ? launch_gemv_mt<F, 1, 4, 3>(p, sh, s) : launch_gemv_mt<F, 2, 4, 3>(p, sh, s);
  }
}

// Dense/grouped: one CTA row per 128-row tile and group. Experts: a bound on the (expert, tile)
// pairs with rows — each expert's last tile may be partial — the CTAs past the real count exit.
template <WeightFmt F>
cudaError_t launch_pipelined(const GemmParams& p, cudaStream_t s) {
  const size_t smem = pipe_smem_bytes(F);
  static const cudaError_t configured = cudaFuncSetAttribute(
      dequant_gemm_pipelined_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (configured != cudaSuccess) return configured;
  const int m_tiles = static_cast<int>((p.M + kPipeBM - 1) / kPipeBM);
  const int64_t y = p.experts != nullptr ? m_tiles + std::min<int64_t>(p.n_experts, p.M)
                                         : static_cast<int64_t>(m_tiles) * p.n_groups;
  const dim3 grid(static_cast<unsigned>((p.N + kPipeBN - 1) / kPipeBN), static_cast<unsigned>(y));
  if (grid.x == 0 || grid.y == 0) return cudaSuccess;
  dequant_gemm_pipelined_kernel<F><<<grid, kPipeWarps * 32, smem, s>>>(p, m_tiles);
  return cudaGetLastError();
}

}  // namespace

int64_t gemm_expert_rows(int64_t T) { return T <= 512 ? std::min<int64_t>(T, kGemvMaxRows) : T; }

int64_t gemm_counter_slots(const GemmParams& p) {
  return (p.N + kGemvMinCtaCols - 1) / kGemvMinCtaCols * gemv_outer(p);  // the narrowest CTAs
}

int64_t gemm_partial_floats(int64_t rows, int64_t M, int64_t ldc, int64_t K) {
  const int P = gemm_n_subranges(K);
  return (P > 1 && rows <= kGemvMaxRows) ? P * M * ldc : 0;
}

cudaError_t launch_dequant_gemm(const GemmParams& p, cudaStream_t s) {
  const bool experts = p.experts != nullptr;
  const int64_t rows = experts ? gemm_expert_rows(p.max_rows_per_expert) : p.M;
  // The streaming kernel's preconditions (dequant_gemv.cuh): whole BK tiles, 16-byte runs, and
  // FP8 UE8M0 scales in power-of-two blocks of >= 16 inputs.
  const bool pow2_in = p.w.block_in >= 16 && (p.w.block_in & (p.w.block_in - 1)) == 0;
  const bool runs_ok = p.K % kGemmBK == 0 && p.w.row_bytes % 16 == 0 &&
                       (p.w.fmt != WeightFmt::kFp8Block || (!p.w.scale_f32 && pow2_in && p.w.block_out > 0));
  const bool partial_ok = gemm_n_subranges(p.K) == 1 || p.partial != nullptr;
  if (rows <= kGemvMaxRows && runs_ok && partial_ok && (!experts || p.active != nullptr)) {
    const int mt = rows <= 16 ? 1 : 2, stages = gemv_stages();
    const GemvShape sh = gemv_shape(p, rows, mt, stages);
    if (gemv_smem_bytes(sh, p.K, stages) <= kGemvMaxSmem) {
      switch (p.w.fmt) {
        case WeightFmt::kBF16: return launch_gemv<WeightFmt::kBF16>(p, sh, mt, stages, s);
        case WeightFmt::kFp8Block: return launch_gemv<WeightFmt::kFp8Block>(p, sh, mt, stages, s);
        case WeightFmt::kFp4Block: return launch_gemv<WeightFmt::kFp4Block>(p, sh, mt, stages, s);
      }
    }
  }
  // The pipelined kernel's preconditions: the streaming kernel's, plus 16-byte aligned A rows.
  const bool a_aligned = p.lda % 8 == 0 && reinterpret_cast<uintptr_t>(p.A) % 16 == 0;
  if (runs_ok && a_aligned && (!experts || p.n_experts <= kPipeMaxExperts)) {
    switch (p.w.fmt) {
      case WeightFmt::kBF16: return launch_pipelined<WeightFmt::kBF16>(p, s);
      case WeightFmt::kFp8Block: return launch_pipelined<WeightFmt::kFp8Block>(p, s);
      case WeightFmt::kFp4Block: return launch_pipelined<WeightFmt::kFp4Block>(p, s);
    }
  }
  const int64_t tiled_rows = experts ? p.max_rows_per_expert : p.M;
  const int m_tiles = static_cast<int>((tiled_rows + kGemmBM - 1) / kGemmBM);
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
