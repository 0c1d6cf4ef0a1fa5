// Token logprobs as the OpenAI APIs print them: Chat Completions' logprobs.content entries
// ({token, logprob, bytes, top_logprobs}) and the legacy Completions object ({tokens,
// token_logprobs, top_logprobs, text_offset}). -inf (a token outside the sampling support) is
// printed as -9999.0, as vLLM does, since JSON has no infinity.
#pragma once

#include <span>
#include <string>

#include "deepinfer/engine.h"
#include "protocol/chat_request.h"

namespace deepinfer::server {

protocol::Json chat_logprob_entry(const Tokenizer& tokenizer, const TokenLogprobs& lp);

// Appends `lps` to a legacy logprobs object (created on first use); `text_offset` is the byte
// offset of the first token's text in the choice text so far.
void append_completion_logprobs(const Tokenizer& tokenizer, std::span<const TokenLogprobs> lps,
                                size_t text_offset, protocol::Json* logprobs);

}  // namespace deepinfer::server
