// accept_request (see request_intake.h). Order of checks: prompt presence, tokenization, ids in
// the vocabulary, length vs max_model_len, sampling fields (SamplingParams::validate names them),
// unsupported features, structured output (after_reasoning before the grammar's own errors).
// Messages name the field as the caller spelled it.
#include "engine/request_intake.h"

#include "base/status.h"
#include "engine/bad_words.h"
#include "engine/reasoning_gate.h"
#include "sample/keyed_noise.h"

namespace deepinfer::engine {

Result<std::vector<int32_t>> tokenize_prompt(Request& request, const Tokenizer& tokenizer) {
  const bool has_text = !request.prompt.empty();
  const bool has_ids = !request.prompt_ids.empty();
  if (has_text && has_ids) return invalid_argument("prompt and prompt_ids are both set; give exactly one");
  if (!has_text && !has_ids) return invalid_argument("prompt is empty (give a non-empty prompt or prompt_ids)");
  if (has_ids) return std::move(request.prompt_ids);
  std::vector<int32_t> ids = tokenizer.encode(request.prompt, /*match_special=*/true);
  if (request.add_special_tokens && (ids.empty() || ids.front() != tokenizer.bos_id())) {
    ids.insert(ids.begin(), tokenizer.bos_id());
  }
  if (ids.empty()) return invalid_argument("prompt tokenizes to no tokens");
  return ids;
}

namespace {

Status check_prompt(const std::vector<int32_t>& ids, const IntakeLimits& limits) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limits.n_vocab) {
      return invalid_argument("prompt_ids[{}] = {} is outside the vocabulary [0, {})", i, ids[i], limits.n_vocab);
    }
  }
  if (static_cast<int64_t>(ids.size()) >= limits.max_model_len) {
    return invalid_argument("prompt has {} tokens but max_model_len is {} (prompt plus at least one generated "
                            "token must fit)", ids.size(), limits.max_model_len);
  }
  return Status::ok();
}

Status check_supported(const SamplingParams& s, const IntakeLimits& limits) {
  if (s.prompt_logprobs.has_value() && !limits.no_prompt_logprobs.empty()) {
    return failed_precondition("sampling.prompt_logprobs: {}", limits.no_prompt_logprobs);
  }
  return Status::ok();
}

}  // namespace

uint64_t cache_salt_hash(const std::string& salt) {
  if (salt.empty()) return 0;
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then one mix so short salts spread
  for (unsigned char c : salt) h = (h ^ c) * 0x100000001b3ull;
  h = sample::mix64(h);
  return h == 0 ? 1 : h;
}

Result<AcceptedRequest> accept_request(Request request, RequestId id, EventSink sink, const Tokenizer& tokenizer,
                                       const IntakeLimits& limits, const StructuredOutputCompiler* compiler) {
  AcceptedRequest out;
  out.id = id;
  out.label = request.request_label;
  DI_ASSIGN_OR_RETURN(out.prompt_ids, tokenize_prompt(request, tokenizer));
  DI_ASSIGN_OR_RETURN(out.images,
                      expand_images(&out.prompt_ids, request.images, limits.image_token_id, limits.image_encoder));
  DI_RETURN_IF_ERROR(check_prompt(out.prompt_ids, limits));
  if (Status s = request.sampling.validate(limits.n_vocab); !s.is_ok()) return s.with_context("sampling");
  DI_RETURN_IF_ERROR(check_supported(request.sampling, limits));
  if (request.structured_output.has_value()) {
    if (compiler == nullptr) {
      return unimplemented("structured_output is not available: the grammar engine is not wired into this build");
    }
    const StructuredOutput& so = *request.structured_output;
    if (so.after_reasoning && so.kind == StructuredOutput::Kind::kDsmlToolCalls) {
      return invalid_argument("structured_output.after_reasoning: not used with DSML tool calls (set \"thinking\" "
                              "in their spec instead)");
    }
    if (so.after_reasoning) {
      DI_ASSIGN_OR_RETURN(out.reasoning_end, reasoning_end_token(tokenizer));
    }
    DI_ASSIGN_OR_RETURN(out.grammar, compiler->compile(so));
  }
  out.bad_words = bad_word_token_ids(request.sampling.bad_words, tokenizer, limits.n_vocab);
  for (int32_t i = 0; i < request.sampling.n; ++i) {
    out.seeds.push_back(sample::resolve_sequence_seed(request.sampling.seed, limits.engine_seed, id, i));
  }
  out.cache_salt = cache_salt_hash(request.cache_salt);
  if (out.images) {
    // Image spans are all one token id: the images' contents name the prefix-cache namespace.
    out.cache_salt = sample::mix64(out.cache_salt ^ out.images->content_hash);
    if (out.cache_salt == 0) out.cache_salt = 1;
  }
  out.sampling = std::make_shared<const SamplingParams>(std::move(request.sampling));
  out.sink = std::move(sink);
  if (!out.sink) return invalid_argument("sink: an event sink is required");
  return out;
}

}  // namespace deepinfer::engine
