// JSON text in and out of the server. Output never throws: model text may end in an incomplete
// UTF-8 sequence and token pieces are raw bytes, so invalid UTF-8 is replaced by U+FFFD. Input
// is parsed as ordered_json (tool schemas keep the client's key order) and rejects invalid UTF-8.
#pragma once

#include <string>
#include <string_view>

#include "deepinfer/status.h"
#include "protocol/chat_request.h"

namespace deepinfer::server {

std::string json_text(const protocol::Json& value);

// The request body as JSON; the error says where parsing stopped ("invalid JSON body: ...").
Result<protocol::Json> parse_json_body(std::string_view body);

// `text` with invalid UTF-8 sequences replaced by U+FFFD.
std::string valid_utf8(std::string_view text);

}  // namespace deepinfer::server
