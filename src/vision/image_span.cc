#include "vision/image_span.h"

#include <cstddef>

namespace deepinfer::vision {

int64_t span_length(int64_t n_llm_h, int64_t n_llm_w) {
  return n_llm_h <= 0 || n_llm_w <= 0 ? 0 : n_llm_h * (n_llm_w + 1) + 2;
}

std::vector<SpanSlot> span_tokens(int64_t n_llm_h, int64_t n_llm_w) {
  std::vector<SpanSlot> s;
  if (span_length(n_llm_h, n_llm_w) == 0) return s;
  s.reserve(static_cast<size_t>(span_length(n_llm_h, n_llm_w)));
  s.push_back(SpanSlot::kStart);
  for (int64_t r = 0; r < n_llm_h; ++r) {
    s.insert(s.end(), static_cast<size_t>(n_llm_w), SpanSlot::kImage);
    s.push_back(SpanSlot::kNewline);
  }
  s.push_back(SpanSlot::kEnd);
  return s;
}

std::vector<int64_t> span_aligner_rows(int64_t n_llm_h, int64_t n_llm_w) {
  std::vector<int64_t> rows;
  int64_t next = 0;
  for (SpanSlot s : span_tokens(n_llm_h, n_llm_w)) rows.push_back(s == SpanSlot::kImage ? next++ : -1);
  return rows;
}

}  // namespace deepinfer::vision
