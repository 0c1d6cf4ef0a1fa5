// The layout of one image's span in the LLM sequence (model_v41_flash.md §8):
//   [IMAGE_START] + ([IMAGE] * n_llm_w + [IMAGE_NEW_LINE]) * n_llm_h + [IMAGE_END]
// Every position carries the image token id; the slot kind says which embedding overwrites it.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::vision {

enum class SpanSlot : uint8_t {
  kStart,    // learned image_start
  kImage,    // the next aligner row, in reading order
  kNewline,  // learned image_newline, after each aligner-grid row
  kEnd,      // learned image_end
};

// n_llm_h * (n_llm_w + 1) + 2 (0 for an empty grid).
int64_t span_length(int64_t n_llm_h, int64_t n_llm_w);
// The slot kinds of the span, in sequence order (empty for an empty grid).
std::vector<SpanSlot> span_tokens(int64_t n_llm_h, int64_t n_llm_w);
// For each span position, the aligner row it takes (row-major over the n_llm grid), or -1 for a
// delimiter.
std::vector<int64_t> span_aligner_rows(int64_t n_llm_h, int64_t n_llm_w);

}  // namespace deepinfer::vision
