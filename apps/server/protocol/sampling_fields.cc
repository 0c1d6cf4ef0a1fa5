// Sampling fields -> SamplingParams (see sampling_fields.h).
#include "protocol/sampling_fields.h"

#include <limits>

#include "protocol/json_reader.h"

namespace deepinfer::protocol {
namespace {

Status read_float(const Json& body, std::string_view key, float* out) {
  DI_PROTO_ASSIGN_OR_RETURN(auto v, opt_number(body, key, ""));
  if (v) *out = static_cast<float>(*v);
  return Status::ok();
}

Status read_int32(const Json& body, std::string_view key, std::optional<int32_t>* out) {
  DI_PROTO_ASSIGN_OR_RETURN(auto v, opt_int(body, key, ""));
  if (!v) return Status::ok();
  if (*v < 0 || *v > std::numeric_limits<int32_t>::max()) {
    return json_error(std::string(key), "must be a non-negative 32-bit integer");
  }
  *out = static_cast<int32_t>(*v);
  return Status::ok();
}

Status read_stop(const Json& body, std::string_view key, std::vector<std::string>* out) {
  const Json* stop = member(body, key);
  if (stop == nullptr) return Status::ok();
  if (stop->is_string()) {
    out->push_back(stop->get<std::string>());
    return Status::ok();
  }
  if (!stop->is_array()) return type_error(std::string(key), "a string or an array of strings", *stop);
  for (size_t i = 0; i < stop->size(); ++i) {
    if (!(*stop)[i].is_string()) return type_error(json_path(std::string(key), i), "a string", (*stop)[i]);
    out->push_back((*stop)[i].get<std::string>());
  }
  return Status::ok();
}

Status read_seed(const Json& body, SamplingParams* out) {
  const Json* seed = member(body, "seed");
  if (seed == nullptr) return Status::ok();
  if (!seed->is_number_integer()) return type_error("seed", "an integer", *seed);
  out->seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                         : static_cast<uint64_t>(seed->get<int64_t>());
  return Status::ok();
}

}  // namespace

Status read_openai_sampling(const Json& body, SamplingParams* out) {
  std::optional<int32_t> max_tokens, max_completion_tokens, n, top_logprobs, min_tokens, top_k;
  DI_PROTO_RETURN_IF_ERROR(read_int32(body, "max_tokens", &max_tokens));
  DI_PROTO_RETURN_IF_ERROR(read_int32(body, "max_completion_tokens", &max_completion_tokens));
  out->max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "temperature", &out->temperature));
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "top_p", &out->top_p));
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "min_p", &out->min_p));
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "presence_penalty", &out->presence_penalty));
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "frequency_penalty", &out->frequency_penalty));
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "repetition_penalty", &out->repetition_penalty));
  DI_PROTO_ASSIGN_OR_RETURN(auto k, opt_int(body, "top_k", ""));
  if (k) out->top_k = static_cast<int32_t>(std::max<int64_t>(-1, std::min<int64_t>(*k, INT32_MAX)));
  DI_PROTO_RETURN_IF_ERROR(read_stop(body, "stop", &out->stop));
  // vLLM's extension: words the output may not contain (SamplingParams::bad_words).
  DI_PROTO_ASSIGN_OR_RETURN(const Json* bad_words, opt_array(body, "bad_words", ""));
  if (bad_words != nullptr) {
    for (size_t i = 0; i < bad_words->size(); ++i) {
      const Json& w = (*bad_words)[i];
      if (!w.is_string()) return type_error(json_path("bad_words", i), "a string", w);
      out->bad_words.push_back(w.get<std::string>());
    }
  }
  DI_PROTO_RETURN_IF_ERROR(read_seed(body, out));
  DI_PROTO_RETURN_IF_ERROR(read_int32(body, "n", &n));
  if (n) out->n = *n;  // range checked by SamplingParams::validate (finish_request)
  DI_PROTO_RETURN_IF_ERROR(read_int32(body, "min_tokens", &min_tokens));
  out->min_tokens = min_tokens.value_or(0);
  DI_PROTO_ASSIGN_OR_RETURN(auto logprobs, opt_bool(body, "logprobs", ""));
  DI_PROTO_RETURN_IF_ERROR(read_int32(body, "top_logprobs", &top_logprobs));
  // As OpenAI and vLLM: the alternatives come with the chosen tokens' logprobs, never alone.
  if (top_logprobs && !logprobs.value_or(false)) return json_error("top_logprobs", "requires logprobs to be true");
  if (logprobs.value_or(false)) out->logprobs = top_logprobs.value_or(0);
  DI_PROTO_ASSIGN_OR_RETURN(const Json* bias, opt_object(body, "logit_bias", ""));
  if (bias != nullptr) {
    for (const auto& [key, value] : bias->items()) {
      std::string path = json_path("logit_bias", key);
      char* end = nullptr;
      long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX) {
        return json_error(path, "keys must be token ids");
      }
      if (!value.is_number()) return type_error(path, "a number", value);
      out->logit_bias[static_cast<int32_t>(id)] = value.get<float>();
    }
  }
  return Status::ok();
}

Status read_responses_sampling(const Json& body, SamplingParams* out) {
  std::optional<int32_t> max_tokens, top_logprobs;
  DI_PROTO_RETURN_IF_ERROR(read_int32(body, "max_output_tokens", &max_tokens));
  out->max_tokens = max_tokens;
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "temperature", &out->temperature));
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "top_p", &out->top_p));
  DI_PROTO_RETURN_IF_ERROR(read_int32(body, "top_logprobs", &top_logprobs));
  if (top_logprobs) out->logprobs = top_logprobs;
  return Status::ok();
}

Status read_anthropic_sampling(const Json& body, SamplingParams* out) {
  std::optional<int32_t> max_tokens;
  DI_PROTO_RETURN_IF_ERROR(read_int32(body, "max_tokens", &max_tokens));
  if (!max_tokens) return json_error("max_tokens", "required");
  out->max_tokens = max_tokens;
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "temperature", &out->temperature));
  DI_PROTO_RETURN_IF_ERROR(read_float(body, "top_p", &out->top_p));
  DI_PROTO_ASSIGN_OR_RETURN(auto k, opt_int(body, "top_k", ""));
  if (k) out->top_k = static_cast<int32_t>(std::max<int64_t>(-1, std::min<int64_t>(*k, INT32_MAX)));
  DI_PROTO_RETURN_IF_ERROR(read_stop(body, "stop_sequences", &out->stop));
  return Status::ok();
}

}  // namespace deepinfer::protocol
