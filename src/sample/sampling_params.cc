// SamplingParams::validate: the single place that decides which parameter values are legal.
// Every message names the field, the offending value and the allowed range, so the HTTP layer
// can return it verbatim as a 400. NaN fails every range check (comparisons are written so).
#include <cmath>
#include <string_view>

#include "base/status.h"
#include "deepinfer/sampling.h"

namespace deepinfer {
namespace {

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n_cont = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n_cont = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n_cont = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n_cont = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n_cont >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= n_cont; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF.
    static constexpr uint32_t kMinForLength[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[n_cont] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n_cont + 1;
  }
  return true;
}

// n_vocab <= 0: the vocabulary is unknown and only negative ids are rejected.
Status check_token_ids(const char* field, const std::vector<int32_t>& ids, int32_t n_vocab) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) return invalid_argument("{}[{}] = {} is negative", field, i, ids[i]);
    if (n_vocab > 0 && ids[i] >= n_vocab) {
      return invalid_argument("{}[{}] = {} is outside the vocabulary [0, {})", field, i, ids[i],
                              n_vocab);
    }
  }
  return Status::ok();
}

Status check_counts(const SamplingParams& p) {
  if (!(p.n >= 1 && p.n <= kMaxSamplesPerRequest)) {
    return invalid_argument("n = {} is outside [1, {}]", p.n, kMaxSamplesPerRequest);
  }
  if (p.max_tokens && *p.max_tokens < 1) {
    return invalid_argument("max_tokens = {} must be >= 1", *p.max_tokens);
  }
  if (p.min_tokens < 0) return invalid_argument("min_tokens = {} must be >= 0", p.min_tokens);
  if (p.max_tokens && p.min_tokens > *p.max_tokens) {
    return invalid_argument("min_tokens = {} is greater than max_tokens = {}", p.min_tokens,
                            *p.max_tokens);
  }
  if (p.logprobs && !(*p.logprobs >= 0 && *p.logprobs <= kMaxLogprobs)) {
    return invalid_argument("logprobs = {} is outside [0, {}]", *p.logprobs, kMaxLogprobs);
  }
  if (p.prompt_logprobs && !(*p.prompt_logprobs >= 0 && *p.prompt_logprobs <= kMaxLogprobs)) {
    return invalid_argument("prompt_logprobs = {} is outside [0, {}]", *p.prompt_logprobs,
                            kMaxLogprobs);
  }
  return Status::ok();
}

Status check_distribution(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f && std::isfinite(p.temperature))) {
    return invalid_argument("temperature = {} must be finite and >= 0 (0 = greedy)", p.temperature);
  }
  if (p.top_k < -1) {
    return invalid_argument("top_k = {} must be -1 or 0 (off) or >= 1", p.top_k);
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return invalid_argument("top_p = {} is outside (0, 1]", p.top_p);
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return invalid_argument("min_p = {} is outside [0, 1]", p.min_p);
  }
  if (!(p.repetition_penalty > 0.0f && std::isfinite(p.repetition_penalty))) {
    return invalid_argument("repetition_penalty = {} must be finite and > 0 (1 = off)",
                            p.repetition_penalty);
  }
  if (!(std::fabs(p.presence_penalty) <= kMaxAdditivePenalty)) {
    return invalid_argument("presence_penalty = {} is outside [-{}, {}]", p.presence_penalty,
                            kMaxAdditivePenalty, kMaxAdditivePenalty);
  }
  if (!(std::fabs(p.frequency_penalty) <= kMaxAdditivePenalty)) {
    return invalid_argument("frequency_penalty = {} is outside [-{}, {}]", p.frequency_penalty,
                            kMaxAdditivePenalty, kMaxAdditivePenalty);
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (!(std::fabs(bias) <= kMaxLogitBias)) {
      return invalid_argument("logit_bias[{}] = {} is outside [-{}, {}]", id, bias, kMaxLogitBias,
                              kMaxLogitBias);
    }
  }
  return Status::ok();
}

Status check_stop(const SamplingParams& p) {
  for (size_t i = 0; i < p.stop.size(); ++i) {
    if (p.stop[i].empty()) return invalid_argument("stop[{}] is empty", i);
    if (!valid_utf8(p.stop[i])) return invalid_argument("stop[{}] is not valid UTF-8", i);
  }
  constexpr size_t kMaxBadWords = 1000;
  if (p.bad_words.size() > kMaxBadWords) {
    return invalid_argument("bad_words has {} words, at most {}", p.bad_words.size(), kMaxBadWords);
  }
  for (size_t i = 0; i < p.bad_words.size(); ++i) {
    if (p.bad_words[i].find_first_not_of(" \t\n\r") == std::string::npos) {
      return invalid_argument("bad_words[{}] is empty", i);
    }
    if (!valid_utf8(p.bad_words[i])) return invalid_argument("bad_words[{}] is not valid UTF-8", i);
  }
  return Status::ok();
}

}  // namespace

Status SamplingParams::validate() const {
  DI_RETURN_IF_ERROR(check_counts(*this));
  DI_RETURN_IF_ERROR(check_distribution(*this));
  DI_RETURN_IF_ERROR(check_stop(*this));
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return invalid_argument("logit_bias token id {} is negative", id);
  }
  DI_RETURN_IF_ERROR(check_token_ids("allowed_token_ids", allowed_token_ids, /*n_vocab=*/0));
  DI_RETURN_IF_ERROR(check_token_ids("stop_token_ids", stop_token_ids, /*n_vocab=*/0));
  return Status::ok();
}

Status SamplingParams::validate(int32_t n_vocab) const {
  DI_RETURN_IF_ERROR(validate());
  if (n_vocab <= 0) return invalid_argument("n_vocab = {} must be > 0", n_vocab);
  for (const auto& [id, bias] : logit_bias) {
    if (id >= n_vocab) {
      return invalid_argument("logit_bias token id {} is outside the vocabulary [0, {})", id,
                              n_vocab);
    }
  }
  DI_RETURN_IF_ERROR(check_token_ids("allowed_token_ids", allowed_token_ids, n_vocab));
  DI_RETURN_IF_ERROR(check_token_ids("stop_token_ids", stop_token_ids, n_vocab));
  return Status::ok();
}

}  // namespace deepinfer
