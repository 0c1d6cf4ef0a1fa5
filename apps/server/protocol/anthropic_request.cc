// Anthropic Messages request -> ChatRequest (see anthropic.h). A user message's tool_result
// blocks become tool messages in front of the rest of its content (the renderer merges them back
// into one user turn); assistant text, thinking and tool_use blocks fill content, reasoning and
// tool calls.
#include "protocol/anthropic.h"
#include "protocol/json_reader.h"
#include "protocol/request_common.h"
#include "protocol/sampling_fields.h"

namespace deepinfer::protocol {
namespace {

// An image block's source as one string (URL or data URI), kept for the vision stage.
Result<chat::ContentPart> read_image(const Json& block, const std::string& path) {
  DI_PROTO_ASSIGN_OR_RETURN(const Json* source, opt_object(block, "source", path));
  if (source == nullptr) return json_error(json_path(path, "source"), "required");
  std::string source_path = json_path(path, "source");
  DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(*source, "type", source_path));
  if (type == "url") {
    DI_PROTO_ASSIGN_OR_RETURN(std::string url, req_string(*source, "url", source_path));
    return chat::ContentPart{"image", std::move(url)};
  }
  if (type != "base64") return json_error(json_path(source_path, "type"), "expected \"base64\" or \"url\"");
  DI_PROTO_ASSIGN_OR_RETURN(std::string media, req_string(*source, "media_type", source_path));
  DI_PROTO_ASSIGN_OR_RETURN(std::string data, req_string(*source, "data", source_path));
  return chat::ContentPart{"image", "data:" + media + ";base64," + data};
}

// Text / image blocks (tool_result content and user content).
Result<chat::ContentPart> read_simple_block(const Json& block, const std::string& path,
                                           const std::string& type) {
  if (type == "text") {
    DI_PROTO_ASSIGN_OR_RETURN(std::string text, req_string(block, "text", path));
    return chat::ContentPart{"text", std::move(text)};
  }
  if (type == "image") return read_image(block, path);
  return json_error(json_path(path, "type"), "unsupported content block type \"" + type + "\"");
}

Status read_tool_result(const Json& block, const std::string& path, ChatRequest* r) {
  chat::Message tool;
  tool.role = chat::Role::kTool;
  DI_PROTO_ASSIGN_OR_RETURN(tool.tool_call_id, req_string(block, "tool_use_id", path));
  const Json* content = member(block, "content");
  if (content != nullptr && content->is_string()) {
    tool.content = content->get<std::string>();
  } else if (content != nullptr && content->is_array()) {
    std::vector<chat::ContentPart> parts;
    for (size_t j = 0; j < content->size(); ++j) {
      std::string part_path = json_path(json_path(path, "content"), j);
      const Json& part = (*content)[j];
      if (!part.is_object()) return type_error(part_path, "a content block", part);
      DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(part, "type", part_path));
      DI_PROTO_ASSIGN_OR_RETURN(auto p, read_simple_block(part, part_path, type));
      parts.push_back(std::move(p));
    }
    tool.parts = std::move(parts);
  } else if (content != nullptr) {
    return type_error(json_path(path, "content"), "a string or an array", *content);
  }
  r->messages.push_back(std::move(tool));
  return Status::ok();
}

Status read_assistant_block(const Json& block, const std::string& path, const std::string& type,
                            chat::Message* m) {
  if (type == "text") {
    DI_PROTO_ASSIGN_OR_RETURN(std::string text, req_string(block, "text", path));
    m->content += text;
  } else if (type == "thinking") {
    DI_PROTO_ASSIGN_OR_RETURN(std::string thinking, req_string(block, "thinking", path));
    m->reasoning_content += thinking;
  } else if (type == "tool_use") {
    chat::ToolCall call;
    DI_PROTO_ASSIGN_OR_RETURN(call.id, req_string(block, "id", path));
    DI_PROTO_ASSIGN_OR_RETURN(call.name, req_string(block, "name", path));
    DI_PROTO_ASSIGN_OR_RETURN(const Json* input, opt_object(block, "input", path));
    call.arguments = input == nullptr ? "{}" : dump_json(*input);
    m->tool_calls.push_back(std::move(call));
  } else if (type != "redacted_thinking") {  // opaque by design: nothing to render
    return json_error(json_path(path, "type"), "unsupported content block type \"" + type + "\"");
  }
  return Status::ok();
}

