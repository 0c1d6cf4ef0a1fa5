// Sampling fields of each API -> SamplingParams (type errors name the field; range checks are
// SamplingParams::validate()'s, run by finish_request). Internal to di_protocol.
#pragma once

#include "protocol/chat_request.h"

namespace deepinfer::protocol {

// Chat Completions: max_tokens | max_completion_tokens, temperature, top_p, top_k, min_p,
// presence/frequency/repetition_penalty, stop, seed, n (1..128 choices), logprobs + top_logprobs,
// logit_bias, min_tokens.
Status read_openai_sampling(const Json& body, SamplingParams* out);
// Responses: max_output_tokens, temperature, top_p, top_logprobs.
Status read_responses_sampling(const Json& body, SamplingParams* out);
// Anthropic Messages: max_tokens (required), temperature, top_p, top_k, stop_sequences.
Status read_anthropic_sampling(const Json& body, SamplingParams* out);

}  // namespace deepinfer::protocol
