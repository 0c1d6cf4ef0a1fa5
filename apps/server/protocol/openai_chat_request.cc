// Chat Completions request -> ChatRequest (see openai_chat.h). Message fields map one to one onto
// chat::Message; tools and response_format go where the official encoder renders them.
#include <algorithm>

#include "protocol/json_reader.h"
#include "protocol/openai_chat.h"
#include "protocol/request_common.h"
#include "protocol/sampling_fields.h"

namespace deepinfer::protocol {
namespace {

// content: string | null | [parts]. Image parts keep their URL in `text` for the vision stage.
Status read_content(const Json& m, const std::string& path, chat::Message* out) {
  const Json* content = member(m, "content");
  std::string content_path = json_path(path, "content");
  if (content == nullptr) return Status::ok();
  if (content->is_string()) {
    out->content = content->get<std::string>();
    return Status::ok();
  }
  if (!content->is_array()) {
    return type_error(content_path, "a string or an array of content parts", *content);
  }
  std::vector<chat::ContentPart> parts;
  for (size_t j = 0; j < content->size(); ++j) {
    const Json& part = (*content)[j];
    std::string part_path = json_path(content_path, j);
    if (!part.is_object()) return type_error(part_path, "a content part object", part);
    DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(part, "type", part_path));
    if (type == "text") {
      DI_PROTO_ASSIGN_OR_RETURN(std::string text, req_string(part, "text", part_path));
      parts.push_back({"text", std::move(text)});
    } else if (type == "refusal") {
      DI_PROTO_ASSIGN_OR_RETURN(std::string text, req_string(part, "refusal", part_path));
      parts.push_back({"text", std::move(text)});
    } else if (type == "image_url") {
      DI_PROTO_ASSIGN_OR_RETURN(const Json* image, opt_object(part, "image_url", part_path));
      if (image == nullptr) return json_error(json_path(part_path, "image_url"), "required");
      DI_PROTO_ASSIGN_OR_RETURN(std::string url, req_string(*image, "url", json_path(part_path, "image_url")));
      parts.push_back({"image", std::move(url)});
    } else {
      return json_error(json_path(part_path, "type"), "unsupported content part type \"" + type + "\"");
    }
  }
  out->parts = std::move(parts);
  return Status::ok();
}

Status read_tool_calls(const Json& m, const std::string& path, chat::Message* out) {
  DI_PROTO_ASSIGN_OR_RETURN(const Json* calls, opt_array(m, "tool_calls", path));
  if (calls == nullptr) return Status::ok();
  for (size_t k = 0; k < calls->size(); ++k) {
    const Json& call = (*calls)[k];
    std::string call_path = json_path(json_path(path, "tool_calls"), k);
    if (!call.is_object()) return type_error(call_path, "an object", call);
    chat::ToolCall tc;
    DI_PROTO_ASSIGN_OR_RETURN(auto id, opt_string(call, "id", call_path));
    tc.id = id.value_or("");
    DI_PROTO_ASSIGN_OR_RETURN(const Json* function, opt_object(call, "function", call_path));
    std::string fn_path = json_path(call_path, "function");
    if (function == nullptr) return json_error(fn_path, "required");
    DI_PROTO_ASSIGN_OR_RETURN(tc.name, req_string(*function, "name", fn_path));
    const Json* args = member(*function, "arguments");
    if (args != nullptr && args->is_string()) {
      tc.arguments = args->get<std::string>();
    } else if (args != nullptr && args->is_object()) {
      tc.arguments = dump_json(*args);
    } else if (args != nullptr) {
      return type_error(json_path(fn_path, "arguments"), "a JSON string", *args);
    }
    out->tool_calls.push_back(std::move(tc));
  }
  return Status::ok();
}

Result<chat::Message> read_message(const Json& m, const std::string& path) {
  if (!m.is_object()) return type_error(path, "a message object", m);
  DI_PROTO_ASSIGN_OR_RETURN(std::string role, req_string(m, "role", path));
  chat::Message out;
  if (role == "system" || role == "developer") {
    out.role = chat::Role::kSystem;  // OpenAI's developer message is the system prompt
  } else if (role == "user") {
    out.role = chat::Role::kUser;
  } else if (role == "assistant") {
    out.role = chat::Role::kAssistant;
  } else if (role == "tool") {
    out.role = chat::Role::kTool;
  } else {
    return json_error(json_path(path, "role"), "unsupported role \"" + role + "\"");
  }
  DI_PROTO_RETURN_IF_ERROR(read_content(m, path, &out));
  if (out.role == chat::Role::kAssistant) {
    DI_PROTO_ASSIGN_OR_RETURN(auto reasoning, opt_string(m, "reasoning", path));
    DI_PROTO_ASSIGN_OR_RETURN(auto reasoning_content, opt_string(m, "reasoning_content", path));
    out.reasoning_content = reasoning_content.value_or(reasoning.value_or(""));
    DI_PROTO_RETURN_IF_ERROR(read_tool_calls(m, path, &out));
  }
  if (out.role == chat::Role::kTool) {
    DI_PROTO_ASSIGN_OR_RETURN(out.tool_call_id, req_string(m, "tool_call_id", path));
  }
  return out;
}

Status read_tools(const Json& body, ChatRequest* r, std::vector<std::string>* schemas) {
  DI_PROTO_ASSIGN_OR_RETURN(const Json* tools, opt_array(body, "tools", ""));
  if (tools == nullptr) return Status::ok();
  for (size_t k = 0; k < tools->size(); ++k) {
    const Json& tool = (*tools)[k];
    std::string path = json_path("tools", k);
    if (!tool.is_object()) return type_error(path, "an object", tool);
    DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(tool, "type", path));
    if (type != "function") return json_error(json_path(path, "type"), "only \"function\" tools are supported");
    DI_PROTO_ASSIGN_OR_RETURN(const Json* function, opt_object(tool, "function", path));
    if (function == nullptr) return json_error(json_path(path, "function"), "required");
    DI_PROTO_ASSIGN_OR_RETURN(std::string name, req_string(*function, "name", json_path(path, "function")));
    r->tool_names.push_back(std::move(name));
    schemas->push_back(dump_json(*function));
  }
  return Status::ok();
}

