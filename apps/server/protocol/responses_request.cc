// Responses request -> ChatRequest (see responses.h). Input items become messages: message items
// keep their role, a reasoning item starts an assistant turn that the following assistant message
// and function_call items complete, function_call_output items become tool messages.
#include "protocol/json_reader.h"
#include "protocol/request_common.h"
#include "protocol/responses.h"
#include "protocol/sampling_fields.h"

namespace deepinfer::protocol {
namespace {

// An assistant turn that can still take content (nothing but reasoning so far).
bool open_assistant(const std::vector<chat::Message>& messages) {
  return !messages.empty() && messages.back().role == chat::Role::kAssistant &&
         messages.back().content.empty() && !messages.back().parts &&
         messages.back().tool_calls.empty();
}

Result<std::vector<chat::ContentPart>> read_parts(const Json& list, const std::string& path) {
  std::vector<chat::ContentPart> parts;
  for (size_t j = 0; j < list.size(); ++j) {
    const Json& part = list[j];
    std::string part_path = json_path(path, j);
    if (!part.is_object()) return type_error(part_path, "a content part object", part);
    DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(part, "type", part_path));
    if (type == "input_text" || type == "output_text" || type == "text") {
      DI_PROTO_ASSIGN_OR_RETURN(std::string text, req_string(part, "text", part_path));
      parts.push_back({"text", std::move(text)});
    } else if (type == "refusal") {
      DI_PROTO_ASSIGN_OR_RETURN(std::string text, req_string(part, "refusal", part_path));
      parts.push_back({"text", std::move(text)});
    } else if (type == "input_image") {
      DI_PROTO_ASSIGN_OR_RETURN(auto url, opt_string(part, "image_url", part_path));
      parts.push_back({"image", url.value_or("")});
    } else {
      return json_error(json_path(part_path, "type"), "unsupported content type \"" + type + "\"");
    }
  }
  return parts;
}

// content: string | [parts]; a single text part list is kept as a list (rendered the same).
Status read_content(const Json& item, const std::string& path, chat::Message* m) {
  const Json* content = member(item, "content");
  if (content == nullptr) return Status::ok();
  if (content->is_string()) {
    m->content = content->get<std::string>();
    return Status::ok();
  }
  if (!content->is_array()) return type_error(json_path(path, "content"), "a string or an array", *content);
  DI_PROTO_ASSIGN_OR_RETURN(auto parts, read_parts(*content, json_path(path, "content")));
  m->parts = std::move(parts);
  return Status::ok();
}

Status read_message_item(const Json& item, const std::string& path, ChatRequest* r) {
  DI_PROTO_ASSIGN_OR_RETURN(std::string role, req_string(item, "role", path));
  chat::Message m;
  if (role == "user") m.role = chat::Role::kUser;
  else if (role == "assistant") m.role = chat::Role::kAssistant;
  else if (role == "system" || role == "developer") m.role = chat::Role::kSystem;
  else return json_error(json_path(path, "role"), "unsupported role \"" + role + "\"");
  DI_PROTO_RETURN_IF_ERROR(read_content(item, path, &m));
  if (m.role == chat::Role::kAssistant && open_assistant(r->messages)) {
    r->messages.back().content = std::move(m.content);
    r->messages.back().parts = std::move(m.parts);
    return Status::ok();
  }
  r->messages.push_back(std::move(m));
  return Status::ok();
}

Status read_function_call(const Json& item, const std::string& path, ChatRequest* r) {
  chat::ToolCall call;
  DI_PROTO_ASSIGN_OR_RETURN(call.id, req_string(item, "call_id", path));
  DI_PROTO_ASSIGN_OR_RETURN(call.name, req_string(item, "name", path));
  DI_PROTO_ASSIGN_OR_RETURN(call.arguments, req_string(item, "arguments", path));
  if (r->messages.empty() || r->messages.back().role != chat::Role::kAssistant) {
    chat::Message m;
    m.role = chat::Role::kAssistant;
    r->messages.push_back(std::move(m));
  }
  r->messages.back().tool_calls.push_back(std::move(call));
  return Status::ok();
}

Status read_function_output(const Json& item, const std::string& path, ChatRequest* r) {
  chat::Message m;
  m.role = chat::Role::kTool;
  DI_PROTO_ASSIGN_OR_RETURN(m.tool_call_id, req_string(item, "call_id", path));
  const Json* output = member(item, "output");
  if (output == nullptr) return json_error(json_path(path, "output"), "required");
  if (output->is_string()) {
    m.content = output->get<std::string>();
  } else if (output->is_array()) {
    DI_PROTO_ASSIGN_OR_RETURN(auto parts, read_parts(*output, json_path(path, "output")));
    m.parts = std::move(parts);
  } else {
    return type_error(json_path(path, "output"), "a string or an array", *output);
  }
  r->messages.push_back(std::move(m));
  return Status::ok();
}

// The reasoning text: its content (reasoning_text parts), else its summary, joined by blank lines.
Status read_reasoning(const Json& item, const std::string& path, ChatRequest* r) {
  std::string text;
  for (const char* key : {"content", "summary"}) {
    DI_PROTO_ASSIGN_OR_RETURN(const Json* list, opt_array(item, key, path));
    if (list == nullptr || list->empty()) continue;
    for (size_t j = 0; j < list->size(); ++j) {
      DI_PROTO_ASSIGN_OR_RETURN(std::string part, req_string((*list)[j], "text", json_path(json_path(path, key), j)));
      if (j > 0) text += "\n\n";
      text += part;
    }
    break;
  }
  if (!open_assistant(r->messages) || !r->messages.back().reasoning_content.empty()) {
    chat::Message m;
    m.role = chat::Role::kAssistant;
    r->messages.push_back(std::move(m));
  }
  r->messages.back().reasoning_content = std::move(text);
  return Status::ok();
}

Status read_input(const Json& body, ChatRequest* r) {
  const Json* input = member(body, "input");
  if (input == nullptr) return json_error("input", "required");
  if (input->is_string()) {
    chat::Message m;
    m.content = input->get<std::string>();
    r->messages.push_back(std::move(m));
    return Status::ok();
  }
  if (!input->is_array()) return type_error("input", "a string or an array of items", *input);
  for (size_t i = 0; i < input->size(); ++i) {
    const Json& item = (*input)[i];
    std::string path = json_path("input", i);
    if (!item.is_object()) return type_error(path, "an input item object", item);
    DI_PROTO_ASSIGN_OR_RETURN(auto type, opt_string(item, "type", path));
    std::string t = type.value_or("message");
    if (t == "message") DI_PROTO_RETURN_IF_ERROR(read_message_item(item, path, r));
    else if (t == "function_call") DI_PROTO_RETURN_IF_ERROR(read_function_call(item, path, r));
    else if (t == "function_call_output") DI_PROTO_RETURN_IF_ERROR(read_function_output(item, path, r));
    else if (t == "reasoning") DI_PROTO_RETURN_IF_ERROR(read_reasoning(item, path, r));
    else return json_error(json_path(path, "type"), "unsupported input item type \"" + t + "\"");
  }
  return Status::ok();
}

// Responses tools are flat: {"type": "function", "name", "description", "parameters", "strict"};
// the function schema is the object without "type".
Status read_tools(const Json& body, ChatRequest* r, std::vector<std::string>* schemas) {
  DI_PROTO_ASSIGN_OR_RETURN(const Json* tools, opt_array(body, "tools", ""));
  if (tools == nullptr) return Status::ok();
  for (size_t k = 0; k < tools->size(); ++k) {
    const Json& tool = (*tools)[k];
    std::string path = json_path("tools", k);
    if (!tool.is_object()) return type_error(path, "an object", tool);
    DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(tool, "type", path));
    if (type != "function") return json_error(json_path(path, "type"), "only \"function\" tools are supported");
    DI_PROTO_ASSIGN_OR_RETURN(std::string name, req_string(tool, "name", path));
    r->tool_names.push_back(std::move(name));
    Json function = Json::object();
    for (const auto& [key, value] : tool.items()) {
      if (key != "type") function[key] = value;
    }
    schemas->push_back(dump_json(function));
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
  r->tool_choice.mode = ToolChoiceMode::kNamed;
  DI_PROTO_ASSIGN_OR_RETURN(r->tool_choice.name, req_string(*choice, "name", "tool_choice"));
  return Status::ok();
}

Status read_options(const Json& body, const ProtocolOptions& options, ChatRequest* r) {
  if (member(body, "previous_response_id") != nullptr) {
    return json_error("previous_response_id", "not supported: send the whole conversation in input");
  }
  std::optional<bool> thinking;
  DI_PROTO_ASSIGN_OR_RETURN(const Json* reasoning, opt_object(body, "reasoning", ""));
  if (reasoning != nullptr) {
    if (const Json* effort = member(*reasoning, "effort")) {
      DI_PROTO_RETURN_IF_ERROR(apply_reasoning_effort(*effort, "reasoning.effort", r, &thinking));
    }
  }
  DI_PROTO_ASSIGN_OR_RETURN(const Json* t, opt_object(body, "thinking", ""));
  if (t != nullptr) {
    DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(*t, "type", "thinking"));
    thinking = type == "enabled";
  }
  set_thinking(thinking, options, r);
  DI_PROTO_ASSIGN_OR_RETURN(const Json* text, opt_object(body, "text", ""));
  if (text != nullptr) {
    DI_PROTO_ASSIGN_OR_RETURN(const Json* format, opt_object(*text, "format", "text"));
    if (format != nullptr) {
      DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(*format, "type", "text.format"));
      if (type != "text" && type != "json_object" && type != "json_schema") {
        return json_error("text.format.type", "expected \"text\", \"json_object\" or \"json_schema\"");
      }
      if (type != "text") r->response_format = dump_json(*format);
    }
  }
  DI_PROTO_ASSIGN_OR_RETURN(auto stream, opt_bool(body, "stream", ""));
  r->stream = stream.value_or(false);
  return Status::ok();
}

}  // namespace

