// Stream encoders per API (see chat_stream.h).
#include "routes/chat_stream.h"

#include <utility>
#include <vector>

#include "json_text.h"
#include "protocol/anthropic.h"
#include "protocol/openai_chat.h"
#include "protocol/responses.h"

namespace deepinfer::server {

using protocol::Json;

std::string sse_data(const Json& value) { return "data: " + json_text(value) + "\n\n"; }

std::string sse_event(const std::string& name, const Json& value) {
  return "event: " + name + "\ndata: " + json_text(value) + "\n\n";
}

Json chat_usage_json(const protocol::Usage& usage, int n_cached_tokens) {
  Json u;
  u["prompt_tokens"] = usage.n_prompt_tokens;
  u["completion_tokens"] = usage.n_completion_tokens;
  u["total_tokens"] = usage.n_prompt_tokens + usage.n_completion_tokens;
  u["prompt_tokens_details"] = Json{{"cached_tokens", n_cached_tokens}};
  u["completion_tokens_details"] = Json{{"reasoning_tokens", usage.n_reasoning_tokens}};
  return u;
}

namespace {

class ChatCompletionsEncoder : public ChatStreamEncoder {
 public:
  ChatCompletionsEncoder(const protocol::ChatRequest& request, const protocol::ResponseMeta& meta, int n)
      : meta_(meta), include_usage_(request.include_usage), pending_(static_cast<size_t>(n), Json::array()) {
    // The usage chunk is written once for all choices (finish()), not per choice.
    protocol::ChatRequest per_choice = request;
    per_choice.include_usage = false;
    for (int i = 0; i < n; ++i) streamers_.emplace_back(per_choice, meta);
  }

  std::string on_events(int index, std::span<const chat::ChatEvent> events, const protocol::Usage& usage,
                        Json logprobs) override {
    Json& pending = pending_[static_cast<size_t>(index)];
    for (Json& entry : logprobs) pending.push_back(std::move(entry));
    std::string out;
    for (Json& chunk : streamers_[static_cast<size_t>(index)].on_events(events, usage)) {
      if (chunk.contains("error")) {
        out += sse_data(chunk);
        continue;
      }
      Json& choice = chunk["choices"][0];
      choice["index"] = index;
      // Logprobs ride on a chunk with generated text (or the last one), never on the role chunk
      // that opens the stream: a client pairs each chunk's text with its logprobs.
      const Json& delta = choice["delta"];
      auto has_text = [&delta](const char* key) {
        if (!delta.contains(key) || delta[key].is_null()) return false;
        return !delta[key].is_string() || !delta[key].get_ref<const std::string&>().empty();
      };
      bool carries = has_text("content") || has_text("reasoning_content") || has_text("tool_calls") ||
                     !choice["finish_reason"].is_null();
      if (carries && !pending.empty()) {
        choice["logprobs"] = Json{{"content", std::move(pending)}};
        pending = Json::array();
      }
      if (include_usage_) chunk["usage"] = nullptr;
      if (!prompt_logprobs_.is_null()) chunk["prompt_logprobs"] = std::exchange(prompt_logprobs_, nullptr);
      out += sse_data(chunk);
    }
    return out;
  }

  std::string finish(const protocol::Usage& total, int n_cached_tokens) override {
    std::string out;
    if (include_usage_) {
      Json c;
      c["id"] = meta_.id;
      c["object"] = "chat.completion.chunk";
      c["created"] = meta_.created;
      c["model"] = meta_.model;
      c["choices"] = Json::array();
      c["usage"] = chat_usage_json(total, n_cached_tokens);
      out += sse_data(c);
    }
    return out + "data: [DONE]\n\n";
  }

  std::string error(const ApiError& e) override {
    return sse_data(error_json(e, ApiFormat::kOpenAI)) + "data: [DONE]\n\n";
  }

  void set_prompt_logprobs(Json list) override { prompt_logprobs_ = std::move(list); }

 private:
  protocol::ResponseMeta meta_;
  bool include_usage_;
  std::vector<protocol::ChatCompletionsStreamer> streamers_;
  std::vector<Json> pending_;  // logprob entries not yet sent, per choice
  Json prompt_logprobs_;       // null once sent (or never asked for)
};

class ResponsesEncoder : public ChatStreamEncoder {
 public:
  ResponsesEncoder(const protocol::ChatRequest& request, const protocol::ResponseMeta& meta)
      : streamer_(request, meta) {}

  std::string on_events(int, std::span<const chat::ChatEvent> events, const protocol::Usage& usage,
                        Json) override {
    std::string out;
    for (Json& event : streamer_.on_events(events, usage)) {
      if (event.contains("sequence_number")) last_sequence_ = event["sequence_number"].get<int64_t>();
      Json* response = event.contains("response") ? &event["response"] : nullptr;
      if (response != nullptr && response->contains("usage") && (*response)["usage"].is_object()) {
        (*response)["usage"]["input_tokens_details"]["cached_tokens"] = n_cached_tokens_;
      }
      out += sse_event(event.value("type", "message"), event);
    }
    return out;
  }
  std::string finish(const protocol::Usage&, int) override { return {}; }
  std::string error(const ApiError& e) override {
    Json event;
    event["type"] = "error";
    event["code"] = e.code.empty() ? Json(e.status >= 500 ? "server_error" : "invalid_request") : Json(e.code);
    event["message"] = e.message;
    event["param"] = nullptr;
    event["sequence_number"] = last_sequence_ + 1;
    return sse_event("error", event);
  }

 private:
  protocol::ResponsesStreamer streamer_;
  int64_t last_sequence_ = -1;
};

class AnthropicEncoder : public ChatStreamEncoder {
 public:
  AnthropicEncoder(const protocol::ChatRequest& request, const protocol::ResponseMeta& meta)
      : streamer_(request, meta) {}

  std::string on_events(int, std::span<const chat::ChatEvent> events, const protocol::Usage& usage,
                        Json) override {
    std::string out;
    for (Json& event : streamer_.on_events(events, usage)) {
      std::string type = event.value("type", "message");
      if (type == "message_start") protocol::set_anthropic_cache_usage(event["message"]["usage"], n_cached_tokens_);
      if (type == "message_delta" && !stop_.empty()) {
        event["delta"]["stop_reason"] = "stop_sequence";
        event["delta"]["stop_sequence"] = stop_;
      }
      out += sse_event(type, event);
    }
    return out;
  }
  std::string finish(const protocol::Usage&, int) override { return {}; }
  std::string error(const ApiError& e) override { return sse_event("error", error_json(e, ApiFormat::kAnthropic)); }
  void set_stop_sequence(const std::string& stop) override { stop_ = stop; }

 private:
  protocol::AnthropicStreamer streamer_;
  std::string stop_;
};

}  // namespace

std::unique_ptr<ChatStreamEncoder> make_stream_encoder(const protocol::ChatRequest& request,
                                                       const protocol::ResponseMeta& meta, int n) {
  switch (request.api) {
    case protocol::Api::kResponses: return std::make_unique<ResponsesEncoder>(request, meta);
    case protocol::Api::kAnthropicMessages: return std::make_unique<AnthropicEncoder>(request, meta);
    case protocol::Api::kChatCompletions: break;
  }
  return std::make_unique<ChatCompletionsEncoder>(request, meta, n);
}

}  // namespace deepinfer::server
