// OpenAI Responses (POST /v1/responses): request JSON -> ChatRequest, and parser events -> a
// response object or the typed event stream (response.created, response.output_item.added,
// response.reasoning_text.delta, response.output_text.delta,
// response.function_call_arguments.delta, ..., response.completed / incomplete / failed).
// Stateless: previous_response_id is refused; clients send the whole conversation, with
// reasoning items echoed back as the reasoning of the following assistant turn.
#pragma once

#include <span>
#include <vector>

#include "protocol/chat_request.h"

namespace deepinfer::protocol {

Result<ChatRequest> parse_responses(const Json& body, const ProtocolOptions& options);

// The non-streaming response object (status "completed", or "incomplete" at the length limit).
// A parse error in the model output is an error Status.
Result<Json> responses_response(const chat::ParsedOutput& output, const ChatRequest& request,
                                const ResponseMeta& meta, const Usage& usage);

// The request's settings every Responses object carries, as OpenAI returns them (instructions,
// max_output_tokens, parallel_tool_calls, reasoning, temperature, text, tool_choice, tools,
// top_p, truncation, ...).
Json responses_request_echo(const ChatRequest& request);

class ResponsesStreamer {
 public:
  ResponsesStreamer(const ChatRequest& request, ResponseMeta meta);
  // Events to send, each with "type" and "sequence_number". `usage` is read at kFinish.
  std::vector<Json> on_events(std::span<const chat::ChatEvent> events, const Usage& usage);

 private:
  enum class Open : uint8_t { kNone, kReasoning, kMessage, kFunctionCall };
  void emit(std::string type, Json fields, std::vector<Json>* out);
  void start(std::vector<Json>* out);
  void open_item(Open kind, const chat::ChatEvent& e, std::vector<Json>* out);
  void close_item(std::vector<Json>* out);
  void on_event(const chat::ChatEvent& e, const Usage& usage, std::vector<Json>* out);
  Json response_object(const char* status) const;

  ResponseMeta meta_;
  std::string suffix_;
  Json echo_;  // responses_request_echo
  int sequence_ = 0;
  bool started_ = false;
  std::vector<Json> items_;  // finished output items
  Open open_ = Open::kNone;
  Json item_;                // the open item
  std::string text_;         // its text / arguments so far
  std::string error_;
  Usage usage_;
  bool finished_ = false;
  bool cut_by_limit_ = false;  // the turn ended at the token limit: its last message is incomplete
};

}  // namespace deepinfer::protocol
