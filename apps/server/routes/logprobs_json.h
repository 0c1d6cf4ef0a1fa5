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

// Echo with logprobs: appends the prompt's tokens to a legacy logprobs object (created on first
// use) — the first with null token_logprobs and top_logprobs entries (nothing predicts it), token
// i from lps[i - 1] (TokenEvent::prompt_logprobs) with its first n_top alternatives. text_offset
// indexes `echo`, the prompt as the choice's text shows it: a token whose bytes are not there (the
// BOS a text prompt gained) takes no room.
void append_prompt_completion_logprobs(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                       std::span<const TokenLogprobs> lps, int32_t n_top, const std::string& echo,
                                       protocol::Json* logprobs);

// vLLM's prompt_logprobs of a completion choice: null for the first prompt token, then per token
// {"<id>": {"logprob", "rank", "decoded_token"}} for the token itself (rank in the whole
// distribution) and its first n_top alternatives (ranks 1..n_top).
protocol::Json prompt_logprobs_json(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                    std::span<const TokenLogprobs> lps, int32_t n_top);

}  // namespace deepinfer::server
