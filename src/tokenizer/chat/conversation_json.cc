// parse_chat_json: a conversation in the official encoder's JSON form -> Messages + options.
// Read with Python semantics (py_json) so tools and response formats re-serialize exactly.
// Unknown message fields are ignored (like the reference's dict lookups); unknown top-level
// fields are rejected, to catch misspelled options.
#include <fmt/format.h>

#include "deepinfer/chat.h"
#include "tokenizer/chat/py_json.h"

namespace deepinfer::chat {
namespace {

using pyjson::Value;
using Type = Value::Type;

Status type_error(const std::string& path, std::string_view expected) {
  return invalid_argument("{}: expected {}", path, expected);
}

// A string field that may be absent or null ("" then).
Status read_string(const Value& obj, std::string_view key, const std::string& path,
                   std::string* out) {
  const Value* v = obj.find(key);
  if (v == nullptr || v->type == Type::kNull) return Status::ok();
  if (!v->is_string()) return type_error(fmt::format("{}.{}", path, key), "a string or null");
  *out = v->text;
  return Status::ok();
}

Result<std::vector<ContentPart>> read_parts(const Value& list, const std::string& path) {
  std::vector<ContentPart> parts;
  for (size_t j = 0; j < list.items.size(); ++j) {
    const Value& item = list.items[j];
    std::string item_path = fmt::format("{}[{}]", path, j);
    if (!item.is_object()) return type_error(item_path, "an object");
    ContentPart part;
    DI_RETURN_IF_ERROR(read_string(item, "type", item_path, &part.type));
    if (part.type.empty()) return type_error(item_path + ".type", "a non-empty string");
    if (part.type == "image_url" || part.type == "input_image") part.type = "image";
    if (part.type == "text") DI_RETURN_IF_ERROR(read_string(item, "text", item_path, &part.text));
    parts.push_back(std::move(part));
  }
  return parts;
}

Result<std::vector<ToolCall>> read_tool_calls(const Value& list, const std::string& path) {
  std::vector<ToolCall> calls;
  for (size_t k = 0; k < list.items.size(); ++k) {
    const Value& item = list.items[k];
    std::string item_path = fmt::format("{}[{}]", path, k);
    if (!item.is_object()) return type_error(item_path, "an object");
    ToolCall call;
    DI_RETURN_IF_ERROR(read_string(item, "id", item_path, &call.id));
    const Value* function = item.find("function");
    if (function == nullptr || !function->is_object()) {
      return type_error(item_path + ".function", "an object");
    }
    DI_RETURN_IF_ERROR(read_string(*function, "name", item_path + ".function", &call.name));
    if (call.id.empty()) {
      DI_RETURN_IF_ERROR(read_string(*function, "id", item_path + ".function", &call.id));
    }
    const Value* args = function->find("arguments");
    if (args != nullptr && args->is_string()) {
      call.arguments = args->text;
    } else if (args != nullptr && args->is_object()) {
      call.arguments = pyjson::dump(*args);  // a dict given directly: rendered per key
    } else if (args != nullptr && args->type != Type::kNull) {
      return type_error(item_path + ".function.arguments", "a JSON string or an object");
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

Result<std::vector<std::string>> read_tools(const Value& list, const std::string& path) {
  if (!list.is_array()) return type_error(path, "a list of tools");
  std::vector<std::string> tools;
  for (size_t k = 0; k < list.items.size(); ++k) {
    const Value& tool = list.items[k];
    std::string item_path = fmt::format("{}[{}]", path, k);
    if (!tool.is_object()) return type_error(item_path, "an object");
    const Value* function = tool.find("function");
    if (function == nullptr) {
      if (tool.find("name") == nullptr) return type_error(item_path + ".function", "an object");
      function = &tool;  // a bare function schema
    }
    if (!function->is_object()) return type_error(item_path + ".function", "an object");
    tools.push_back(pyjson::dump(*function));
  }
  return tools;
}

Status read_content(const Value& obj, const std::string& path, Message* m) {
  const Value* content = obj.find("content");
  if (content == nullptr || content->type == Type::kNull) return Status::ok();
  if (content->is_string()) {
    m->content = content->text;
    return Status::ok();
  }
  if (!content->is_array()) return type_error(path + ".content", "a string, a list or null");
  DI_ASSIGN_OR_RETURN(auto parts, read_parts(*content, path + ".content"));
  m->parts = std::move(parts);
  return Status::ok();
}

Result<Message> read_message(const Value& obj, const std::string& path) {
  if (!obj.is_object()) return type_error(path, "a message object");
  Message m;
  std::string role;
  DI_RETURN_IF_ERROR(read_string(obj, "role", path, &role));
  std::optional<Role> parsed_role = role_from_name(role);
  if (!parsed_role) return invalid_argument("{}.role: unknown role '{}'", path, role);
  m.role = *parsed_role;
  DI_RETURN_IF_ERROR(read_content(obj, path, &m));
  DI_RETURN_IF_ERROR(read_string(obj, "reasoning", path, &m.reasoning_content));
  DI_RETURN_IF_ERROR(read_string(obj, "reasoning_content", path, &m.reasoning_content));
  DI_RETURN_IF_ERROR(read_string(obj, "tool_call_id", path, &m.tool_call_id));
  DI_RETURN_IF_ERROR(read_string(obj, "task", path, &m.task));
  if (const Value* v = obj.find("tool_calls"); v != nullptr && v->type != Type::kNull) {
    if (!v->is_array()) return type_error(path + ".tool_calls", "a list or null");
    DI_ASSIGN_OR_RETURN(m.tool_calls, read_tool_calls(*v, path + ".tool_calls"));
  }
  if (const Value* v = obj.find("tools"); v != nullptr && v->type != Type::kNull) {
    DI_ASSIGN_OR_RETURN(m.tools, read_tools(*v, path + ".tools"));
  }
  if (const Value* v = obj.find("response_format"); v != nullptr && v->type != Type::kNull) {
    m.response_format = pyjson::dump(*v);
  }
  if (const Value* v = obj.find("wo_eos"); v != nullptr && v->type != Type::kNull) {
    if (v->type != Type::kBool) return type_error(path + ".wo_eos", "a boolean");
    m.wo_eos = v->boolean;
  }
  return m;
}

Status read_effort(const Value& v, ReasoningEffort* out) {
  if (v.type == Type::kNull) return Status::ok();
  if (v.is_string()) {
    out->name = v.text;
    return Status::ok();
  }
  if (v.type == Type::kInt && v.text.size() <= 4) {
    out->level = std::stoi(v.text);
    if (out->level != 0) return Status::ok();
  }
  return type_error("reasoning_effort", "null, a name or an integer 1..100");
}

Status read_bool(const Value& v, std::string_view key, bool* out) {
  if (v.type != Type::kBool) return type_error(std::string(key), "a boolean");
  *out = v.boolean;
  return Status::ok();
}

Status read_options(const Value& root, ChatInput* input, const Value** tools) {
  for (const auto& [key, v] : root.members) {
    RenderOptions& o = input->options;
    if (key == "messages") continue;
    if (key == "tools") {
      *tools = &v;
    } else if (key == "thinking_mode") {
      if (!v.is_string() || (v.text != "chat" && v.text != "thinking")) {
        return type_error("thinking_mode", "\"chat\" or \"thinking\"");
      }
      o.thinking_mode = v.text == "thinking" ? ThinkingMode::kThinking : ThinkingMode::kChat;
    } else if (key == "reasoning_effort") {
      DI_RETURN_IF_ERROR(read_effort(v, &o.reasoning_effort));
    } else if (key == "drop_thinking") {
      DI_RETURN_IF_ERROR(read_bool(v, key, &o.drop_thinking));
    } else if (key == "add_bos" || key == "add_default_bos_token") {
      DI_RETURN_IF_ERROR(read_bool(v, key, &o.add_bos));
    } else {
      return invalid_argument("{}: unknown field (expected messages, tools, thinking_mode, "
                              "reasoning_effort, drop_thinking, add_bos)",
                              key);
    }
  }
  return Status::ok();
}

// Top-level tools go where the official test puts them (the first message) when that message
// can carry tools, else into a new empty system message in front.
Status attach_tools(const Value& tools, ChatInput* input) {
  DI_ASSIGN_OR_RETURN(std::vector<std::string> schemas, read_tools(tools, "tools"));
  auto& messages = input->messages;
  if (messages.empty() ||
      (messages[0].role != Role::kSystem && messages[0].role != Role::kDeveloper)) {
    Message system;
    system.role = Role::kSystem;
    messages.insert(messages.begin(), std::move(system));
  }
  messages[0].tools = std::move(schemas);
  return Status::ok();
}

}  // namespace

Result<ChatInput> parse_chat_json(std::string_view json_text, ModelFamily family) {
  DI_ASSIGN_OR_RETURN(Value root, pyjson::parse(json_text));
  ChatInput input;
  input.options.family = family;
  const Value* list = &root;
  const Value* tools = nullptr;
  if (root.is_object()) {
    list = root.find("messages");
    if (list == nullptr) return invalid_argument("messages: missing");
    DI_RETURN_IF_ERROR(read_options(root, &input, &tools));
  }
  if (!list->is_array()) return type_error("messages", "a list of messages");
  for (size_t i = 0; i < list->items.size(); ++i) {
    DI_ASSIGN_OR_RETURN(Message m, read_message(list->items[i], fmt::format("messages[{}]", i)));
    input.messages.push_back(std::move(m));
  }
  if (tools != nullptr && tools->type != Type::kNull) DI_RETURN_IF_ERROR(attach_tools(*tools, &input));
  return input;
}

}  // namespace deepinfer::chat
