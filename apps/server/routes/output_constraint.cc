// Chat request -> the engine's StructuredOutput (see output_constraint.h).
#include "routes/output_constraint.h"

#include "json_text.h"
#include "routes/request_checks.h"

namespace deepinfer::server {
namespace {

using protocol::Json;
using protocol::ToolChoiceMode;

// The grammar engine's limit for parameters in any order (JsonSchemaGrammarOptions::
// max_any_order_properties); a tool with more makes the whole grammar use schema order.
constexpr size_t kMaxAnyOrderParameters = 10;

// OpenAI: "omitting parameters defines a function with an empty parameter list".
const char* kNoParameters =
    R"({"type": "object", "properties": {}, "additionalProperties": false})";

Result<Json> parameters_of(const std::string& function_json, size_t index) {
  Result<Json> function = parse_json_body(function_json);
  if (!function.is_ok()) return function.status();
  const Json* params = function->contains("parameters") ? &(*function)["parameters"] : nullptr;
  if (params == nullptr || params->is_null()) return Json::parse(kNoParameters);
  if (!params->is_object()) {
    return Status(
        StatusCode::kInvalidArgument,
        "tools[" + std::to_string(index) + "]: the parameters must be a JSON schema object");
  }
  return *params;
}

// The output starts with reasoning closed by </think>: thinking mode, except a continued assistant
// turn (Anthropic prefill), whose reasoning is closed already (protocol::parser_options agrees).
bool reasoning_first(const protocol::ChatRequest& request) {
  return request.render.thinking_mode == chat::ThinkingMode::kThinking && !request.continue_final_message;
}

}  // namespace

Result<std::optional<StructuredOutput>> tool_call_constraint(const protocol::ChatRequest& request) {
  const protocol::ToolChoice& choice = request.tool_choice;
  const bool forced =
      choice.mode == ToolChoiceMode::kRequired || choice.mode == ToolChoiceMode::kNamed;
  const bool no_tools = request.tool_names.empty() || choice.mode == ToolChoiceMode::kNone;
  if (no_tools || (!forced && request.parallel_tool_calls)) return std::optional<StructuredOutput>();
  Json tools = Json::array();
  bool any_order = true;
  for (size_t i = 0; i < request.tool_names.size() && i < request.tool_schemas.size(); ++i) {
    if (choice.mode == ToolChoiceMode::kNamed && request.tool_names[i] != choice.name) continue;
    Result<Json> params = parameters_of(request.tool_schemas[i], i);
    if (!params.is_ok()) return params.status();
    const Json* properties = params->contains("properties") ? &(*params)["properties"] : nullptr;
    if (properties != nullptr && properties->is_object() &&
        properties->size() > kMaxAnyOrderParameters) {
      any_order = false;
    }
    tools.push_back(
        Json{{"name", request.tool_names[i]}, {"parameters", std::move(params).value()}});
  }
  Json spec{{"tools", std::move(tools)},
            {"required", forced},
            {"thinking", reasoning_first(request)},
            {"allow_content", !forced},
            {"parallel_calls", request.parallel_tool_calls},
            {"v41_tags", request.render.family == chat::ModelFamily::kV41},
            {"any_order", any_order}};
  return std::optional<StructuredOutput>(
      StructuredOutput{StructuredOutput::Kind::kDsmlToolCalls, json_text(spec)});
}

Result<std::optional<StructuredOutput>> output_constraint(const protocol::ChatRequest& request) {
  if (request.response_format.empty()) return tool_call_constraint(request);
  Result<std::optional<StructuredOutput>> format = structured_output_of(request.response_format);
  // The format applies to the answer: the reasoning before </think> stays free text.
  if (format.is_ok() && format->has_value()) (*format)->after_reasoning = reasoning_first(request);
  return format;
}

}  // namespace deepinfer::server
