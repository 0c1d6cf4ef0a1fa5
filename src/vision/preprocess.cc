// The §8 size rules and patch extraction.
#include "vision/preprocess.h"

#include <algorithm>
#include <cmath>

#include "tensor/number_formats.h"
#include "vision/image_resize.h"

namespace deepinfer::vision {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The grids of a content size.
ImageLayout layout_of(int64_t w, int64_t h, const loader::VisionConfig& c) {
  ImageLayout l;
  l.content_w = w;
  l.content_h = h;
  l.grid_w = ceil_div(w, c.patch_size);
  l.grid_h = ceil_div(h, c.patch_size);
  l.canvas_w = l.grid_w * c.patch_size;
  l.canvas_h = l.grid_h * c.patch_size;
  l.n_llm_w = ceil_div(l.grid_w, c.downsample_ratio);
  l.n_llm_h = ceil_div(l.grid_h, c.downsample_ratio);
  return l;
}

// Whether the content was squeezed by the wide-image clamp (rule 1).
bool clamped_wide(int64_t width, int64_t height, const loader::VisionConfig& c) {
  return c.max_wh_ratio > 0.0 && static_cast<double>(width) > c.max_wh_ratio * static_cast<double>(height);
}

}  // namespace

Result<ImageLayout> plan_image_size(int64_t width, int64_t height, const loader::VisionConfig& c) {
  if (width <= 0 || height <= 0) return invalid_argument("image has an empty size {}x{}", width, height);
  // Bounds the products below (w * h, h0 * long_side) far from int64 overflow.
  if (width > kMaxImageSide || height > kMaxImageSide)
    return invalid_argument("image size {}x{} is too large (a side over {} pixels)", width, height, kMaxImageSide);
  if (c.num_hidden_layers <= 0 || c.patch_size <= 0 || c.downsample_ratio <= 0)
    return failed_precondition("the model has no vision tower (vision_config absent or empty)");
  if (c.max_image_tokens < 4)  // one aligner cell: 1 * (1 + 1) + 2
    return failed_precondition("vision max_image_tokens {} is too small for any image", c.max_image_tokens);
  int64_t w = width, h = height;
  if (clamped_wide(width, height, c)) w = std::max<int64_t>(1, static_cast<int64_t>(c.max_wh_ratio * h));
  if (w * h < c.min_pixels) {
    // The tiny epsilon keeps exact products (e.g. 50 * 1.68 = 84) from rounding up a pixel.
    const double s = std::sqrt(static_cast<double>(c.min_pixels) / static_cast<double>(w * h));
    w = static_cast<int64_t>(std::ceil(w * s - 1e-9));
    h = static_cast<int64_t>(std::ceil(h * s - 1e-9));
  }
  const int64_t w0 = w, h0 = h, cell = c.patch_size * c.downsample_ratio;
  ImageLayout l = layout_of(w, h, c);
  while (l.span_len() > c.max_image_tokens) {
    // Drop one aligner cell on the longer side; the shorter side follows from the step-2 size.
    // A long side of more cells than max_image_tokens can never fit (the span counts each cell),
    // so those sizes are skipped at once: at most max_image_tokens iterations for any image.
    const bool wide = w >= h;
    const int64_t cells = std::min(ceil_div(wide ? w : h, cell) - 1, c.max_image_tokens);
    if (cells < 1) return internal_error("image size rules found no size under {} tokens", c.max_image_tokens);
    const int64_t long_side = cells * cell;
    if (wide) {
      w = long_side;
      h = std::max<int64_t>(1, h0 * long_side / w0);
    } else {
      h = long_side;
      w = std::max<int64_t>(1, w0 * long_side / h0);
    }
    l = layout_of(w, h, c);
  }
  return l;
}

Result<PreparedImage> prepare_image(const RgbImage& image, const loader::VisionConfig& c) {
  if (image.width * image.height > kMaxDecodedPixels)
    return invalid_argument("image is too large: {}x{} pixels, at most {} allowed", image.width, image.height,
                            kMaxDecodedPixels);
  if (image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(image.width * image.height * 3))
    return invalid_argument("image {}x{} has {} bytes of RGB pixels", image.width, image.height, image.rgb.size());
  DI_ASSIGN_OR_RETURN(const ImageLayout l, plan_image_size(image.width, image.height, c));
  // The content is resized to its planned size and pasted top-left on a gray canvas, so the
  // padding sits bottom/right like the aligner's zero padding. When the wide-image clamp applied,
  // the spec resizes instead of padding: the content is stretched over the whole canvas.
  const bool fill = clamped_wide(image.width, image.height, c);
  const int64_t cw = fill ? l.canvas_w : l.content_w, ch = fill ? l.canvas_h : l.content_h;
  const RgbImage content = resize_bicubic(image, cw, ch);
  const int64_t p = c.patch_size, pp = p * p;
  PreparedImage out;
  out.layout = l;
  out.patch_dim = 3 * pp;
  out.patches.resize(static_cast<size_t>(l.grid_h * l.grid_w * out.patch_dim));
  // The 256 possible pixel values, normalised and rounded to BF16 as the reference's tensor is.
  float lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = tensor::round_bf16((static_cast<float>(v) / 255.0f - 0.5f) / 0.5f);
  for (int64_t gy = 0; gy < l.grid_h; ++gy) {
    for (int64_t gx = 0; gx < l.grid_w; ++gx) {
      float* patch = &out.patches[static_cast<size_t>((gy * l.grid_w + gx) * out.patch_dim)];
      for (int ch_i = 0; ch_i < 3; ++ch_i) {
        for (int64_t y = 0; y < p; ++y) {
          for (int64_t x = 0; x < p; ++x) {
            const int64_t py = gy * p + y, px = gx * p + x;
            const bool inside = py < content.height && px < content.width;
            patch[ch_i * pp + y * p + x] = lut[inside ? content.at(py, px, ch_i) : 127];
          }
        }
      }
    }
  }
  return out;
}

Result<PreparedImage> prepare_image_bytes(std::span<const uint8_t> bytes, const loader::VisionConfig& c) {
  DI_ASSIGN_OR_RETURN(const RgbImage image, decode_image(bytes));
  return prepare_image(image, c);
}

}  // namespace deepinfer::vision