Status read_tool_choice(const Json& body, ChatRequest* r) {
  const Json* choice = member(body, "tool_choice");
  if (choice == nullptr) return Status::ok();
  if (choice->is_string()) {
    std::string mode = choice->get<std::string>();
    if (mode == "auto") r->tool_choice.mode = ToolChoiceMode::kAuto;
    else if (mode == "none") r->tool_choice.mode = ToolChoiceMode::kNone;
    else if (mode == "required") r->tool_choice.mode = ToolChoiceMode::kRequired;
    else return json_error("tool_choice", "expected \"auto\", \"none\", \"required\" or a function");
    return Status::ok();
  }
  if (!choice->is_object()) return type_error("tool_choice", "a string or an object", *choice);
  DI_PROTO_ASSIGN_OR_RETURN(const Json* function, opt_object(*choice, "function", "tool_choice"));
  if (function == nullptr) return json_error("tool_choice.function", "required");
  r->tool_choice.mode = ToolChoiceMode::kNamed;
  DI_PROTO_ASSIGN_OR_RETURN(r->tool_choice.name, req_string(*function, "name", "tool_choice.function"));
  return Status::ok();
}

Status read_response_format(const Json& body, ChatRequest* r) {
  DI_PROTO_ASSIGN_OR_RETURN(const Json* format, opt_object(body, "response_format", ""));
  if (format == nullptr) return Status::ok();
  DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(*format, "type", "response_format"));
  if (type == "text") return Status::ok();
  if (type != "json_object" && type != "json_schema") {
    return json_error("response_format.type", "expected \"text\", \"json_object\" or \"json_schema\"");
  }
  r->response_format = dump_json(*format);
  return Status::ok();
}