Status read_message(const Json& msg, const std::string& path, ChatRequest* r) {
  if (!msg.is_object()) return type_error(path, "a message object", msg);
  DI_PROTO_ASSIGN_OR_RETURN(std::string role, req_string(msg, "role", path));
  if (role != "user" && role != "assistant") {
    return json_error(json_path(path, "role"), "expected \"user\" or \"assistant\"");
  }
  chat::Message m;
  m.role = role == "user" ? chat::Role::kUser : chat::Role::kAssistant;
  const Json* content = member(msg, "content");
  std::string content_path = json_path(path, "content");
  if (content == nullptr) return json_error(content_path, "required");
  if (content->is_string()) {
    m.content = content->get<std::string>();
    r->messages.push_back(std::move(m));
    return Status::ok();
  }
  if (!content->is_array()) return type_error(content_path, "a string or an array of blocks", *content);
  std::vector<chat::ContentPart> parts;
  for (size_t j = 0; j < content->size(); ++j) {
    const Json& block = (*content)[j];
    std::string block_path = json_path(content_path, j);
    if (!block.is_object()) return type_error(block_path, "a content block", block);
    DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(block, "type", block_path));
    if (m.role == chat::Role::kAssistant) {
      DI_PROTO_RETURN_IF_ERROR(read_assistant_block(block, block_path, type, &m));
    } else if (type == "tool_result") {
      DI_PROTO_RETURN_IF_ERROR(read_tool_result(block, block_path, r));
    } else {
      DI_PROTO_ASSIGN_OR_RETURN(auto part, read_simple_block(block, block_path, type));
      parts.push_back(std::move(part));
    }
  }
  if (m.role == chat::Role::kUser) {
    if (parts.empty() && !r->messages.empty() && r->messages.back().role == chat::Role::kTool) {
      return Status::ok();  // only tool results
    }
    m.parts = std::move(parts);
  }
  r->messages.push_back(std::move(m));
  return Status::ok();
}

Status read_system(const Json& body, ChatRequest* r) {
  const Json* system = member(body, "system");
  if (system == nullptr) return Status::ok();
  chat::Message m;
  m.role = chat::Role::kSystem;
  if (system->is_string()) {
    m.content = system->get<std::string>();
  } else if (system->is_array()) {
    std::vector<chat::ContentPart> parts;
    for (size_t j = 0; j < system->size(); ++j) {
      std::string path = json_path("system", j);
      DI_PROTO_ASSIGN_OR_RETURN(std::string text, req_string((*system)[j], "text", path));
      parts.push_back({"text", std::move(text)});
    }
    m.parts = std::move(parts);
  } else {
    return type_error("system", "a string or an array of text blocks", *system);
  }
  r->messages.push_back(std::move(m));
  return Status::ok();
}

// Anthropic tools {name, description, input_schema} -> {name, description, parameters}.
Status read_tools(const Json& body, ChatRequest* r, std::vector<std::string>* schemas) {
  DI_PROTO_ASSIGN_OR_RETURN(const Json* tools, opt_array(body, "tools", ""));
  if (tools == nullptr) return Status::ok();
  for (size_t k = 0; k < tools->size(); ++k) {
    const Json& tool = (*tools)[k];
    std::string path = json_path("tools", k);
    if (!tool.is_object()) return type_error(path, "an object", tool);
    DI_PROTO_ASSIGN_OR_RETURN(auto type, opt_string(tool, "type", path));
    if (type && *type != "custom") {
      return json_error(json_path(path, "type"), "server tool \"" + *type + "\" is not supported");
    }
    DI_PROTO_ASSIGN_OR_RETURN(std::string name, req_string(tool, "name", path));
    Json function = Json::object();
    function["name"] = name;
    if (const Json* d = member(tool, "description")) function["description"] = *d;
    DI_PROTO_ASSIGN_OR_RETURN(const Json* schema, opt_object(tool, "input_schema", path));
    if (schema == nullptr) return json_error(json_path(path, "input_schema"), "required");
    function["parameters"] = *schema;
    r->tool_names.push_back(std::move(name));
    schemas->push_back(dump_json(function));
  }
  return Status::ok();
}

