// Non-streaming chat responses: the protocol's response object per API, extended with what the
// protocol layer does not know (n choices and their logprobs for Chat Completions, cached prompt
// tokens, the Anthropic stop sequence).
#pragma once

#include <span>
#include <string>

#include "deepinfer/chat.h"
#include "deepinfer/status.h"
#include "protocol/chat_request.h"

namespace deepinfer::server {

struct SampleResult {
  chat::ParsedOutput output;  // content already cut at a matched stop string
  protocol::Usage usage;
  std::string stop_matched;   // "" unless a stop string ended the turn
  protocol::Json logprobs = protocol::Json::array();  // chat_logprob_entry objects
};

// A parse error of the model output (finish kError) is an error Status (the route answers 500).
Result<protocol::Json> chat_response_json(const protocol::ChatRequest& request, const protocol::ResponseMeta& meta,
                                          std::span<const SampleResult> samples, int n_cached_tokens,
                                          bool with_logprobs);

// Sum of the samples' completion (and reasoning) tokens; prompt tokens counted once.
protocol::Usage total_usage(std::span<const SampleResult> samples);

}  // namespace deepinfer::server
