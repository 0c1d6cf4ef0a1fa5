// Vision preprocessing (model_v41_flash.md §8): the size rules that turn an image's size into the
// patch grid and the LLM span, and the pixels -> patch rows the ViT reads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "loader/model_config.h"
#include "vision/image_decode.h"

namespace deepinfer::vision {

// Where an image lands: its content is resized to content_w x content_h and placed at the top-left
// of a canvas_w x canvas_h canvas (multiples of the patch size) filled with gray 127.
struct ImageLayout {
  int64_t content_w = 0, content_h = 0;
  int64_t canvas_w = 0, canvas_h = 0;
  int64_t grid_w = 0, grid_h = 0;    // patches: canvas / patch_size
  int64_t n_llm_w = 0, n_llm_h = 0;  // aligner grid: ceil(grid / downsample_ratio)
  // The span's length in the LLM sequence: n_llm_h * (n_llm_w + 1) + 2.
  int64_t span_len() const { return n_llm_h * (n_llm_w + 1) + 2; }
};

// Sides accepted by plan_image_size (decoded images are far smaller: kMaxDecodedPixels).
inline constexpr int64_t kMaxImageSide = int64_t{1} << 30;

// The §8 size rules for an image of width x height:
//  1. max_wh_ratio > 0 and width > ratio * height: the width is clamped to floor(ratio * height)
//     (the content is squeezed, not cropped);
//  2. area < min_pixels: upscaled with its aspect kept, sides ceil(side * sqrt(min_pixels / area));
//  3. while the span n_llm_h * (n_llm_w + 1) + 2 exceeds max_image_tokens: shrunk with its aspect
//     kept, the longer side to one aligner cell (patch * downsample pixels) fewer than it covers
//     now, the shorter side scaled alike (floor, from the step-2 size so errors do not compound);
//  4. canvas = content rounded up to multiples of the patch size.
// Errors: an empty or absurd size, a config without a vision tower, a token budget too small for
// one cell.
Result<ImageLayout> plan_image_size(int64_t width, int64_t height, const loader::VisionConfig& config);

// One image ready for the ViT.
struct PreparedImage {
  ImageLayout layout;
  int64_t patch_dim = 0;       // 3 * patch_size^2
  std::vector<float> patches;  // [grid_h * grid_w, patch_dim], values exact in BF16
};

// Resizes (bicubic, vision/image_resize.h) and pads the image per plan_image_size, normalises every
// pixel to (v / 255 - 0.5) / 0.5 rounded to BF16, and cuts 3 x p x p patches (channel-major inside
// a patch: index c * p * p + y * p + x) in row-major order over the grid.
Result<PreparedImage> prepare_image(const RgbImage& image, const loader::VisionConfig& config);
// decode_image + prepare_image.
Result<PreparedImage> prepare_image_bytes(std::span<const uint8_t> bytes, const loader::VisionConfig& config);

}  // namespace deepinfer::vision
