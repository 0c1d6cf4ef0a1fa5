// Checks and conversions every generating route applies before the engine sees a request: the
// model name, the context-length limit (400 naming it), admission (429 + Retry-After), and
// response_format -> the engine's StructuredOutput.
#pragma once

#include <optional>
#include <string>

#include "admission.h"
#include "api_error.h"
#include "deepinfer/engine.h"
#include "exchange.h"
#include "protocol/chat_request.h"

namespace deepinfer::server {

std::optional<ApiError> check_model(const ServerContext& ctx, const std::string& model);

// The prompt must leave room for at least one token, and prompt + max_tokens must fit in the
// model's context (the error names both numbers and the limit, as OpenAI's does).
std::optional<ApiError> check_context(const ServerContext& ctx, int64_t n_prompt_tokens,
                                      std::optional<int32_t> max_tokens);

// A ticket, or an invalid one after answering 429 (queue full) / 503 (shutting down).
Ticket admit(Exchange& exchange);

// json_object / json_schema (Chat Completions' {"json_schema": {"schema"}} or Responses' flat
// {"schema"}) -> StructuredOutput; nullopt for free text.
Result<std::optional<StructuredOutput>> structured_output_of(const std::string& response_format_json);

}  // namespace deepinfer::server
