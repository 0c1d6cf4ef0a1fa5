// Bicubic resampling of RGB8 images for the vision preprocessing (model_v41_flash.md §8).
//
// The spec does not name the filter. We use the PIL-style separable bicubic (Keys kernel, a = -0.5)
// with the kernel widened by the scale factor when shrinking (antialiasing), because the reference
// preprocessing of DeepSeek's vision models runs through PIL's resize, whose default for such
// pipelines is bicubic. Intermediate values stay in F32 (PIL rounds to 8 bits between the passes),
// so results can differ from PIL by one code value on some pixels.
#pragma once

#include <cstdint>

#include "vision/image_decode.h"

namespace deepinfer::vision {

// `src` resampled to width x height (both >= 1). Same size: a copy.
RgbImage resize_bicubic(const RgbImage& src, int64_t width, int64_t height);

}  // namespace deepinfer::vision
