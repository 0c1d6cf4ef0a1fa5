// GPT-2 byte↔unicode map (see byte_level.h). The tables are built once, on first use.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

constexpr uint32_t kNoByte = 0xFFFFFFFF;
constexpr uint32_t kMaxAlphabetCodePoint = 256 + 68;  // shifted bytes end at U+0143

bool maps_to_itself(uint32_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<uint32_t, kMaxAlphabetCodePoint> cp_to_byte{};
  Tables() {
    cp_to_byte.fill(kNoByte);
    uint32_t n_shifted = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      byte_to_cp[b] = maps_to_itself(b) ? b : 256 + n_shifted++;
      cp_to_byte[byte_to_cp[b]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables kTables;
  return kTables;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t byte) { return tables().byte_to_cp[byte]; }

bool byte_level_to_bytes(std::string_view text, std::string* out) {
  const Tables& t = tables();
  // The alphabet ends at U+0143, so only 1- and 2-byte UTF-8 sequences can be valid here; this
  // hand-decoding runs for all 128k vocabulary entries at load time.
  out->resize(text.size());
  size_t n = 0;
  for (size_t pos = 0; pos < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[pos]);
    uint32_t cp = b0;
    if (b0 >= 0x80) {
      if (b0 < 0xC2 || b0 > 0xC5 || pos + 1 >= text.size()) return false;
      const auto b1 = static_cast<uint8_t>(text[pos + 1]);
      if ((b1 & 0xC0) != 0x80) return false;
      cp = ((b0 & 0x1Fu) << 6) | (b1 & 0x3Fu);
      ++pos;
    }
    ++pos;
    if (cp >= kMaxAlphabetCodePoint || t.cp_to_byte[cp] == kNoByte) return false;
    (*out)[n++] = static_cast<char>(t.cp_to_byte[cp]);
  }
  out->resize(n);
  return true;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_code_point(out, byte_to_code_point(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace deepinfer::tokenizer
