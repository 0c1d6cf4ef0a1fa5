// Image references of a chat request -> the engine's image inputs (see chat_request.h).
#include <fmt/format.h>

#include <array>
#include <utility>

#include "protocol/chat_request.h"

namespace deepinfer::protocol {
namespace {

template <typename... Args>
Status bad(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}

// RFC 4648 base64 (standard alphabet; '=' padding optional; line breaks and spaces skipped, as
// clients that wrap long payloads send them). Errors say where the payload went wrong.
Result<std::string> decode_base64(std::string_view in) {
  static const std::array<int8_t, 256> table = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
    return t;
  }();
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(in[i]);
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++pad;
      continue;
    }
    if (pad > 0 || table[c] < 0) return bad("invalid base64 at byte {}", i);
    acc = (acc << 6) | static_cast<uint32_t>(table[c]);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (pad > 2 || bits >= 6) return bad("truncated base64");
  return out;
}

}  // namespace

Result<std::vector<ImageInput>> image_inputs(const std::vector<std::string>& refs) {
  std::vector<ImageInput> out;
  for (size_t i = 0; i < refs.size(); ++i) {
    const std::string& ref = refs[i];
    const size_t comma = ref.find(',');
    if (!ref.starts_with("data:") || comma == std::string::npos) {
      return bad("image {}: only data URLs (data:<type>;base64,<payload>) are accepted; this server "
                              "fetches nothing over the network", i);
    }
    const std::string_view header(ref.data() + 5, comma - 5);
    if (!header.ends_with(";base64")) return bad("image {}: the data URL is not base64 encoded", i);
    auto bytes = decode_base64(std::string_view(ref).substr(comma + 1));
    if (!bytes.is_ok()) return bad("image {}: {}", i, bytes.status().message());
    if (bytes->empty()) return bad("image {}: the data URL holds no bytes", i);
    out.push_back(ImageInput{std::move(bytes).value()});
  }
  return out;
}

}  // namespace deepinfer::protocol
