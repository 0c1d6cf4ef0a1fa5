// The GPT-2 ByteLevel alphabet: each of the 256 byte values is shown as one printable code point
// (printable Latin-1 bytes as themselves, the other 68 as U+0100..U+0143 in byte order), so that
// vocabulary and merges are plain strings. Only the conversions live here; no BPE.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

// Code point that stands for `byte` in byte-level text.
uint32_t byte_to_code_point(uint8_t byte);

// Byte-level text (e.g. "Ġhello") → raw bytes (" hello"). Returns false, leaving `out` in an
// unspecified state, if `text` is not UTF-8 or holds a code point outside the alphabet.
bool byte_level_to_bytes(std::string_view text, std::string* out);

// Raw bytes → byte-level text (the inverse of byte_level_to_bytes).
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace deepinfer::tokenizer
