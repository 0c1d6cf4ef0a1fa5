// Anthropic Messages (POST /v1/messages): request JSON -> ChatRequest, and parser events -> a
// message object or the event stream (message_start, content_block_start / content_block_delta
// with thinking_delta, text_delta, input_json_delta / content_block_stop, message_delta with
// stop_reason, message_stop). thinking blocks in the request are the assistant's reasoning;
// tool_result blocks become tool messages; a final assistant message is continued (prefill).
#pragma once

#include <span>
#include <vector>

#include "protocol/chat_request.h"

namespace deepinfer::protocol {

Result<ChatRequest> parse_anthropic_messages(const Json& body, const ProtocolOptions& options);

// stop_reason: end_turn, max_tokens or tool_use; tool_use.input is the parsed arguments object.
Result<Json> anthropic_response(const chat::ParsedOutput& output, const ChatRequest& request,
                                const ResponseMeta& meta, const Usage& usage);

// Anthropic's usage counts cache reads apart from the input: input_tokens are the prompt tokens
// after the cached prefix, cache_read_input_tokens the prefix served from the prefix cache (the
// total is their sum; this engine writes no separate cache entries: cache_creation_input_tokens 0).
void set_anthropic_cache_usage(Json& usage, int n_cached);

class AnthropicStreamer {
 public:
  AnthropicStreamer(const ChatRequest& request, ResponseMeta meta);
  // Events to send (the SSE event name is each object's "type"). `usage` supplies input_tokens
  // for message_start and output_tokens at the end.
  std::vector<Json> on_events(std::span<const chat::ChatEvent> events, const Usage& usage);

 private:
  enum class Block : uint8_t { kNone, kThinking, kText, kToolUse };
  void open_block(Block kind, const chat::ChatEvent& e, std::vector<Json>* out);
  void close_block(std::vector<Json>* out);
  void on_event(const chat::ChatEvent& e, const Usage& usage, std::vector<Json>* out);

  ResponseMeta meta_;
  bool started_ = false;
  bool finished_ = false;
  Block open_ = Block::kNone;
  int index_ = -1;  // index of the open (or last) content block
  std::string error_;
};

}  // namespace deepinfer::protocol