Result<ChatRequest> parse_responses(const Json& body, const ProtocolOptions& options) {
  if (!body.is_object()) return type_error("body", "a JSON object", body);
  ChatRequest r;
  r.api = Api::kResponses;
  r.render.family = options.family;
  DI_PROTO_ASSIGN_OR_RETURN(auto model, opt_string(body, "model", ""));
  r.model = model.value_or("");
  DI_PROTO_ASSIGN_OR_RETURN(auto instructions, opt_string(body, "instructions", ""));
  r.instructions = instructions;
  if (instructions) {
    chat::Message system;
    system.role = chat::Role::kSystem;
    system.content = *instructions;
    r.messages.push_back(std::move(system));
  }
  DI_PROTO_RETURN_IF_ERROR(read_input(body, &r));
  std::vector<std::string> schemas;
  DI_PROTO_RETURN_IF_ERROR(read_tools(body, &r, &schemas));
  DI_PROTO_RETURN_IF_ERROR(read_tool_choice(body, &r));
  DI_PROTO_ASSIGN_OR_RETURN(auto parallel, opt_bool(body, "parallel_tool_calls", ""));
  r.parallel_tool_calls = parallel.value_or(true);
  DI_PROTO_RETURN_IF_ERROR(read_options(body, options, &r));
  DI_PROTO_RETURN_IF_ERROR(read_responses_sampling(body, &r.sampling));
  attach_tools_and_format(std::move(schemas), &r);
  DI_PROTO_RETURN_IF_ERROR(finish_request(&r));
  return r;
}

}  // namespace deepinfer::protocol
