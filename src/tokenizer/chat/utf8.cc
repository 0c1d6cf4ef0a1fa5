// The chat layer's UTF-8 helpers (see utf8.h), on the engine's one implementation (base/utf8.h):
// ill-formed input becomes one U+FFFD per maximal subpart, exactly as Tokenizer::decode() and
// IncrementalDetokenizer do, so parsed reasoning / content equal the decoded token text.
#include "tokenizer/chat/utf8.h"

#include "base/utf8.h"

namespace deepinfer::chat {

size_t utf8_sequence_length(std::string_view s) {
  if (s.empty()) return 0;
  uint32_t cp = 0;
  return utf8::decode_code_point(s, 0, &cp);
}

void append_utf8(uint32_t cp, std::string* out) { utf8::append_code_point(*out, cp); }

size_t utf8_complete_prefix(std::string_view s) { return s.size() - utf8::incomplete_tail_length(s); }

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  utf8::append_utf8_lossy(out, s, /*keep_incomplete_tail=*/false);
  return out;
}

std::string Utf8Assembler::push(std::string_view bytes) {
  pending_.append(bytes);
  const size_t n = utf8_complete_prefix(pending_);
  std::string out = utf8_sanitize(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string Utf8Assembler::flush() {
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace deepinfer::chat
