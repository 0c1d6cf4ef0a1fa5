// UTF-8 validation and assembly (see utf8.h). Rules follow RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF.
#include "tokenizer/chat/utf8.h"

namespace deepinfer::chat {
namespace {

// Expected sequence length from the lead byte, 0 for a byte that cannot start a sequence.
size_t lead_length(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

// Whether the second byte is allowed after `lead` (excludes overlongs, surrogates, > U+10FFFF).
bool second_ok(unsigned char lead, unsigned char c) {
  if ((c & 0xC0) != 0x80) return false;
  if (lead == 0xE0) return c >= 0xA0;
  if (lead == 0xED) return c <= 0x9F;
  if (lead == 0xF0) return c >= 0x90;
  if (lead == 0xF4) return c <= 0x8F;
  return true;
}

// 0 = invalid, SIZE_MAX = valid so far but cut off, else the complete length.
size_t classify(std::string_view s) {
  unsigned char lead = static_cast<unsigned char>(s[0]);
  size_t n = lead_length(lead);
  if (n <= 1) return n;
  for (size_t i = 1; i < n; ++i) {
    if (i >= s.size()) return SIZE_MAX;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (i == 1 ? !second_ok(lead, c) : (c & 0xC0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s) {
  if (s.empty()) return 0;
  size_t n = classify(s);
  return n == SIZE_MAX ? 0 : n;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t utf8_complete_prefix(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = classify(s.substr(pos));
    if (n == SIZE_MAX) break;
    pos += n == 0 ? 1 : n;
  }
  return pos;
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = utf8_sequence_length(s.substr(pos));
    if (n == 0) {
      out.append("\xEF\xBF\xBD");
      ++pos;
    } else {
      out.append(s.substr(pos, n));
      pos += n;
    }
  }
  return out;
}

std::string Utf8Assembler::push(std::string_view bytes) {
  pending_.append(bytes);
  size_t n = utf8_complete_prefix(pending_);
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
