// Parser events -> Anthropic Messages objects and stream events (see anthropic.h).
#include "protocol/anthropic.h"

#include <algorithm>

#include "protocol/json_reader.h"

namespace deepinfer::protocol {
namespace {

const char* stop_reason(chat::FinishReason reason) {
  switch (reason) {
    case chat::FinishReason::kLength: return "max_tokens";
    case chat::FinishReason::kToolCalls: return "tool_use";
    default: return "end_turn";
  }
}

Json message_json(const ResponseMeta& meta, Json content, const Json& reason, Json usage) {
  Json m;
  m["id"] = meta.id;
  m["type"] = "message";
  m["role"] = "assistant";
  m["model"] = meta.model;
  m["content"] = std::move(content);
  m["stop_reason"] = reason;
  m["stop_sequence"] = nullptr;
  m["usage"] = std::move(usage);
  return m;
}

Json thinking_block(const std::string& text) {
  return Json{{"type", "thinking"}, {"thinking", text}, {"signature", ""}};
}

}  // namespace

Result<Json> anthropic_response(const chat::ParsedOutput& output, const ChatRequest& request,
                                const ResponseMeta& meta, const Usage& usage) {
  if (output.finish_reason == chat::FinishReason::kError || !output.finish_reason) {
    return Status(StatusCode::kInternal, "model output could not be parsed: " +
                                             (output.error.empty() ? "unfinished" : output.error));
  }
  Json content = Json::array();
  if (request.render.thinking_mode == chat::ThinkingMode::kThinking &&
      !output.reasoning_content.empty()) {
    content.push_back(thinking_block(output.reasoning_content));
  }
  if (!output.content.empty() || output.tool_calls.empty()) {
    content.push_back(Json{{"type", "text"}, {"text", output.content}});
  }
  for (const chat::ToolCall& call : output.tool_calls) {
    Json input = Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (input.is_discarded() || !input.is_object()) {
      return Status(StatusCode::kInternal, "tool call " + call.name + ": arguments are not a JSON object");
    }
    content.push_back(Json{{"type", "tool_use"}, {"id", call.id}, {"name", call.name},
                           {"input", std::move(input)}});
  }
  Json u{{"input_tokens", usage.n_prompt_tokens}, {"output_tokens", usage.n_completion_tokens}};
  return message_json(meta, std::move(content), stop_reason(*output.finish_reason), std::move(u));
}

void set_anthropic_cache_usage(Json& usage, int n_cached) {
  const int n_input = usage.value("input_tokens", 0);
  usage["input_tokens"] = std::max(0, n_input - n_cached);
  usage["cache_creation_input_tokens"] = 0;
  usage["cache_read_input_tokens"] = n_cached;
}

AnthropicStreamer::AnthropicStreamer(const ChatRequest& request, ResponseMeta meta)
    : meta_(std::move(meta)) {
  (void)request;
}

void AnthropicStreamer::open_block(Block kind, const chat::ChatEvent& e, std::vector<Json>* out) {
  close_block(out);
  open_ = kind;
  ++index_;
  Json block;
  if (kind == Block::kThinking) block = thinking_block("");
  else if (kind == Block::kText) block = Json{{"type", "text"}, {"text", ""}};
  else block = Json{{"type", "tool_use"}, {"id", e.tool_call_id}, {"name", e.tool_name},
                    {"input", Json::object()}};
  out->push_back(Json{{"type", "content_block_start"}, {"index", index_},
                      {"content_block", std::move(block)}});
}

void AnthropicStreamer::close_block(std::vector<Json>* out) {
  if (open_ == Block::kNone) return;
  out->push_back(Json{{"type", "content_block_stop"}, {"index", index_}});
  open_ = Block::kNone;
}

void AnthropicStreamer::on_event(const chat::ChatEvent& e, const Usage& usage,
                                 std::vector<Json>* out) {
  using chat::EventKind;
  if (finished_) return;
  if (!started_) {
    started_ = true;
    Json u{{"input_tokens", usage.n_prompt_tokens}, {"output_tokens", 0}};
    out->push_back(Json{{"type", "message_start"},
                        {"message", message_json(meta_, Json::array(), nullptr, std::move(u))}});
  }
  switch (e.kind) {
    case EventKind::kReasoningDelta:
      if (open_ != Block::kThinking) open_block(Block::kThinking, e, out);
      out->push_back(Json{{"type", "content_block_delta"}, {"index", index_},
                          {"delta", {{"type", "thinking_delta"}, {"thinking", e.text}}}});
      return;
    case EventKind::kContentDelta:
      if (open_ != Block::kText) open_block(Block::kText, e, out);
      out->push_back(Json{{"type", "content_block_delta"}, {"index", index_},
                          {"delta", {{"type", "text_delta"}, {"text", e.text}}}});
      return;
    case EventKind::kToolCallStart:
      open_block(Block::kToolUse, e, out);
      return;
    case EventKind::kToolCallArgumentsDelta:
      out->push_back(Json{{"type", "content_block_delta"}, {"index", index_},
                          {"delta", {{"type", "input_json_delta"}, {"partial_json", e.text}}}});
      return;
    case EventKind::kToolCallEnd:
      close_block(out);
      return;
    case EventKind::kError:
      error_ = e.text;
      return;
    case EventKind::kFinish:
      break;
  }
  finished_ = true;
  if (e.finish_reason == chat::FinishReason::kError) {
    out->push_back(Json{{"type", "error"},
                        {"error", {{"type", "api_error"},
                                   {"message", "model output could not be parsed: " + error_}}}});
    return;
  }
  close_block(out);
  out->push_back(Json{{"type", "message_delta"},
                      {"delta", {{"stop_reason", stop_reason(e.finish_reason)},
                                 {"stop_sequence", nullptr}}},
                      {"usage", {{"output_tokens", usage.n_completion_tokens}}}});
  out->push_back(Json{{"type", "message_stop"}});
}

std::vector<Json> AnthropicStreamer::on_events(std::span<const chat::ChatEvent> events,
                                               const Usage& usage) {
  std::vector<Json> out;
  for (const chat::ChatEvent& e : events) on_event(e, usage, &out);
  return out;
}

}  // namespace deepinfer::protocol
