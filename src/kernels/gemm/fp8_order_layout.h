// The FP8 order's k grouping (fp8_gemv.cuh's header), as plain functions both FP8-order kernels
// and a CPU test use: the decode kernel's lane c loads 16 contiguous bytes of a 64-byte weight
// window and hands its four words to wgmma as the a0 / a2 operands of the window's two k32 steps,
// so physical input 64 w + 16 c + 8 s + 4 h + j is step 2 w + s, position 16 h + 4 c + j (of 32).
// Every operand placed for either kernel (the staged activations, the large-M kernel's weights
// and activation codes) follows this map, which is what makes the two kernels' sums identical.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DI_FP8_HD __host__ __device__ __forceinline__
#else
#define DI_FP8_HD inline
#endif

namespace deepinfer::kernels {

struct Fp8StepPos {
  int64_t step = 0;  // k32 step (within the range k is counted from)
  int pos = 0;       // position 0..31 in the step: 16 h + 4 c + j
};

DI_FP8_HD Fp8StepPos fp8_step_pos(int64_t k) {
  const int pw = static_cast<int>(k & 63), c = pw >> 4, s = (pw >> 3) & 1, h = (pw >> 2) & 1;
  return {2 * (k >> 6) + s, 16 * h + 4 * c + (pw & 3)};
}

// Byte of physical input k of row r (< rows) in an operand laid out per k32 step as a rows x 32
// K-major operand of (rows / 8) x 2 core matrices of 8 rows x 16 bytes (row groups 256 apart, the
// step's two 16-position halves 128 apart: wgmma's SBO and LBO; steps rows x 32 apart): the
// decode kernel's staged activations (rows = its wgmma N, k over a sub-range) and the large-M
// kernel's 128-input blocks (k < 128; fp8_gemm.cuh's pre-passes write them, its bulk copies move
// them whole), where warpgroup w's 64 rows start 2048 w bytes into each step.
DI_FP8_HD int fp8_tile_offset(int r, int k, int rows = 128) {
  const Fp8StepPos sp = fp8_step_pos(k);
  return static_cast<int>(sp.step) * rows * 32 + (r >> 3) * 256 + (sp.pos >> 4) * 128 + (r & 7) * 16 + (sp.pos & 15);
}

}  // namespace deepinfer::kernels
