// Parser events -> Responses API objects and events (see responses.h). Output items appear in the
// order the model produced them: reasoning, message, function calls. Item ids derive from the
// response id: rs_<id>, msg_<id>, fc_<id>_<n>.
#include <fmt/format.h>

#include <string>

#include "protocol/json_reader.h"
#include "protocol/responses.h"

namespace deepinfer::protocol {
namespace {

Json usage_json(const Usage& usage) {
  Json u;
  u["input_tokens"] = usage.n_prompt_tokens;
  u["input_tokens_details"] = Json{{"cached_tokens", 0}};
  u["output_tokens"] = usage.n_completion_tokens;
  u["output_tokens_details"] = Json{{"reasoning_tokens", usage.n_reasoning_tokens}};
  u["total_tokens"] = usage.n_prompt_tokens + usage.n_completion_tokens;
  return u;
}

Json reasoning_item(const std::string& id, const std::string& text) {
  Json item;
  item["id"] = id;
  item["type"] = "reasoning";
  item["summary"] = Json::array();
  item["content"] = Json::array({Json{{"type", "reasoning_text"}, {"text", text}}});
  return item;
}

Json output_text_part(const std::string& text) {
  return Json{{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
}

Json message_item(const std::string& id, const char* status, Json content) {
  Json item;
  item["id"] = id;
  item["type"] = "message";
  item["status"] = status;
  item["role"] = "assistant";
  item["content"] = std::move(content);
  return item;
}

Json function_call_item(const std::string& id, const char* status, const std::string& call_id,
                        const std::string& name, const std::string& arguments) {
  Json item;
  item["id"] = id;
  item["type"] = "function_call";
  item["status"] = status;
  item["call_id"] = call_id;
  item["name"] = name;
  item["arguments"] = arguments;
  return item;
}

// A float request value as JSON in its shortest form (0.7, not 0.699999988).
Json short_float(float v) { return Json(std::stod(fmt::format("{}", v))); }

}  // namespace

Json responses_request_echo(const ChatRequest& request) {
  Json e;
  e["instructions"] = request.instructions ? Json(*request.instructions) : Json(nullptr);
  e["max_output_tokens"] = request.sampling.max_tokens ? Json(*request.sampling.max_tokens) : Json(nullptr);
  e["metadata"] = Json::object();
  e["parallel_tool_calls"] = request.parallel_tool_calls;
  e["previous_response_id"] = nullptr;
  const bool thinking = request.render.thinking_mode == chat::ThinkingMode::kThinking;
  const std::string& effort = request.render.reasoning_effort.name;
  e["reasoning"] = Json{{"effort", thinking ? (effort.empty() ? "high" : effort) : "none"}, {"summary", nullptr}};
  e["store"] = false;
  e["temperature"] = short_float(request.sampling.temperature);
  Json format = Json{{"type", "text"}};
  if (!request.response_format.empty()) {
    Json parsed = Json::parse(request.response_format, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) format = std::move(parsed);
  }
  e["text"] = Json{{"format", std::move(format)}};
  switch (request.tool_choice.mode) {
    case ToolChoiceMode::kAuto: e["tool_choice"] = "auto"; break;
    case ToolChoiceMode::kNone: e["tool_choice"] = "none"; break;
    case ToolChoiceMode::kRequired: e["tool_choice"] = "required"; break;
    case ToolChoiceMode::kNamed: e["tool_choice"] = Json{{"type", "function"}, {"name", request.tool_choice.name}}; break;
  }
  Json tools = Json::array();
  for (const std::string& schema : request.tool_schemas) {
    Json tool = Json::parse(schema, nullptr, /*allow_exceptions=*/false);
    if (tool.is_discarded() || !tool.is_object()) continue;
    tool["type"] = "function";
    tools.push_back(std::move(tool));
  }
  e["tools"] = std::move(tools);
  e["top_p"] = short_float(request.sampling.top_p);
  e["truncation"] = "disabled";
  return e;
}

namespace {

Json response_json(const ResponseMeta& meta, const char* status, Json output, const Json& usage, const Json& echo) {
  Json r;
  r["id"] = meta.id;
  r["object"] = "response";
  r["created_at"] = meta.created;
  r["status"] = status;
  r["error"] = nullptr;
  r["incomplete_details"] = std::string_view(status) == "incomplete"
                                ? Json{{"reason", "max_output_tokens"}} : Json(nullptr);
  r["model"] = meta.model;
  r["output"] = std::move(output);
  r["usage"] = usage;
  for (const auto& [key, value] : echo.items()) r[key] = value;
  return r;
}

}  // namespace

Result<Json> responses_response(const chat::ParsedOutput& output, const ChatRequest& request,
                                const ResponseMeta& meta, const Usage& usage) {
  if (output.finish_reason == chat::FinishReason::kError || !output.finish_reason) {
    return Status(StatusCode::kInternal, "model output could not be parsed: " +
                                             (output.error.empty() ? "unfinished" : output.error));
  }
  std::string suffix = id_suffix(meta.id);
  Json items = Json::array();
  if (request.render.thinking_mode == chat::ThinkingMode::kThinking &&
      !output.reasoning_content.empty()) {
    items.push_back(reasoning_item("rs_" + suffix, output.reasoning_content));
  }
  const bool incomplete = *output.finish_reason == chat::FinishReason::kLength;
  if (!output.content.empty() || output.tool_calls.empty()) {
    // A message cut by the token limit is itself incomplete, as OpenAI marks it.
    items.push_back(message_item("msg_" + suffix, incomplete ? "incomplete" : "completed",
                                 Json::array({output_text_part(output.content)})));
  }
  for (size_t k = 0; k < output.tool_calls.size(); ++k) {
    const chat::ToolCall& call = output.tool_calls[k];
    items.push_back(function_call_item("fc_" + suffix + "_" + std::to_string(k), "completed",
                                       call.id, call.name, call.arguments));
  }
  return response_json(meta, incomplete ? "incomplete" : "completed", std::move(items), usage_json(usage),
                       responses_request_echo(request));
}

ResponsesStreamer::ResponsesStreamer(const ChatRequest& request, ResponseMeta meta)
    : meta_(std::move(meta)), suffix_(id_suffix(meta_.id)), echo_(responses_request_echo(request)) {}

void ResponsesStreamer::emit(std::string type, Json fields, std::vector<Json>* out) {
  Json e;
  e["type"] = std::move(type);
  e["sequence_number"] = sequence_++;
  for (auto& [key, value] : fields.items()) e[key] = std::move(value);
  out->push_back(std::move(e));
}

Json ResponsesStreamer::response_object(const char* status) const {
  bool final = std::string_view(status) != "in_progress";
  Json output = final ? Json(items_) : Json::array();
  return response_json(meta_, status, std::move(output), final ? usage_json(usage_) : Json(nullptr), echo_);
}

void ResponsesStreamer::start(std::vector<Json>* out) {
  started_ = true;
  emit("response.created", Json{{"response", response_object("in_progress")}}, out);
  emit("response.in_progress", Json{{"response", response_object("in_progress")}}, out);
}

void ResponsesStreamer::open_item(Open kind, const chat::ChatEvent& e, std::vector<Json>* out) {
  close_item(out);
  open_ = kind;
  text_.clear();
  int index = static_cast<int>(items_.size());
  if (kind == Open::kReasoning) {
    item_ = reasoning_item("rs_" + suffix_, "");
    item_["content"] = Json::array();
  } else if (kind == Open::kMessage) {
    item_ = message_item("msg_" + suffix_, "in_progress", Json::array());
  } else {
    item_ = function_call_item("fc_" + suffix_ + "_" + std::to_string(e.tool_index), "in_progress",
                               e.tool_call_id, e.tool_name, "");
  }
  emit("response.output_item.added", Json{{"output_index", index}, {"item", item_}}, out);
  Json part_ids{{"item_id", item_["id"]}, {"output_index", index}, {"content_index", 0}};
  if (kind == Open::kReasoning) {
    Json fields = part_ids;
    fields["part"] = Json{{"type", "reasoning_text"}, {"text", ""}};
    emit("response.content_part.added", std::move(fields), out);
  } else if (kind == Open::kMessage) {
    Json fields = part_ids;
    fields["part"] = output_text_part("");
    emit("response.content_part.added", std::move(fields), out);
  }
}

void ResponsesStreamer::close_item(std::vector<Json>* out) {
  if (open_ == Open::kNone) return;
  int index = static_cast<int>(items_.size());
  Json ids{{"item_id", item_["id"]}, {"output_index", index}};
  if (open_ == Open::kFunctionCall) {
    Json fields = ids;
    fields["arguments"] = text_;
    emit("response.function_call_arguments.done", std::move(fields), out);
    item_["status"] = "completed";
    item_["arguments"] = text_;
  } else {
    bool reasoning = open_ == Open::kReasoning;
    Json part = reasoning ? Json{{"type", "reasoning_text"}, {"text", text_}} : output_text_part(text_);
    Json done = ids;
    done["content_index"] = 0;
    done["text"] = text_;
    if (!reasoning) done["logprobs"] = Json::array();
    emit(reasoning ? "response.reasoning_text.done" : "response.output_text.done", std::move(done), out);
    Json part_done = ids;
    part_done["content_index"] = 0;
    part_done["part"] = part;
    emit("response.content_part.done", std::move(part_done), out);
    item_["content"] = Json::array({part});
    if (!reasoning) item_["status"] = cut_by_limit_ ? "incomplete" : "completed";
  }
  emit("response.output_item.done", Json{{"output_index", index}, {"item", item_}}, out);
  items_.push_back(std::move(item_));
  open_ = Open::kNone;
}

void ResponsesStreamer::on_event(const chat::ChatEvent& e, const Usage& usage,
                                 std::vector<Json>* out) {
  using chat::EventKind;
  if (finished_) return;
  if (!started_) start(out);
  int index = static_cast<int>(items_.size());
  switch (e.kind) {
    case EventKind::kReasoningDelta:
    case EventKind::kContentDelta: {
      bool reasoning = e.kind == EventKind::kReasoningDelta;
      Open want = reasoning ? Open::kReasoning : Open::kMessage;
      if (open_ != want) open_item(want, e, out);
      index = static_cast<int>(items_.size());
      text_ += e.text;
      Json fields{{"item_id", item_["id"]}, {"output_index", index}, {"content_index", 0},
                  {"delta", e.text}};
      if (!reasoning) fields["logprobs"] = Json::array();
      emit(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta",
           std::move(fields), out);
      return;
    }
    case EventKind::kToolCallStart:
      open_item(Open::kFunctionCall, e, out);
      return;
    case EventKind::kToolCallArgumentsDelta:
      text_ += e.text;
      emit("response.function_call_arguments.delta",
           Json{{"item_id", item_["id"]}, {"output_index", index}, {"delta", e.text}}, out);
      return;
    case EventKind::kToolCallEnd:
      close_item(out);
      return;
    case EventKind::kError:
      error_ = e.text;
      return;
    case EventKind::kFinish:
      break;
  }
  finished_ = true;
  usage_ = usage;
  if (e.finish_reason == chat::FinishReason::kError) {
    Json response = response_object("failed");
    response["error"] = Json{{"code", "server_error"},
                             {"message", "model output could not be parsed: " + error_}};
    emit("response.failed", Json{{"response", std::move(response)}}, out);
    return;
  }
  // Like the non-streaming object: a message item unless the turn was only tool calls.
  bool has_message_or_call = open_ == Open::kMessage || open_ == Open::kFunctionCall;
  for (const Json& item : items_) has_message_or_call |= item["type"] != "reasoning";
  if (!has_message_or_call) open_item(Open::kMessage, e, out);
  cut_by_limit_ = e.finish_reason == chat::FinishReason::kLength;  // the last item is incomplete too
  close_item(out);
  if (e.finish_reason == chat::FinishReason::kLength) {
    emit("response.incomplete", Json{{"response", response_object("incomplete")}}, out);
  } else {
    emit("response.completed", Json{{"response", response_object("completed")}}, out);
  }
}

std::vector<Json> ResponsesStreamer::on_events(std::span<const chat::ChatEvent> events,
                                               const Usage& usage) {
  std::vector<Json> out;
  for (const chat::ChatEvent& e : events) on_event(e, usage, &out);
  return out;
}

}  // namespace deepinfer::protocol
