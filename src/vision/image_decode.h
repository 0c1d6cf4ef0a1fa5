// Image bytes -> RGB8 for the vision tower (model_v41_flash.md §8): PNG through libpng, JPEG
// through libjpeg-turbo, chosen by the file's magic bytes. Errors name what is wrong with the
// bytes (empty, unknown format, corrupt, too large); nothing here aborts on bad input.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace deepinfer::vision {

// Decoded images larger than this many pixels are refused before their pixels are allocated
// (64 Mi pixels: 8192 x 8192; the encoder shrinks every image to ~1300 x 1300 anyway).
inline constexpr int64_t kMaxDecodedPixels = int64_t{1} << 26;

struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3] row-major, interleaved R, G, B
  uint8_t at(int64_t y, int64_t x, int c) const { return rgb[static_cast<size_t>((y * width + x) * 3 + c)]; }
};

// PNG or JPEG by magic bytes. Alpha is dropped (not composited); gray and palette images are
// expanded to RGB; 16-bit PNG samples are reduced to 8 bits.
Result<RgbImage> decode_image(std::span<const uint8_t> bytes);
Result<RgbImage> decode_png(std::span<const uint8_t> bytes);
Result<RgbImage> decode_jpeg(std::span<const uint8_t> bytes);

}  // namespace deepinfer::vision
