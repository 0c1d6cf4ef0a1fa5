// Protocol-neutral request helpers (chat_request.h, request_common.h).
#include <algorithm>

#include "protocol/json_reader.h"
#include "protocol/request_common.h"

namespace deepinfer::protocol {

Result<std::vector<int32_t>> prompt_ids(const ChatRequest& request, const Tokenizer& tokenizer,
                                        std::vector<std::string>* images) {
  return chat::render_ids(request.messages, request.render, tokenizer, images);
}

chat::ParserOptions parser_options(const ChatRequest& request, const ResponseMeta& meta) {
  chat::ParserOptions o;
  o.family = request.render.family;
  o.thinking_mode = request.render.thinking_mode;
  // A continued assistant turn already has its reasoning closed: the output is content.
  if (request.continue_final_message) o.thinking_mode = chat::ThinkingMode::kChat;
  std::string prefix = request.api == Api::kAnthropicMessages ? "toolu_" : "call_";
  o.tool_call_id_prefix = prefix + id_suffix(meta.id) + "_";
  return o;
}

Usage usage_of(const chat::ParsedOutput& output, int n_prompt_tokens) {
  return Usage{n_prompt_tokens, output.n_tokens, output.n_reasoning_tokens};
}

std::string id_suffix(const std::string& id) {
  for (std::string_view prefix : {"chatcmpl-", "resp_", "msg_"}) {
    if (id.starts_with(prefix)) return id.substr(prefix.size());
  }
  return id;
}

Status apply_reasoning_effort(const Json& value, const std::string& path, ChatRequest* request,
                              std::optional<bool>* thinking) {
  bool v41 = request->render.family == chat::ModelFamily::kV41;
  chat::ReasoningEffort& effort = request->render.reasoning_effort;
  if (value.is_number_integer()) {
    int64_t level = value.get<int64_t>();
    if (!v41) return json_error(path, "an integer effort needs model family v41");
    if (level < 1 || level > 100) return json_error(path, "must be within 1..100");
    effort = {"", static_cast<int>(level)};
    return Status::ok();
  }
  if (!value.is_string()) return type_error(path, "a string", value);
  std::string name = value.get<std::string>();
  if (name == "none") {
    *thinking = false;
  } else if (name == "minimal" || name == "low") {
    effort.name = v41 ? "low" : "";
  } else if (name == "medium" || name == "high") {
    effort.name = "high";
  } else if (name == "xhigh" || name == "max") {
    effort.name = "max";
  } else {
    return json_error(path, "unknown effort \"" + name +
                                "\" (expected none, minimal, low, medium, high, xhigh or max)");
  }
  return Status::ok();
}

void set_thinking(std::optional<bool> thinking, const ProtocolOptions& options,
                  ChatRequest* request) {
  bool on = thinking.value_or(options.thinking_by_default);
  request->render.thinking_mode = on ? chat::ThinkingMode::kThinking : chat::ThinkingMode::kChat;
}

void attach_tools_and_format(std::vector<std::string> tool_schemas, ChatRequest* request) {
  request->tool_schemas = tool_schemas;  // for the tool-call grammar
  bool with_tools = !tool_schemas.empty() && request->tool_choice.mode != ToolChoiceMode::kNone;
  if (!with_tools && request->response_format.empty()) return;
  auto& messages = request->messages;
  if (messages.empty() || messages[0].role != chat::Role::kSystem) {
    chat::Message system;
    system.role = chat::Role::kSystem;
    messages.insert(messages.begin(), std::move(system));
  }
  if (with_tools) messages[0].tools = std::move(tool_schemas);
  if (!request->response_format.empty()) messages[0].response_format = request->response_format;
}

Status finish_request(ChatRequest* request) {
  const ToolChoice& choice = request->tool_choice;
  if (choice.mode == ToolChoiceMode::kNamed &&
      std::find(request->tool_names.begin(), request->tool_names.end(), choice.name) ==
          request->tool_names.end()) {
    return json_error("tool_choice", "names tool \"" + choice.name + "\", which is not in tools");
  }
  if (choice.mode == ToolChoiceMode::kRequired && request->tool_names.empty()) {
    return json_error("tool_choice", "\"required\" needs at least one tool");
  }
  // Both would constrain the whole output: a JSON document cannot also be a tool call.
  if ((choice.mode == ToolChoiceMode::kRequired || choice.mode == ToolChoiceMode::kNamed) &&
      !request->response_format.empty()) {
    std::string what = choice.mode == ToolChoiceMode::kRequired ? "\"required\"" : "a named tool";
    std::string format = request->api == Api::kResponses ? "text.format" : "response_format";
    return json_error("tool_choice", what + " cannot be combined with " + format +
                                         " (both constrain the whole output); send one of them");
  }
  Status sampling = request->sampling.validate();
  if (!sampling.is_ok()) return sampling;
  return Status::ok();
}

}  // namespace deepinfer::protocol
