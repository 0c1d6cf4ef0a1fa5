// Errors as each API spells them. OpenAI-style endpoints answer
// {"error": {"message", "type", "param", "code"}}; Anthropic's /v1/messages answers
// {"type": "error", "error": {"type", "message"}}. Every error the server sends, before or in the
// middle of a stream, is built here so clients can always parse it.
#pragma once

#include <string>

#include "deepinfer/status.h"
#include "http/http_server.h"
#include "protocol/chat_request.h"

namespace deepinfer::server {

enum class ApiFormat : uint8_t { kOpenAI, kAnthropic };

// /v1/messages (and below) use Anthropic's format, everything else OpenAI's.
ApiFormat api_format_for_path(const std::string& path);

struct ApiError {
  int status = 500;
  std::string message;
  std::string param;  // OpenAI "param" (the offending field); "" = null
  std::string code;   // OpenAI "code"; "" = null
  HeaderList headers; // e.g. retry-after on 429
};

ApiError bad_request(std::string message, std::string param = {});
ApiError model_not_found(const std::string& model);
// Maps an engine/protocol Status: INVALID_ARGUMENT/OUT_OF_RANGE -> 400 (param taken from a
// "path: problem" message), NOT_FOUND -> 404, RESOURCE_EXHAUSTED -> 429, UNAVAILABLE /
// FAILED_PRECONDITION -> 503, UNIMPLEMENTED -> 400, CANCELLED -> 499, anything else -> 500.
ApiError error_from_status(const Status& status);

// The error object ({"error": ...} or {"type": "error", ...}).
protocol::Json error_json(const ApiError& error, ApiFormat format);
// A complete response carrying error_json.
HttpResponse error_response(const ApiError& error, ApiFormat format);

}  // namespace deepinfer::server
