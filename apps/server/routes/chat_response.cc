// Non-streaming chat response objects (see chat_response.h).
#include "routes/chat_response.h"

#include "protocol/anthropic.h"
#include "protocol/openai_chat.h"
#include "protocol/responses.h"
#include "routes/chat_stream.h"

namespace deepinfer::server {

using protocol::Json;

protocol::Usage total_usage(std::span<const SampleResult> samples) {
  protocol::Usage total;
  for (const SampleResult& s : samples) {
    total.n_prompt_tokens = std::max(total.n_prompt_tokens, s.usage.n_prompt_tokens);
    total.n_completion_tokens += s.usage.n_completion_tokens;
    total.n_reasoning_tokens += s.usage.n_reasoning_tokens;
  }
  return total;
}

namespace {

Result<Json> chat_completions_json(const protocol::ChatRequest& request, const protocol::ResponseMeta& meta,
                                   std::span<const SampleResult> samples, int n_cached, bool with_logprobs) {
  Json choices = Json::array();
  for (size_t i = 0; i < samples.size(); ++i) {
    Result<Json> one = protocol::chat_completion_response(samples[i].output, request, meta, samples[i].usage);
    if (!one.is_ok()) return one.status();
    Json choice = std::move((*one)["choices"][0]);
    choice["index"] = static_cast<int>(i);
    if (with_logprobs) choice["logprobs"] = Json{{"content", samples[i].logprobs}};
    choices.push_back(std::move(choice));
  }
  Json response;
  response["id"] = meta.id;
  response["object"] = "chat.completion";
  response["created"] = meta.created;
  response["model"] = meta.model;
  response["choices"] = std::move(choices);
  response["usage"] = chat_usage_json(total_usage(samples), n_cached);
  return response;
}

}  // namespace

Result<Json> chat_response_json(const protocol::ChatRequest& request, const protocol::ResponseMeta& meta,
                                std::span<const SampleResult> samples, int n_cached, bool with_logprobs) {
  switch (request.api) {
    case protocol::Api::kChatCompletions:
      return chat_completions_json(request, meta, samples, n_cached, with_logprobs);
    case protocol::Api::kResponses: {
      Result<Json> r = protocol::responses_response(samples[0].output, request, meta, samples[0].usage);
      if (r.is_ok() && (*r)["usage"].is_object()) (*r)["usage"]["input_tokens_details"]["cached_tokens"] = n_cached;
      return r;
    }
    case protocol::Api::kAnthropicMessages: {
      Result<Json> r = protocol::anthropic_response(samples[0].output, request, meta, samples[0].usage);
      if (!r.is_ok()) return r;
      protocol::set_anthropic_cache_usage((*r)["usage"], n_cached);
      if (!samples[0].stop_matched.empty()) {
        (*r)["stop_reason"] = "stop_sequence";
        (*r)["stop_sequence"] = samples[0].stop_matched;
      }
      return r;
    }
  }
  return Status(StatusCode::kInternal, "unknown API");
}

}  // namespace deepinfer::server
