// Element types of tensors in checkpoints and in the engine, with their safetensors names.
// Quantized weight formats (FP8 blocks, packed FP4) are described by loader::QuantFormat; a
// DType here is only the storage element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer::tensor {

enum class DType : uint8_t {
  kF32,
  kBF16,
  kF16,
  kF8E4M3,   // OCP E4M3FN: no infinities, 0x7F/0xFF are NaN, max finite 448
  kF8E8M0,   // UE8M0 scale byte: 2^(e - 127); 0xFF is NaN
  kI8,       // also how packed FP4 (two E2M1 codes per byte, low nibble first) is stored
  kU8,
  kI32,
  kI64,
};

// Bytes per element.
size_t dtype_size(DType dtype);
// The safetensors header spelling ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string; nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view name);

enum class Device : uint8_t { kCpu, kCuda };

}  // namespace deepinfer::tensor
