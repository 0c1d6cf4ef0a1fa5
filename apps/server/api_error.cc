// Error objects per API (see api_error.h).
#include "api_error.h"

#include "json_text.h"

namespace deepinfer::server {
namespace {

// OpenAI's own types: an unknown model or path (404) and a bad API key (401) are
// invalid_request_error, told apart by `code` (model_not_found, invalid_api_key).
const char* openai_type(int status) {
  switch (status) {
    case 401: return "invalid_request_error";
    case 403: return "permission_error";
    case 404: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

const char* anthropic_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

// "messages[1].role: unsupported role" -> "messages[1].role"; prose messages have no param.
std::string param_of(const std::string& message) {
  size_t colon = message.find(": ");
  if (colon == std::string::npos || colon == 0) return {};
  std::string head = message.substr(0, colon);
  for (char c : head) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '[' || c == ']';
    if (!ok) return {};
  }
  return head;
}

}  // namespace

ApiFormat api_format_for_path(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiFormat::kAnthropic : ApiFormat::kOpenAI;
}

ApiError bad_request(std::string message, std::string param) {
  return ApiError{400, std::move(message), std::move(param), "", {}};
}

ApiError model_not_found(const std::string& model) {
  return ApiError{404, "The model `" + model + "` does not exist (see /v1/models).", "model",
                  "model_not_found", {}};
}

ApiError error_from_status(const Status& status) {
  const std::string& m = status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
      return ApiError{400, m, param_of(m), "", {}};
    case StatusCode::kNotFound: return ApiError{404, m, "", "", {}};
    case StatusCode::kResourceExhausted: return ApiError{429, m, "", "", {{"retry-after", "1"}}};
    case StatusCode::kUnavailable:
    case StatusCode::kFailedPrecondition:
      return ApiError{503, m, "", "", {{"retry-after", "1"}}};
    case StatusCode::kCancelled: return ApiError{499, m, "", "", {}};
    default: return ApiError{500, m.empty() ? status.to_string() : m, "", "", {}};
  }
}

protocol::Json error_json(const ApiError& error, ApiFormat format) {
  using protocol::Json;
  if (format == ApiFormat::kAnthropic) {
    Json inner;
    inner["type"] = anthropic_type(error.status);
    inner["message"] = error.message;
    return Json{{"type", "error"}, {"error", std::move(inner)}};
  }
  Json inner;
  inner["message"] = error.message;
  inner["type"] = openai_type(error.status);
  inner["param"] = error.param.empty() ? Json(nullptr) : Json(error.param);
  inner["code"] = error.code.empty() ? Json(nullptr) : Json(error.code);
  return Json{{"error", std::move(inner)}};
}

HttpResponse error_response(const ApiError& error, ApiFormat format) {
  HttpResponse r;
  r.status = error.status;
  r.headers = error.headers;
  r.body = json_text(error_json(error, format));
  return r;
}

}  // namespace deepinfer::server
