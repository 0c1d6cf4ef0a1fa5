// UTF-8 helpers for the chat layer: validating one sequence, encoding a code point, and a
// byte assembler that releases only complete characters (token bytes can split a character).
// Ill-formed bytes become U+FFFD per maximal subpart, as in Tokenizer::decode().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::chat {

// Length (1-4) of the valid UTF-8 sequence at the start of `s`, or 0 if it is invalid or cut off.
size_t utf8_sequence_length(std::string_view s);
void append_utf8(uint32_t code_point, std::string* out);
// Length of the longest prefix of `s` that ends on a character boundary, treating ill-formed
// bytes as complete (replaceable); the rest is an incomplete, so far well-formed, tail.
size_t utf8_complete_prefix(std::string_view s);
// `s` with each maximal ill-formed subpart replaced by U+FFFD.
std::string utf8_sanitize(std::string_view s);

// Accumulates raw token bytes and hands out text that never splits a character.
class Utf8Assembler {
 public:
  // Appends bytes; returns the newly complete text (invalid bytes become U+FFFD).
  std::string push(std::string_view bytes);
  // Returns whatever is pending (an incomplete sequence becomes U+FFFD).
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace deepinfer::chat