// thinking {"type": ...}, chat_template_kwargs {thinking, enable_thinking, drop_thinking} and
// reasoning_effort, in increasing precedence for the on/off switch.
Status read_thinking(const Json& body, const ProtocolOptions& options, ChatRequest* r) {
  std::optional<bool> thinking;
  DI_PROTO_ASSIGN_OR_RETURN(const Json* t, opt_object(body, "thinking", ""));
  if (t != nullptr) {
    DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(*t, "type", "thinking"));
    if (type != "enabled" && type != "disabled") {
      return json_error("thinking.type", "expected \"enabled\" or \"disabled\"");
    }
    thinking = type == "enabled";
  }
  DI_PROTO_ASSIGN_OR_RETURN(const Json* kwargs, opt_object(body, "chat_template_kwargs", ""));
  if (kwargs != nullptr) {
    for (const char* key : {"thinking", "enable_thinking"}) {
      DI_PROTO_ASSIGN_OR_RETURN(auto v, opt_bool(*kwargs, key, "chat_template_kwargs"));
      if (v) thinking = *v;
    }
    DI_PROTO_ASSIGN_OR_RETURN(auto drop, opt_bool(*kwargs, "drop_thinking", "chat_template_kwargs"));
    if (drop) r->render.drop_thinking = *drop;
  }
  if (const Json* effort = member(body, "reasoning_effort")) {
    DI_PROTO_RETURN_IF_ERROR(apply_reasoning_effort(*effort, "reasoning_effort", r, &thinking));
  }
  set_thinking(thinking, options, r);
  return Status::ok();
}

}  // namespace

Result<ChatRequest> parse_chat_completions(const Json& body, const ProtocolOptions& options) {
  if (!body.is_object()) return type_error("body", "a JSON object", body);
  ChatRequest r;
  r.api = Api::kChatCompletions;
  r.render.family = options.family;
  DI_PROTO_ASSIGN_OR_RETURN(auto model, opt_string(body, "model", ""));
  r.model = model.value_or("");
  DI_PROTO_ASSIGN_OR_RETURN(const Json* messages, opt_array(body, "messages", ""));
  if (messages == nullptr) return json_error("messages", "required");
  r.n_client_messages = static_cast<int>(messages->size());
  for (size_t i = 0; i < messages->size(); ++i) {
    DI_PROTO_ASSIGN_OR_RETURN(chat::Message m, read_message((*messages)[i], json_path("messages", i)));
    r.messages.push_back(std::move(m));
  }
  std::vector<std::string> schemas;
  DI_PROTO_RETURN_IF_ERROR(read_tools(body, &r, &schemas));
  DI_PROTO_RETURN_IF_ERROR(read_tool_choice(body, &r));
  DI_PROTO_ASSIGN_OR_RETURN(auto parallel, opt_bool(body, "parallel_tool_calls", ""));
  r.parallel_tool_calls = parallel.value_or(true);
  DI_PROTO_RETURN_IF_ERROR(read_response_format(body, &r));
  DI_PROTO_RETURN_IF_ERROR(read_thinking(body, options, &r));
  DI_PROTO_RETURN_IF_ERROR(read_openai_sampling(body, &r.sampling));
  // vLLM's extension: logprobs of the prompt's tokens (the rendered template's); the range
  // (0..20) is SamplingParams::validate's, run by finish_request. Clamped so a huge value is
  // refused rather than wrapped into range.
  DI_PROTO_ASSIGN_OR_RETURN(auto prompt_logprobs, opt_int(body, "prompt_logprobs", ""));
  if (prompt_logprobs) {
    r.sampling.prompt_logprobs = static_cast<int32_t>(std::clamp<int64_t>(*prompt_logprobs, -1, INT32_MAX));
  }
  DI_PROTO_ASSIGN_OR_RETURN(auto stream, opt_bool(body, "stream", ""));
  r.stream = stream.value_or(false);
  DI_PROTO_ASSIGN_OR_RETURN(const Json* stream_options, opt_object(body, "stream_options", ""));
  if (stream_options != nullptr) {
    if (!r.stream) return json_error("stream_options", "only allowed when stream is true");
    DI_PROTO_ASSIGN_OR_RETURN(auto usage, opt_bool(*stream_options, "include_usage", "stream_options"));
    r.include_usage = usage.value_or(false);
  }
  attach_tools_and_format(std::move(schemas), &r);
  DI_PROTO_RETURN_IF_ERROR(finish_request(&r));
  return r;
}

}  // namespace deepinfer::protocol
