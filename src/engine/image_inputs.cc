#include "engine/image_inputs.h"

#include <algorithm>

#include <xxhash.h>

namespace deepinfer::engine {

void ImageSpans::collect(int32_t first, int32_t n, int32_t row_base, std::vector<int32_t>* rows,
                         std::vector<float>* embeds) const {
  for (const Span& s : spans) {
    const int32_t lo = std::max(first, s.begin), hi = std::min(first + n, s.begin + s.image.n_rows);
    for (int32_t p = lo; p < hi; ++p) {
      rows->push_back(row_base + p - first);
      const auto src = s.image.rows.begin() + static_cast<std::ptrdiff_t>((p - s.begin) * hidden);
      embeds->insert(embeds->end(), src, src + hidden);
    }
  }
}

bool ImageSpans::contains(int32_t position) const {
  for (const Span& s : spans)
    if (position >= s.begin && position < s.begin + s.image.n_rows) return true;
  return false;
}

Result<std::shared_ptr<const ImageSpans>> expand_images(std::vector<int32_t>* prompt,
                                                        const std::vector<ImageInput>& images, int32_t image_token_id,
                                                        const ImageEncoder* encoder) {
  // Without images the prompt is taken as it is (a placeholder id is then an ordinary token, as in
  // token-id prompts that happen to hold it).
  if (images.empty()) return std::shared_ptr<const ImageSpans>{};
  const auto n_placeholders =
      image_token_id < 0 ? 0 : static_cast<size_t>(std::count(prompt->begin(), prompt->end(), image_token_id));
  if (encoder == nullptr) {
    return invalid_argument("images: this model takes no image input ({} image(s), {} placeholder(s) in the prompt)",
                            images.size(), n_placeholders);
  }
  if (images.size() != n_placeholders) {
    return invalid_argument("images: the prompt has {} image placeholder(s) (token {}) for {} image(s)",
                            n_placeholders, image_token_id, images.size());
  }
  auto out = std::make_shared<ImageSpans>();
  out->hidden = encoder->hidden();
  uint64_t hash = 0x696d616765ull;  // chained over the images in order: each image's hash seeds the next
  std::vector<int32_t> expanded;
  expanded.reserve(prompt->size());
  size_t next = 0;
  for (int32_t id : *prompt) {
    if (id != image_token_id) {
      expanded.push_back(id);
      continue;
    }
    const std::string& bytes = images[next].data;
    auto encoded = encoder->encode(bytes);
    if (!encoded.is_ok()) return encoded.status().with_context(fmt::format("images[{}]", next));
    hash = XXH3_64bits_withSeed(bytes.data(), bytes.size(), hash);
    out->spans.push_back({static_cast<int32_t>(expanded.size()), std::move(encoded).value()});
    expanded.insert(expanded.end(), static_cast<size_t>(out->spans.back().image.n_rows), image_token_id);
    ++next;
  }
  out->content_hash = hash;
  *prompt = std::move(expanded);
  return std::shared_ptr<const ImageSpans>(std::move(out));
}

}  // namespace deepinfer::engine
