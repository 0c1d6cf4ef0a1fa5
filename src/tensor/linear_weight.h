// LinearWeight: one `y = W x` weight in its checkpoint storage format (model_v4_flash.md §5.4-5.5),
// as views that point into a mapped checkpoint (CPU) or into device memory (CUDA). Matrices are
// out x in, row-major. Dequantisation helpers are host-side and exact.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace deepinfer::tensor {

enum class WeightFormat : uint8_t {
  kF32,       // weight [out, in] F32
  kBF16,      // weight [out, in] BF16
  kFp8Block,  // weight [out, in] F8_E4M3, scale [ceil(out/bo), ceil(in/bi)] F8_E8M0 or F32
  kFp4Block,  // weight [out, in/2] I8 (two E2M1 codes per byte, low nibble = even column),
              // scale [out, in/32] F8_E8M0
};

struct LinearWeight {
  WeightFormat format = WeightFormat::kBF16;
  int64_t out = 0;         // logical rows
  int64_t in = 0;          // logical columns
  TensorView weight;
  TensorView scale;        // empty for F32/BF16
  int block_out = 1;       // FP8: block rows; FP4: 1
  int block_in = 1;        // FP8: block columns; FP4: 32
  // A backend's own copy of `weight` in the layout its large-batch kernels read (CUDA: the packed
  // GEMM's BF16 blocks), made once by Ops::prepare_linear; empty: none. It holds the same values,
  // so results are bitwise those without it.
  TensorView prepared;
  // FP4: the codes are in the backend's device layout (CUDA: the bits of every 32-bit word
  // permuted for its decoders, kernels/gemm/fp4_layout.h), written so once where the weight reached
  // the device (Ops::to_fp4_device_layout); false: the checkpoint's nibble order.
  bool fp4_device_layout = false;

  bool empty() const { return weight.empty(); }
  bool is_quantized() const { return format == WeightFormat::kFp8Block || format == WeightFormat::kFp4Block; }
  // Dequantised row r (in values) into `dst` (host memory only).
  void dequantize_row(int64_t r, float* dst) const;
  // Dequantised element (r, c) (host memory only; slow, for tests).
  float element(int64_t r, int64_t c) const;
  // Scale applying to element (r, c) (1 for unquantized formats).
  float scale_at(int64_t r, int64_t c) const;
  std::string describe() const;
};

}  // namespace deepinfer::tensor
