// Request intake: everything submit() does on the caller's thread before a request reaches the
// step loop — validation with errors that name the field, tokenization of text prompts, the
// per-sequence seeds of n > 1 expansion, and the prefix-cache salt. The result is immutable and
// self-contained, so the engine thread never re-validates or touches the tokenizer for it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "engine/image_inputs.h"
#include "engine/structured_output.h"

namespace deepinfer::engine {

struct IntakeLimits {
  int32_t n_vocab = 0;        // the model's vocabulary rows
  int32_t max_model_len = 0;  // prompt + generated tokens
  uint64_t engine_seed = 0;
  // Non-empty: why this engine cannot compute sampling.prompt_logprobs (the request is refused).
  std::string no_prompt_logprobs;
  // Vision: the image placeholder id (-1: none) and the model's image encoder (null: no vision).
  int32_t image_token_id = -1;
  const ImageEncoder* image_encoder = nullptr;
};

// A validated request: the engine thread turns it into sampling.n scheduler sequences.
struct AcceptedRequest {
  RequestId id = 0;
  std::vector<int32_t> prompt_ids;
  std::shared_ptr<const SamplingParams> sampling;
  std::vector<uint64_t> seeds;  // one per sequence (sampling.n), keyed_noise.h resolve_sequence_seed
  uint64_t cache_salt = 0;      // 0 = the shared namespace
  std::shared_ptr<const CompiledStructuredOutput> grammar;  // null: unconstrained
  int32_t reasoning_end = -1;  // >= 0: the grammar starts after this token (after_reasoning)
  std::vector<std::vector<int32_t>> bad_words;  // sampling.bad_words' token sequences (bad_words.h)
  std::shared_ptr<const ImageSpans> images;      // null: no image in the prompt
  std::string label;
  EventSink sink;
};

// Validates `request` and prepares it under id `id`. `compiler` may be null (structured outputs
// then fail with UNIMPLEMENTED naming the field).
Result<AcceptedRequest> accept_request(Request request, RequestId id, EventSink sink, const Tokenizer& tokenizer,
                                       const IntakeLimits& limits, const StructuredOutputCompiler* compiler);

// The prompt ids of `request` (moved out of prompt_ids, or the tokenized prompt text with BOS
// per add_special_tokens). Errors when neither or both are given.
Result<std::vector<int32_t>> tokenize_prompt(Request& request, const Tokenizer& tokenizer);

// Stable 64-bit hash of a cache salt ("" → 0, the shared namespace).
uint64_t cache_salt_hash(const std::string& salt);

}  // namespace deepinfer::engine
