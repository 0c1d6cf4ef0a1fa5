// JSON text helpers (see json_text.h).
#include "json_text.h"

namespace deepinfer::server {

std::string json_text(const protocol::Json& value) {
  return value.dump(-1, ' ', false, protocol::Json::error_handler_t::replace);
}

Result<protocol::Json> parse_json_body(std::string_view body) {
  if (body.empty()) return Status(StatusCode::kInvalidArgument, "body: a JSON object is required");
  try {
    return protocol::Json::parse(body.begin(), body.end());
  } catch (const protocol::Json::parse_error& e) {
    // nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string what = e.what();
    size_t pos = what.find("] ");
    return Status(StatusCode::kInvalidArgument,
                  "invalid JSON body: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (ok && len > 1) {
      // Reject overlong forms, surrogates and code points past U+10FFFF.
      uint32_t cp = c & (0xFF >> (len + 1));
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (ok) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace deepinfer::server
