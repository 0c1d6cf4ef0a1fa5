// A PNG file of an RGB8 image, written with libpng's simplified API: the tests' image inputs.
// Header-only; the including target links PNG::PNG.
#pragma once

#include <png.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace deepinfer::testing {

// rgb: [height, width, 3] bytes. Empty on failure (the caller's check fails then).
inline std::string encode_png_rgb(int64_t width, int64_t height, const uint8_t* rgb) {
  png_image p;
  std::memset(&p, 0, sizeof(p));
  p.version = PNG_IMAGE_VERSION;
  p.width = static_cast<png_uint_32>(width);
  p.height = static_cast<png_uint_32>(height);
  p.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_get_memory_size(p, size, 0, rgb, 0, nullptr)) return {};
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&p, out.data(), &size, 0, rgb, 0, nullptr)) return {};
  out.resize(size);
  return out;
}

}  // namespace deepinfer::testing
