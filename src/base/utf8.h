// UTF-8 helpers, one implementation for the whole engine: the lossy conversion used by decode(),
// the streaming detokenizer and the chat output parser, the length of an incomplete sequence at
// the end of a buffer, code point decoding / encoding.
// Invalid input is replaced per "maximal subpart" (Unicode §3.9, as WHATWG and Rust's
// from_utf8_lossy do): one U+FFFD per maximal prefix of a well-formed sequence, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::utf8 {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length (0..3) of the proper prefix of a well-formed multi-byte sequence that ends `bytes`:
// the bytes a stream must hold back because later bytes may complete them.
size_t incomplete_tail_length(std::string_view bytes);

// Appends `bytes` to `out`, replacing each ill-formed subsequence by U+FFFD. With
// keep_incomplete_tail, a trailing incomplete (but so far well-formed) sequence is appended raw.
void append_utf8_lossy(std::string& out, std::string_view bytes, bool keep_incomplete_tail);

bool is_valid_utf8(std::string_view bytes);

// Unicode White_Space property (what HF's added-token lstrip/rstrip trims).
bool is_unicode_white_space(uint32_t cp);

// Decodes the code point starting at bytes[pos]; returns its byte length, or 0 if ill-formed.
size_t decode_code_point(std::string_view bytes, size_t pos, uint32_t* cp);

// Appends the UTF-8 encoding of `cp` (cp < 0x110000, not a surrogate).
void append_code_point(std::string& out, uint32_t cp);

}  // namespace deepinfer::utf8
