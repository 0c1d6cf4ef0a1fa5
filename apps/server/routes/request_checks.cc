// Request checks shared by the generating routes (see request_checks.h).
#include "routes/request_checks.h"

#include "json_text.h"

namespace deepinfer::server {

std::optional<ApiError> check_model(const ServerContext& ctx, const std::string& model) {
  if (ctx.serves_model(model)) return std::nullopt;
  return model_not_found(model);
}

std::optional<ApiError> check_context(const ServerContext& ctx, int64_t n_prompt_tokens,
                                      std::optional<int32_t> max_tokens) {
  int64_t limit = ctx.max_model_len;
  if (limit <= 0) return std::nullopt;
  // OpenAI's code for both; clients key on it (the message is OpenAI's wording as well).
  auto too_long = [](std::string message, std::string param) {
    ApiError e = bad_request(std::move(message), std::move(param));
    e.code = "context_length_exceeded";
    return e;
  };
  if (n_prompt_tokens >= limit) {
    return too_long("This model's maximum context length is " + std::to_string(limit) +
                           " tokens; the prompt has " + std::to_string(n_prompt_tokens) +
                           " tokens, which leaves no room to generate.",
                       "messages");
  }
  if (max_tokens && n_prompt_tokens + *max_tokens > limit) {
    return too_long("This model's maximum context length is " + std::to_string(limit) +
                           " tokens; you requested " + std::to_string(n_prompt_tokens + *max_tokens) +
                           " tokens (" + std::to_string(n_prompt_tokens) + " in the prompt, " +
                           std::to_string(*max_tokens) + " to generate). Reduce the prompt or max_tokens.",
                       "max_tokens");
  }
  return std::nullopt;
}

Ticket admit(Exchange& exchange) {
  Admission& admission = exchange.ctx.admission;
  Ticket ticket = admission.try_admit();
  if (ticket.valid()) return ticket;
  if (admission.closed()) {
    exchange.ctx.metrics.on_rejected("shutting_down");
    exchange.reply_error(ApiError{503, "The server is shutting down.", "", "", {{"retry-after", "5"}}});
  } else {
    exchange.ctx.metrics.on_rejected("queue_full");
    exchange.reply_error(ApiError{429,
                                  "Too many requests in flight (limit " + std::to_string(admission.limit()) +
                                      "); retry later.",
                                  "", "", {{"retry-after", "1"}}});
  }
  return ticket;
}

Result<std::optional<StructuredOutput>> structured_output_of(const std::string& response_format_json) {
  if (response_format_json.empty()) return std::optional<StructuredOutput>();
  Result<protocol::Json> format = parse_json_body(response_format_json);
  if (!format.is_ok()) return format.status();
  std::string type = format->value("type", "");
  if (type == "json_object") return std::optional<StructuredOutput>(StructuredOutput{StructuredOutput::Kind::kJsonObject, ""});
  if (type != "json_schema") return std::optional<StructuredOutput>();
  const protocol::Json* schema = nullptr;
  if (format->contains("json_schema") && (*format)["json_schema"].is_object() &&
      (*format)["json_schema"].contains("schema")) {
    schema = &(*format)["json_schema"]["schema"];
  } else if (format->contains("schema")) {
    schema = &(*format)["schema"];
  }
  if (schema == nullptr) {
    return Status(StatusCode::kInvalidArgument, "response_format.json_schema.schema: required");
  }
  return std::optional<StructuredOutput>(StructuredOutput{StructuredOutput::Kind::kJsonSchema, json_text(*schema)});
}

}  // namespace deepinfer::server
