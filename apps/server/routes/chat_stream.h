// SSE encoding of parser events for the three chat APIs, on top of the protocol streamers:
// Chat Completions ("data: {chunk}" ... "data: [DONE]"; n choices with their index, logprobs,
// stream_options.include_usage), Responses and Anthropic Messages ("event: <type>" + "data:"),
// plus each API's shape for an error in the middle of a stream. Not thread-safe (one per request,
// used under the request's lock).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "api_error.h"
#include "deepinfer/chat.h"
#include "protocol/chat_request.h"

namespace deepinfer::server {

class ChatStreamEncoder {
 public:
  virtual ~ChatStreamEncoder() = default;
  // Frames for the parser events of sequence `index`. `logprobs`: chat_logprob_entry objects of
  // the tokens behind these events (an empty array when not requested); they ride on the next
  // chunk that carries a delta.
  virtual std::string on_events(int index, std::span<const chat::ChatEvent> events,
                                const protocol::Usage& usage, protocol::Json logprobs) = 0;
  // Frames after every sequence finished (usage chunk, [DONE]).
  virtual std::string finish(const protocol::Usage& total, int n_cached_tokens) = 0;
  // A mid-stream error; the stream ends after it.
  virtual std::string error(const ApiError& error) = 0;
  // Anthropic: the stop sequence that ended the turn (set before its finish event).
  virtual void set_stop_sequence(const std::string& stop) { (void)stop; }
  // Chat Completions: vLLM's prompt_logprobs list (prompt_logprobs_json); it rides, top level as
  // on the non-streaming response, on the next chunk written. Other APIs have no such field.
  virtual void set_prompt_logprobs(protocol::Json list) { (void)list; }
  // Prompt tokens served from the prefix cache (known from the first engine event).
  void set_cached_tokens(int n) { n_cached_tokens_ = n; }

 protected:
  int n_cached_tokens_ = 0;
};

std::unique_ptr<ChatStreamEncoder> make_stream_encoder(const protocol::ChatRequest& request,
                                                       const protocol::ResponseMeta& meta, int n);

// "data: <json>\n\n" / "event: <name>\ndata: <json>\n\n".
std::string sse_data(const protocol::Json& value);
std::string sse_event(const std::string& name, const protocol::Json& value);

// Chat Completions usage object, with prompt_tokens_details.cached_tokens.
protocol::Json chat_usage_json(const protocol::Usage& usage, int n_cached_tokens);

}  // namespace deepinfer::server