Status read_choice_and_thinking(const Json& body, const ProtocolOptions& options, ChatRequest* r) {
  DI_PROTO_ASSIGN_OR_RETURN(const Json* choice, opt_object(body, "tool_choice", ""));
  if (choice != nullptr) {
    DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(*choice, "type", "tool_choice"));
    if (type == "auto") r->tool_choice.mode = ToolChoiceMode::kAuto;
    else if (type == "any") r->tool_choice.mode = ToolChoiceMode::kRequired;
    else if (type == "none") r->tool_choice.mode = ToolChoiceMode::kNone;
    else if (type == "tool") r->tool_choice.mode = ToolChoiceMode::kNamed;
    else return json_error("tool_choice.type", "expected \"auto\", \"any\", \"tool\" or \"none\"");
    if (type == "tool") {
      DI_PROTO_ASSIGN_OR_RETURN(r->tool_choice.name, req_string(*choice, "name", "tool_choice"));
    }
    DI_PROTO_ASSIGN_OR_RETURN(auto serial, opt_bool(*choice, "disable_parallel_tool_use", "tool_choice"));
    r->parallel_tool_calls = !serial.value_or(false);
  }
  std::optional<bool> thinking;
  DI_PROTO_ASSIGN_OR_RETURN(const Json* t, opt_object(body, "thinking", ""));
  if (t != nullptr) {
    DI_PROTO_ASSIGN_OR_RETURN(std::string type, req_string(*t, "type", "thinking"));
    if (type != "enabled" && type != "disabled" && type != "adaptive") {
      return json_error("thinking.type", "expected \"enabled\", \"adaptive\" or \"disabled\"");
    }
    thinking = type != "disabled";
  }
  DI_PROTO_ASSIGN_OR_RETURN(const Json* config, opt_object(body, "output_config", ""));
  if (config != nullptr) {
    if (const Json* effort = member(*config, "effort")) {
      DI_PROTO_RETURN_IF_ERROR(apply_reasoning_effort(*effort, "output_config.effort", r, &thinking));
    }
  }
  set_thinking(thinking, options, r);
  return Status::ok();
}

}  // namespace

Result<ChatRequest> parse_anthropic_messages(const Json& body, const ProtocolOptions& options) {
  if (!body.is_object()) return type_error("body", "a JSON object", body);
  ChatRequest r;
  r.api = Api::kAnthropicMessages;
  r.render.family = options.family;
  DI_PROTO_ASSIGN_OR_RETURN(auto model, opt_string(body, "model", ""));
  r.model = model.value_or("");
  DI_PROTO_RETURN_IF_ERROR(read_system(body, &r));
  DI_PROTO_ASSIGN_OR_RETURN(const Json* messages, opt_array(body, "messages", ""));
  if (messages == nullptr) return json_error("messages", "required");
  r.n_client_messages = static_cast<int>(messages->size());
  for (size_t i = 0; i < messages->size(); ++i) {
    DI_PROTO_RETURN_IF_ERROR(read_message((*messages)[i], json_path("messages", i), &r));
  }
  if (!r.messages.empty() && r.messages.back().role == chat::Role::kAssistant) {
    r.messages.back().wo_eos = true;  // prefill: the reply continues this turn
    r.continue_final_message = true;
  }
  std::vector<std::string> schemas;
  DI_PROTO_RETURN_IF_ERROR(read_tools(body, &r, &schemas));
  DI_PROTO_RETURN_IF_ERROR(read_choice_and_thinking(body, options, &r));
  DI_PROTO_RETURN_IF_ERROR(read_anthropic_sampling(body, &r.sampling));
  DI_PROTO_ASSIGN_OR_RETURN(auto stream, opt_bool(body, "stream", ""));
  r.stream = stream.value_or(false);
  attach_tools_and_format(std::move(schemas), &r);
  DI_PROTO_RETURN_IF_ERROR(finish_request(&r));
  return r;
}

}  // namespace deepinfer::protocol
