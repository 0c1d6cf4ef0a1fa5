// Parser events -> Chat Completions response objects (see openai_chat.h). Key order follows the
// OpenAI API reference so the JSON reads like OpenAI's own.
#include "protocol/openai_chat.h"

#include "protocol/json_reader.h"

namespace deepinfer::protocol {
namespace {

Json usage_json(const Usage& usage) {
  Json u;
  u["prompt_tokens"] = usage.n_prompt_tokens;
  u["completion_tokens"] = usage.n_completion_tokens;
  u["total_tokens"] = usage.n_prompt_tokens + usage.n_completion_tokens;
  u["completion_tokens_details"] = Json{{"reasoning_tokens", usage.n_reasoning_tokens}};
  return u;
}

Json tool_call_json(const chat::ToolCall& call) {
  Json tc;
  tc["id"] = call.id;
  tc["type"] = "function";
  tc["function"] = Json{{"name", call.name}, {"arguments", call.arguments}};
  return tc;
}

// OpenAI reports a call forced by a named tool_choice with finish_reason "stop" (streaming or
// not); only calls under "auto" / "required" end with "tool_calls". vLLM does the same.
const char* finish_reason_text(chat::FinishReason reason, bool named_tool_choice) {
  if (reason == chat::FinishReason::kToolCalls && named_tool_choice) return "stop";
  return chat::finish_reason_name(reason);
}

bool is_named_choice(const ChatRequest& request) {
  return request.tool_choice.mode == ToolChoiceMode::kNamed;
}

}  // namespace

Result<Json> chat_completion_response(const chat::ParsedOutput& output, const ChatRequest& request,
                                      const ResponseMeta& meta, const Usage& usage) {
  if (output.finish_reason == chat::FinishReason::kError || !output.finish_reason) {
    return Status(StatusCode::kInternal, "model output could not be parsed: " +
                                             (output.error.empty() ? "unfinished" : output.error));
  }
  Json message;
  message["role"] = "assistant";
  if (output.content.empty() && !output.tool_calls.empty()) {
    message["content"] = nullptr;
  } else {
    message["content"] = output.content;
  }
  if (request.render.thinking_mode == chat::ThinkingMode::kThinking) {
    message["reasoning_content"] = output.reasoning_content;
  }
  if (!output.tool_calls.empty()) {
    Json calls = Json::array();
    for (const chat::ToolCall& call : output.tool_calls) calls.push_back(tool_call_json(call));
    message["tool_calls"] = std::move(calls);
  }
  Json choice;
  choice["index"] = 0;
  choice["message"] = std::move(message);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason_text(*output.finish_reason, is_named_choice(request));
  Json response;
  response["id"] = meta.id;
  response["object"] = "chat.completion";
  response["created"] = meta.created;
  response["model"] = meta.model;
  response["choices"] = Json::array({std::move(choice)});
  response["usage"] = usage_json(usage);
  return response;
}

ChatCompletionsStreamer::ChatCompletionsStreamer(const ChatRequest& request, ResponseMeta meta)
    : meta_(std::move(meta)), include_usage_(request.include_usage), named_tool_choice_(is_named_choice(request)) {}

Json ChatCompletionsStreamer::chunk(Json delta, const Json& finish_reason) const {
  Json choice;
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  Json c;
  c["id"] = meta_.id;
  c["object"] = "chat.completion.chunk";
  c["created"] = meta_.created;
  c["model"] = meta_.model;
  c["choices"] = Json::array({std::move(choice)});
  if (include_usage_) c["usage"] = nullptr;  // OpenAI sends null on all but the last chunk
  return c;
}

void ChatCompletionsStreamer::on_event(const chat::ChatEvent& e, const Usage& usage,
                                       std::vector<Json>* out) {
  using chat::EventKind;
  if (!started_) {
    started_ = true;
    out->push_back(chunk(Json{{"role", "assistant"}, {"content", ""}}, nullptr));
  }
  switch (e.kind) {
    case EventKind::kReasoningDelta:
      out->push_back(chunk(Json{{"reasoning_content", e.text}}, nullptr));
      return;
    case EventKind::kContentDelta:
      out->push_back(chunk(Json{{"content", e.text}}, nullptr));
      return;
    case EventKind::kToolCallStart: {
      Json call;
      call["index"] = e.tool_index;
      call["id"] = e.tool_call_id;
      call["type"] = "function";
      call["function"] = Json{{"name", e.tool_name}, {"arguments", ""}};
      out->push_back(chunk(Json{{"tool_calls", Json::array({std::move(call)})}}, nullptr));
      return;
    }
    case EventKind::kToolCallArgumentsDelta: {
      Json call;
      call["index"] = e.tool_index;
      call["function"] = Json{{"arguments", e.text}};
      out->push_back(chunk(Json{{"tool_calls", Json::array({std::move(call)})}}, nullptr));
      return;
    }
    case EventKind::kToolCallEnd:
      return;
    case EventKind::kError:
      error_ = e.text;
      return;
    case EventKind::kFinish:
      break;
  }
  if (e.finish_reason == chat::FinishReason::kError) {
    Json error;
    error["message"] = "model output could not be parsed: " + error_;
    error["type"] = "server_error";
    error["code"] = "invalid_model_output";
    out->push_back(Json{{"error", std::move(error)}});
    return;
  }
  out->push_back(chunk(Json::object(), finish_reason_text(e.finish_reason, named_tool_choice_)));
  if (include_usage_) {
    Json last = chunk(Json::object(), nullptr);
    last["choices"] = Json::array();
    last["usage"] = usage_json(usage);
    out->push_back(std::move(last));
  }
}

std::vector<Json> ChatCompletionsStreamer::on_events(std::span<const chat::ChatEvent> events,
                                                     const Usage& usage) {
  std::vector<Json> out;
  for (const chat::ChatEvent& e : events) on_event(e, usage, &out);
  return out;
}

}  // namespace deepinfer::protocol
