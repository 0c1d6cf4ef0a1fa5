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
  out->clear();
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp = 0;
    const size_t len = decode_code_point(text, pos, &cp);
    if (len == 0 || cp >= kMaxAlphabetCodePoint || t.cp_to_byte[cp] == kNoByte) return false;
    out->push_back(static_cast<char>(t.cp_to_byte[cp]));
    pos += len;
  }
  return true;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_code_point(out, byte_to_code_point(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace deepinfer::tokenizer
