// OpenAI Chat Completions (POST /v1/chat/completions): request JSON -> ChatRequest, and parser
// events -> a chat.completion object or chat.completion.chunk stream. DeepSeek extensions
// accepted: messages[].reasoning_content (echoed reasoning), "thinking": {"type":
// "enabled"|"disabled"}, chat_template_kwargs {thinking, enable_thinking, drop_thinking}, an
// integer reasoning_effort for V4.1. OpenAI "developer" messages are system messages.
#pragma once

#include <span>
#include <vector>

#include "protocol/chat_request.h"

namespace deepinfer::protocol {

// Validation errors name the JSON path ("messages[1].tool_calls[0].function.name: required").
Result<ChatRequest> parse_chat_completions(const Json& body, const ProtocolOptions& options);

// The non-streaming response. A call forced by a named tool_choice finishes with "stop" (as
// OpenAI's API does), other tool calls with "tool_calls". A parse error in the model output (finish kError) is an error
// Status (the server answers 500), never content with markup.
Result<Json> chat_completion_response(const chat::ParsedOutput& output, const ChatRequest& request,
                                      const ResponseMeta& meta, const Usage& usage);

// Turns parser events into chat.completion.chunk objects (one SSE "data:" each): the role chunk
// first, then delta.reasoning_content / delta.content / delta.tool_calls[index, id, type,
// function{name, arguments}], a finish chunk, and a usage chunk when include_usage. A malformed
// model output ends the stream with an {"error": ...} object instead of a finish chunk.
class ChatCompletionsStreamer {
 public:
  ChatCompletionsStreamer(const ChatRequest& request, ResponseMeta meta);
  // `usage` is read when the events contain kFinish.
  std::vector<Json> on_events(std::span<const chat::ChatEvent> events, const Usage& usage);

 private:
  Json chunk(Json delta, const Json& finish_reason) const;
  void on_event(const chat::ChatEvent& event, const Usage& usage, std::vector<Json>* out);

  ResponseMeta meta_;
  bool include_usage_ = false;
  bool named_tool_choice_ = false;  // finish "stop" for the forced call (see finish_reason_text)
  bool started_ = false;
  std::string error_;
};

}  // namespace deepinfer::protocol
