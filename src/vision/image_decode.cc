// PNG via libpng's simplified API (png_image), JPEG via the libjpeg API with an error manager that
// longjmps back here instead of calling exit(). Dimensions are checked against kMaxDecodedPixels
// from the headers, before any pixel buffer is allocated.
#include "vision/image_decode.h"

#include <jpeglib.h>
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

namespace deepinfer::vision {
namespace {

Status check_dimensions(const char* format, int64_t w, int64_t h) {
  if (w <= 0 || h <= 0) return invalid_argument("{} image has an empty size {}x{}", format, w, h);
  if (w * h > kMaxDecodedPixels)
    return invalid_argument("{} image is too large: {}x{} pixels, at most {} allowed", format, w, h,
                            kMaxDecodedPixels);
  return Status::ok();
}

bool is_png(std::span<const uint8_t> b) {
  static const uint8_t kMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), kMagic, 8) == 0;
}
bool is_jpeg(std::span<const uint8_t> b) { return b.size() >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff; }

// libjpeg reports fatal errors through error_exit, which must not return: jump back to decode_jpeg.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};
void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}
// Warnings (level -1: corrupt or truncated data, which libjpeg decodes on with gray filler) are
// kept, not printed: decode_jpeg refuses such an image, like PIL does a truncated one.
void jpeg_keep_warning(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  if (err->mgr.num_warnings++ == 0) (*cinfo->err->format_message)(cinfo, err->message);
}

}  // namespace

Result<RgbImage> decode_image(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return invalid_argument("image is empty (0 bytes)");
  if (is_png(bytes)) return decode_png(bytes);
  if (is_jpeg(bytes)) return decode_jpeg(bytes);
  return invalid_argument("image format not recognised ({} bytes, neither PNG nor JPEG magic)", bytes.size());
}

Result<RgbImage> decode_png(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return invalid_argument("PNG image is empty (0 bytes)");
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size())) {
    const std::string why = img.message;
    png_image_free(&img);
    return invalid_argument("PNG image could not be decoded: {}", why);
  }
  if (Status s = check_dimensions("PNG", img.width, img.height); !s.is_ok()) {
    png_image_free(&img);
    return s;
  }
  // RGBA, then drop alpha: PNG_FORMAT_RGB would composite transparent pixels onto a background,
  // while the reference's RGB conversion keeps the colour channels as they are.
  img.format = PNG_FORMAT_RGBA;
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, rgba.data(), 0, nullptr)) {
    const std::string why = img.message;
    png_image_free(&img);
    return invalid_argument("PNG image data is corrupt: {}", why);
  }
  RgbImage out;
  out.width = img.width;
  out.height = img.height;
  out.rgb.resize(static_cast<size_t>(out.width * out.height * 3));
  for (int64_t i = 0; i < out.width * out.height; ++i)
    for (int c = 0; c < 3; ++c) out.rgb[i * 3 + c] = rgba[i * 4 + c];
  png_image_free(&img);
  return out;
}

Result<RgbImage> decode_jpeg(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return invalid_argument("JPEG image is empty (0 bytes)");
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_keep_warning;
  // The jump lands back in this frame, so `out` stays alive and is destroyed normally on return;
  // no object with a destructor is created between setjmp and the libjpeg calls that may jump.
  RgbImage out;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return invalid_argument("JPEG image could not be decoded: {}", err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (Status s = check_dimensions("JPEG", cinfo.image_width, cinfo.image_height); !s.is_ok()) {
    jpeg_destroy_decompress(&cinfo);
    return s;
  }
  cinfo.out_color_space = JCS_RGB;  // gray and YCbCr -> RGB; CMYK is refused by libjpeg (an error)
  jpeg_start_decompress(&cinfo);
  out.width = cinfo.output_width;
  out.height = cinfo.output_height;
  out.rgb.resize(static_cast<size_t>(out.width * out.height * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.rgb.data() + static_cast<size_t>(cinfo.output_scanline) * out.width * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  const long warnings = err.mgr.num_warnings;
  jpeg_destroy_decompress(&cinfo);
  if (warnings > 0) return invalid_argument("JPEG image data is corrupt or truncated: {}", err.message);
  return out;
}

}  // namespace deepinfer::vision
