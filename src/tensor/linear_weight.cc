#include "tensor/linear_weight.h"

#include <algorithm>

#include <fmt/format.h>

#include "tensor/number_formats.h"

namespace deepinfer::tensor {

float LinearWeight::scale_at(int64_t r, int64_t c) const {
  switch (format) {
    case WeightFormat::kF32:
    case WeightFormat::kBF16:
      return 1.0f;
    case WeightFormat::kFp8Block:
    case WeightFormat::kFp4Block: {
      const int64_t sr = r / block_out;
      const int64_t sc = c / block_in;
      const void* p = scale.at({sr, sc});
      return scale.dtype == DType::kF32 ? *static_cast<const float*>(p)
                                        : e8m0_to_f32(*static_cast<const uint8_t*>(p));
    }
  }
  return 1.0f;
}

void LinearWeight::dequantize_row(int64_t r, float* dst) const {
  DI_CHECK(weight.device == Device::kCpu, "dequantize_row needs host memory");
  switch (format) {
    case WeightFormat::kF32: {
      const float* src = static_cast<const float*>(weight.at({r}));
      for (int64_t c = 0; c < in; ++c) dst[c] = src[c];
      return;
    }
    case WeightFormat::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(weight.at({r}));
      for (int64_t c = 0; c < in; ++c) dst[c] = bf16_to_f32(src[c]);
      return;
    }
    case WeightFormat::kFp8Block: {
      const uint8_t* src = static_cast<const uint8_t*>(weight.at({r}));
      for (int64_t c0 = 0; c0 < in; c0 += block_in) {
        const float s = scale_at(r, c0);
        const int64_t c1 = std::min<int64_t>(in, c0 + block_in);
        for (int64_t c = c0; c < c1; ++c) dst[c] = e4m3_to_f32(src[c]) * s;
      }
      return;
    }
    case WeightFormat::kFp4Block: {
      const uint8_t* src = static_cast<const uint8_t*>(weight.at({r}));
      for (int64_t c0 = 0; c0 < in; c0 += block_in) {
        const float s = scale_at(r, c0);
        for (int64_t c = c0; c < c0 + block_in; c += 2) {
          const uint8_t b = src[c / 2];
          dst[c] = e2m1_to_f32(b & 0xf) * s;
          dst[c + 1] = e2m1_to_f32(b >> 4) * s;
        }
      }
      return;
    }
  }
}

float LinearWeight::element(int64_t r, int64_t c) const {
  switch (format) {
    case WeightFormat::kF32: return *static_cast<const float*>(weight.at({r, c}));
    case WeightFormat::kBF16: return bf16_to_f32(*static_cast<const uint16_t*>(weight.at({r, c})));
    case WeightFormat::kFp8Block:
      return e4m3_to_f32(*static_cast<const uint8_t*>(weight.at({r, c}))) * scale_at(r, c);
    case WeightFormat::kFp4Block: {
      const uint8_t b = *static_cast<const uint8_t*>(weight.at({r, c / 2}));
      return e2m1_to_f32((c % 2 == 0) ? (b & 0xf) : (b >> 4)) * scale_at(r, c);
    }
  }
  return 0.0f;
}

std::string LinearWeight::describe() const {
  static const char* kNames[] = {"F32", "BF16", "FP8-block", "FP4-block"};
  return fmt::format("{} [{}, {}] blocks {}x{}", kNames[static_cast<int>(format)], out, in, block_out,
                     block_in);
}

}  // namespace deepinfer::tensor
