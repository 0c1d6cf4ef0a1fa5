// Public sampling parameters, shaped like vLLM's / OpenAI's SamplingParams, and the logprob
// entry returned to callers. Plain data: no tensors, no engine types. The order in which the
// engine applies these fields, and its determinism guarantees, are a contract written down in
// docs/sampling.md and src/sample/sampler.h. validate() is implemented in src/sample (di_sample).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

// Most top logprobs a request may ask for (OpenAI's and vLLM's default cap).
inline constexpr int32_t kMaxLogprobs = 20;
// Most parallel samples (`n`) per request; each is a full sequence in the engine.
inline constexpr int32_t kMaxSamplesPerRequest = 128;
// OpenAI's bound on each logit_bias value.
inline constexpr float kMaxLogitBias = 100.0f;
// OpenAI's bound on presence and frequency penalties.
inline constexpr float kMaxAdditivePenalty = 2.0f;

// Which distribution reported logprobs describe.
enum class LogprobsMode : uint8_t {
  // log_softmax of the model's logits exactly as produced, before bias, masks, penalties,
  // temperature or truncation (vLLM v1's default "raw_logprobs").
  kRaw,
  // log_softmax of the final sampling distribution: after masks, bias, penalties, temperature,
  // top-k, top-p and min-p (tokens outside the support get -inf). For greedy requests
  // (temperature 0): after masks, bias and penalties, at temperature 1, without truncation.
  kProcessed,
};

// One (token, logprob) pair. Top-logprob lists are sorted by logprob descending, ties by
// lower token id; -inf is reported as -infinity (the HTTP layer chooses how to print it).
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

// Per-request sampling parameters. Defaults reproduce plain multinomial sampling at T = 1.
// Copyable value type; validate() before submitting (the engine validates again).
struct SamplingParams {
  // Number of independent sequences for this prompt (each gets a derived seed, see seed).
  int32_t n = 1;

  // 0 = greedy (argmax, lowest token id on ties); otherwise logits are divided by it.
  float temperature = 1.0f;
  // Keep the k highest logits (all tokens tied with the k-th are kept). -1 or 0 = off.
  int32_t top_k = -1;
  // Keep the smallest set of most likely tokens whose mass reaches top_p (ties kept). 1 = off.
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p × the top probability. 0 = off.
  float min_p = 0.0f;

  // vLLM definition: for every token in prompt ∪ output, a positive logit is divided by it and a
  // negative one multiplied by it. 1 = off; must be > 0.
  float repetition_penalty = 1.0f;
  // Subtracted once from the logit of every token that occurs in the output so far.
  float presence_penalty = 0.0f;
  // Subtracted count(token in output) times from its logit.
  float frequency_penalty = 0.0f;
  // Added to the logit of the given token id, in [-100, 100].
  std::map<int32_t, float> logit_bias;
  // If not empty, only these token ids may be sampled (applied like a grammar mask).
  std::vector<int32_t> allowed_token_ids;
  // Words that may not be generated (vLLM's bad_words): each is tokenized as written (leading
  // blanks dropped) and, where that makes a different first token of the same length, with one
  // leading space; the last token of such a sequence is banned wherever the output so far ends
  // with the tokens before it (a one-token word: always). Non-empty, valid UTF-8, at most 1,000.
  std::vector<std::string> bad_words;

  // EOS and stop_token_ids are suppressed until this many tokens have been generated (unless
  // nothing else is allowed, e.g. a grammar that can only end), and stop strings are ignored.
  int32_t min_tokens = 0;
  // Most tokens to generate; nullopt = until the context window is full.
  std::optional<int32_t> max_tokens;
  // Stop strings, matched on the detokenized output; excluded from the output text unless
  // include_stop_str_in_output. Non-empty, valid UTF-8.
  std::vector<std::string> stop;
  // Token ids that end the sequence (in addition to EOS unless ignore_eos).
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  // Keep the matched stop string (or the text of the stop token) in the output.
  bool include_stop_str_in_output = false;
  // Decoded text omits special tokens.
  bool skip_special_tokens = true;

  // Makes sampling reproducible: the noise of sequence i of this request is keyed by
  // (derived seed, position, token id), so the result does not depend on the batch, the row
  // order or the thread count. nullopt = an engine seed mixed with the request id (still
  // deterministic for one engine run and one submission order of request ids).
  std::optional<uint64_t> seed;

  // Top logprobs to return per generated token, 0..20 (0 = only the sampled token's logprob).
  // nullopt = none.
  std::optional<int32_t> logprobs;
  // Same for every prompt position but the first (vLLM's prompt_logprobs): the logprob of each
  // prompt token given the ones before it, its rank and the top N of that distribution — always
  // raw (log_softmax of the model's logits, whatever logprobs_mode says), as vLLM reports them.
  // The request then reads no cached prefix (its whole prompt is computed); nullopt = none.
  std::optional<int32_t> prompt_logprobs;
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;

  // Checks every field that does not depend on the model. The message names the field, the
  // offending value and the allowed range, e.g. "top_p = 1.5 is outside (0, 1]".
  Status validate() const;
  // Additionally checks token ids (logit_bias, allowed_token_ids, stop_token_ids) against
  // [0, n_vocab).
  Status validate(int32_t n_vocab) const;

  // True when temperature == 0 (argmax sampling).
  bool is_greedy() const { return temperature == 0.0f; }
};

}  // namespace deepinfer
