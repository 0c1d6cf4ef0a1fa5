// Image inputs of a request (DeepSeek-V4.1 vision, model_v41_flash.md §8): each image placeholder
// id in the prompt stands for one of Request::images; intake expands it into the image's span
// (IMAGE_START + (IMAGE x w + IMAGE_NEW_LINE) x h + IMAGE_END, every position the placeholder id)
// and keeps the encoder's rows for the span, which the runner hands to the model with each prefill
// chunk that covers them (ForwardBatch::image_rows). Plain data, testable without a model.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "deepinfer/engine.h"

namespace deepinfer::engine {

// One image encoded for the language model.
struct EncodedImage {
  int32_t n_rows = 0;       // the span's length
  std::vector<float> rows;  // [n_rows, hidden] F32, the span's rows in order
};

// What turns an image file into its span (the vision tower + aligner, vision/); a test may stand
// in another (DebugOptions::image_encoder).
class ImageEncoder {
 public:
  virtual ~ImageEncoder() = default;
  virtual int64_t hidden() const = 0;  // the language model's width
  // Errors name what is wrong with the image (format, size).
  virtual Result<EncodedImage> encode(std::string_view bytes) const = 0;
};

// A request's image spans, in prompt positions (ascending, disjoint).
struct ImageSpans {
  struct Span {
    int32_t begin = 0;        // prompt position of IMAGE_START
    EncodedImage image;
  };
  int64_t hidden = 0;
  std::vector<Span> spans;
  uint64_t content_hash = 0;  // of every image's bytes, in order (the prefix-cache namespace)

  // Appends the positions [first, first + n) that lie in a span: their rows relative to the
  // chunk (row_base + position - first) to `rows`, their embeddings to `embeds` ([., hidden]).
  void collect(int32_t first, int32_t n, int32_t row_base, std::vector<int32_t>* rows,
               std::vector<float>* embeds) const;
  bool contains(int32_t position) const;
};

// Expands every `image_token_id` in `prompt` (one per image, in order) into its image's span; with
// no images, nothing (null: a placeholder id stays an ordinary token). Errors when the counts
// differ, when the model has no encoder (`encoder` null) but the request carries images, and for
// images the encoder refuses (naming the image's index).
Result<std::shared_ptr<const ImageSpans>> expand_images(std::vector<int32_t>* prompt,
                                                        const std::vector<ImageInput>& images, int32_t image_token_id,
                                                        const ImageEncoder* encoder);

}  // namespace deepinfer::engine
