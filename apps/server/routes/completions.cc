// POST /v1/completions: the legacy OpenAI Completions API on raw text. The prompt (a string, or
// token ids, or a list of either: a batch of prompts) is tokenized with special tokens matched,
// like any raw-prompt API: the client writes the whole prompt, so there is no template boundary to
// protect. Stop strings, UTF-8 completeness and text deltas come from the engine's TokenEvent.text.
// A batch of P prompts with n choices each is P engine requests; choice p * n + j is sample j of
// prompt p (as OpenAI and vLLM number them). Legacy logprobs (int, 0..20); with echo they cover the
// prompt's tokens too (the engine's prompt logprobs; the first token's is null), and max_tokens 0
// echoes the prompt alone (vLLM: one token is generated and dropped). vLLM's `prompt_logprobs`
// extension comes back as the choice's prompt_logprobs. Prompt logprobs arrive with sample 0's
// first tokens: the other samples' events wait for them, so every choice starts with its prompt.
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <utility>

#include "generation.h"
#include "json_text.h"
#include "metrics.h"
#include "protocol/json_reader.h"
#include "protocol/sampling_fields.h"
#include "routes/chat_call.h"
#include "routes/chat_stream.h"
#include "routes/logprobs_json.h"
#include "routes/request_checks.h"
#include "routes/routes.h"

namespace deepinfer::server {
namespace {

using protocol::Json;

constexpr int32_t kDefaultMaxTokens = 16;  // OpenAI's default for this API

constexpr size_t kMaxPrompts = 2048;  // OpenAI's limit on a prompt array

struct CompletionRequest {
  std::string model;
  std::vector<std::vector<int32_t>> prompts;  // token ids of each prompt of the batch
  // Each prompt as echoed: a text prompt as the client wrote it (not the BOS its ids gained), a
  // token prompt decoded (vLLM's echo).
  std::vector<std::optional<std::string>> prompt_texts;
  SamplingParams sampling;
  bool stream = false, include_usage = false, echo = false;
  bool echo_only = false;  // echo with max_tokens 0: the generated token is dropped
  std::optional<int32_t> prompt_logprobs;  // the body's field (sampling.prompt_logprobs: it or echo's)
};

// One prompt: a string, or a non-empty array of token ids (`path` names it in errors).
Result<std::vector<int32_t>> read_one_prompt(const Json& one, const std::string& path, const Tokenizer& tokenizer,
                                             bool add_special) {
  if (one.is_string()) {
    std::vector<int32_t> ids = tokenizer.encode(one.get<std::string>(), /*match_special=*/true);
    if (add_special && (ids.empty() || ids.front() != tokenizer.bos_id())) ids.insert(ids.begin(), tokenizer.bos_id());
    return ids;
  }
  if (!one.is_array() || one.empty()) {
    return Status(StatusCode::kInvalidArgument, path + ": expected a string or a non-empty array of token ids");
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < one.size(); ++i) {
    const Json& t = one[i];
    int64_t id = t.is_number_integer() ? t.get<int64_t>() : -1;
    if (id < 0 || id >= tokenizer.n_vocab()) {
      return Status(StatusCode::kInvalidArgument, path + "[" + std::to_string(i) + "]: expected a token id in [0, " +
                                                      std::to_string(tokenizer.n_vocab()) + ")");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// `prompt`: a string, token ids, or a batch — an array of strings or of token-id arrays — into
// r->prompts and r->prompt_texts.
Status read_prompts(const Json& body, const Tokenizer& tokenizer, bool add_special, CompletionRequest* r) {
  const Json* prompt = protocol::member(body, "prompt");
  if (prompt == nullptr) return Status(StatusCode::kInvalidArgument, "prompt: required");
  auto add = [&](const Json& one, const std::string& path) -> Status {
    DI_PROTO_ASSIGN_OR_RETURN(std::vector<int32_t> ids, read_one_prompt(one, path, tokenizer, add_special));
    r->prompts.push_back(std::move(ids));
    r->prompt_texts.push_back(one.is_string() ? std::optional<std::string>(one.get<std::string>()) : std::nullopt);
    return Status::ok();
  };
  if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number_integer()) {
    if (prompt->size() > kMaxPrompts) {
      return Status(StatusCode::kInvalidArgument,
                    "prompt: at most " + std::to_string(kMaxPrompts) + " prompts per request");
    }
    for (size_t p = 0; p < prompt->size(); ++p) DI_PROTO_RETURN_IF_ERROR(add((*prompt)[p], "prompt[" + std::to_string(p) + "]"));
    return Status::ok();
  }
  return add(*prompt, "prompt");
}

Status read_extensions(const Json& body, CompletionRequest* r) {
  SamplingParams& s = r->sampling;
  for (auto [key, field] : {std::pair{"ignore_eos", &s.ignore_eos}, {"skip_special_tokens", &s.skip_special_tokens},
                            {"include_stop_str_in_output", &s.include_stop_str_in_output}}) {
    DI_PROTO_ASSIGN_OR_RETURN(auto v, protocol::opt_bool(body, key, ""));
    if (v) *field = *v;
  }
  DI_PROTO_ASSIGN_OR_RETURN(const Json* stop_ids, protocol::opt_array(body, "stop_token_ids", ""));
  if (stop_ids != nullptr) {
    for (const Json& id : *stop_ids) {
      if (!id.is_number_integer()) return Status(StatusCode::kInvalidArgument, "stop_token_ids: expected integers");
      s.stop_token_ids.push_back(id.get<int32_t>());
    }
  }
  return Status::ok();
}

Result<CompletionRequest> parse_completion(const Json& body, const Tokenizer& tokenizer) {
  if (!body.is_object()) return Status(StatusCode::kInvalidArgument, "body: expected a JSON object");
  CompletionRequest r;
  DI_PROTO_ASSIGN_OR_RETURN(auto model, protocol::opt_string(body, "model", ""));
  r.model = model.value_or("");
  DI_PROTO_ASSIGN_OR_RETURN(auto add_special, protocol::opt_bool(body, "add_special_tokens", ""));
  DI_PROTO_RETURN_IF_ERROR(read_prompts(body, tokenizer, add_special.value_or(true), &r));
  Json sampling_fields = body;
  sampling_fields.erase("logprobs");  // an integer here, a boolean in Chat Completions
  DI_PROTO_RETURN_IF_ERROR(protocol::read_openai_sampling(sampling_fields, &r.sampling));
  if (!r.sampling.max_tokens) r.sampling.max_tokens = kDefaultMaxTokens;
  DI_PROTO_ASSIGN_OR_RETURN(auto logprobs, protocol::opt_int(body, "logprobs", ""));
  // Capped before the narrowing (2^32 + 3 must not become 3): validation then names the field.
  if (logprobs) r.sampling.logprobs = static_cast<int32_t>(std::clamp<int64_t>(*logprobs, -1, INT32_MAX));
  DI_PROTO_ASSIGN_OR_RETURN(auto best_of, protocol::opt_int(body, "best_of", ""));
  if (best_of && *best_of != r.sampling.n) return Status(StatusCode::kInvalidArgument, "best_of: must equal n");
  DI_PROTO_ASSIGN_OR_RETURN(auto suffix, protocol::opt_string(body, "suffix", ""));
  if (suffix && !suffix->empty()) return Status(StatusCode::kInvalidArgument, "suffix: not supported");
  DI_PROTO_ASSIGN_OR_RETURN(auto echo, protocol::opt_bool(body, "echo", ""));
  r.echo = echo.value_or(false);
  if (r.echo && r.sampling.max_tokens == 0) {  // the prompt alone (the engine samples at least one token)
    r.echo_only = true;
    r.sampling.max_tokens = 1;
  }
  DI_PROTO_ASSIGN_OR_RETURN(auto prompt_logprobs, protocol::opt_int(body, "prompt_logprobs", ""));
  if (prompt_logprobs) {
    r.sampling.prompt_logprobs = static_cast<int32_t>(std::clamp<int64_t>(*prompt_logprobs, -1, INT32_MAX));
  }
  DI_PROTO_ASSIGN_OR_RETURN(auto stream, protocol::opt_bool(body, "stream", ""));
  r.stream = stream.value_or(false);
  DI_PROTO_ASSIGN_OR_RETURN(const Json* so, protocol::opt_object(body, "stream_options", ""));
  if (so != nullptr) {
    if (!r.stream) return Status(StatusCode::kInvalidArgument, "stream_options: only allowed when stream is true");
    DI_PROTO_ASSIGN_OR_RETURN(auto usage, protocol::opt_bool(*so, "include_usage", "stream_options"));
    r.include_usage = usage.value_or(false);
  }
  DI_PROTO_RETURN_IF_ERROR(read_extensions(body, &r));
  DI_PROTO_RETURN_IF_ERROR(r.sampling.validate(tokenizer.n_vocab()));
  // Echo with logprobs covers the prompt's tokens: the engine computes the longer of the two lists.
  r.prompt_logprobs = r.sampling.prompt_logprobs;
  if (r.echo && r.sampling.logprobs) {
    r.sampling.prompt_logprobs = std::max(r.sampling.prompt_logprobs.value_or(0), *r.sampling.logprobs);
  }
  return r;
}

class CompletionCall : public std::enable_shared_from_this<CompletionCall> {
 public:
  CompletionCall(std::shared_ptr<Exchange> exchange, CompletionRequest request, protocol::ResponseMeta meta, Ticket ticket)
      : exchange_(std::move(exchange)), request_(std::move(request)), meta_(std::move(meta)), ticket_(std::move(ticket)),
        n_per_prompt_(std::max(1, request_.sampling.n)),
        choices_(request_.prompts.size() * static_cast<size_t>(n_per_prompt_)),
        n_prompt_(request_.prompts.size(), 0),
        n_cached_(request_.prompts.size(), 0),
        prompt_logprobs_(request_.prompts.size()) {
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      const size_t p = i / static_cast<size_t>(n_per_prompt_);
      if (request_.echo) {
        const std::optional<std::string>& written = request_.prompt_texts[p];
        c.echo = valid_utf8(written ? *written : exchange_->ctx.tokenizer->decode(request_.prompts[p]));
      }
      c.text = c.echo;
    }
  }

  // One engine request per prompt (engine_request carries the sampling; its prompt is replaced).
  void run(Request engine_request) {
    std::weak_ptr<CompletionCall> weak = weak_from_this();
    std::lock_guard lock(mu_);
    for (size_t p = 0; p < request_.prompts.size(); ++p) {
      Request r = engine_request;
      r.prompt_ids = request_.prompts[p];
      auto generation = Generation::start(
          exchange_->ctx, std::move(r),
          [self = shared_from_this(), p](const TokenEvent& e) { self->on_event(p, e); }, exchange_->start_time());
      if (!generation.is_ok()) {
        done_ = true;
        for (const auto& g : generations_) g->abort();
        return exchange_->reply_error(error_from_status(generation.status()));
      }
      generations_.push_back(*generation);
    }
    if (request_.stream) exchange_->start_sse();
    exchange_->responder().on_disconnect([weak] {
      if (auto self = weak.lock()) self->on_client_gone();
    });
  }

 private:
  struct Choice {
    std::string echo;  // the prompt's text when echoed
    std::string text;
    Json logprobs;  // null until the first token (echo with logprobs: the prompt's from the first event)
    Json prompt_logprobs;  // the body's prompt_logprobs: vLLM's list, from the first event
    std::optional<FinishReason> finish;
    int n_tokens = 0;
    bool streamed_echo = false;
    bool started = false;  // its first event is taken in
  };
  // A prompt's logprobs (sampling.prompt_logprobs): known with sample 0's first event; until then
  // the other samples' events wait here.
  struct PromptLogprobs {
    bool known = false;
    std::vector<TokenLogprobs> entries;
    std::vector<TokenEvent> held;
  };

  void on_client_gone() {
    exchange_->ctx.metrics.on_client_disconnect();
    std::vector<std::shared_ptr<Generation>> gs;
    {
      std::lock_guard lock(mu_);
      client_gone_ = true;
      gs = generations_;
    }
    for (const auto& g : gs) g->abort();
  }

  Json chunk(int index, std::string text, Json logprobs, const Json& finish, Json prompt_logprobs = nullptr) const {
    Json choice{{"index", index}, {"text", std::move(text)}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
    if (!prompt_logprobs.is_null()) choice["prompt_logprobs"] = std::move(prompt_logprobs);
    Json c{{"id", meta_.id}, {"object", "text_completion"}, {"created", meta_.created}, {"model", meta_.model},
           {"choices", Json::array({std::move(choice)})}};
    if (request_.include_usage) c["usage"] = nullptr;
    return c;
  }

  void on_event(size_t prompt, const TokenEvent& e) {
    std::lock_guard lock(mu_);
    if (done_ || e.sample_index < 0 || e.sample_index >= n_per_prompt_) return;
    if (!request_.sampling.prompt_logprobs) return take_event(prompt, e);
    PromptLogprobs& pl = prompt_logprobs_[prompt];
    if (pl.known) return take_event(prompt, e);
    if (e.sample_index != 0) {
      pl.held.push_back(e);
      return;
    }
    pl.known = true;
    pl.entries = e.prompt_logprobs;
    take_event(prompt, e);
    for (const TokenEvent& held : std::exchange(pl.held, {})) {
      if (done_) break;
      take_event(prompt, held);
    }
  }

  // One event of the choice it belongs to (under mu_).
  void take_event(size_t prompt, const TokenEvent& e) {
    const int index = static_cast<int>(prompt) * n_per_prompt_ + e.sample_index;
    Choice& c = choices_[static_cast<size_t>(index)];
    n_prompt_[prompt] = std::max(n_prompt_[prompt], e.n_prompt_tokens);
    n_cached_[prompt] = std::max(n_cached_[prompt], e.n_cached_tokens);
    if (e.finish && (*e.finish == FinishReason::kAbort || *e.finish == FinishReason::kError)) {
      return fail(*e.finish == FinishReason::kError ? ApiError{500, "engine error: " + e.error, "", "", {}}
                                                    : ApiError{503, "The request was aborted: the server is shutting down.", "", "", {}});
    }
    const bool first = !c.started;
    c.started = true;
    Json lps = nullptr, prompt_lps = nullptr;
    if (first && request_.sampling.prompt_logprobs) {
      const std::vector<TokenLogprobs>& entries = prompt_logprobs_[prompt].entries;
      if (request_.echo && request_.sampling.logprobs) {
        append_prompt_completion_logprobs(*exchange_->ctx.tokenizer, request_.prompts[prompt], entries,
                                          *request_.sampling.logprobs, c.echo, &lps);
        c.logprobs = lps;
      }
      if (request_.prompt_logprobs) {
        prompt_lps = prompt_logprobs_json(*exchange_->ctx.tokenizer, request_.prompts[prompt], entries,
                                          *request_.prompt_logprobs);
        c.prompt_logprobs = prompt_lps;
      }
    }
    // Echo with max_tokens 0: the generated token is not part of the answer.
    const std::string text = request_.echo_only ? std::string() : e.text;
    size_t offset = c.text.size();
    c.text += text;
    if (!request_.echo_only) c.n_tokens += static_cast<int>(e.token_ids.size());
    if (request_.sampling.logprobs && !e.logprobs.empty() && !request_.echo_only) {
      append_completion_logprobs(*exchange_->ctx.tokenizer, e.logprobs, offset, &lps);
      append_completion_logprobs(*exchange_->ctx.tokenizer, e.logprobs, offset, &c.logprobs);
    }
    if (e.finish) c.finish = request_.echo_only ? FinishReason::kLength : *e.finish;
    if (request_.stream) {
      std::string delta = c.streamed_echo ? text : c.echo + text;
      c.streamed_echo = true;
      Json finish = c.finish && e.finish ? Json(finish_text(*c.finish)) : Json(nullptr);
      if (!delta.empty() || !lps.is_null() || !prompt_lps.is_null() || e.finish) {
        exchange_->write(sse_data(chunk(index, valid_utf8(delta), std::move(lps), finish, std::move(prompt_lps))));
      }
    }
    if (e.finish && ++n_done_ == static_cast<int>(choices_.size())) complete();
  }

  // Each prompt's tokens count once, whatever n (its cached tokens: the most any of its samples saw).
  protocol::Json usage() const {
    int n_completion = 0;
    for (const Choice& c : choices_) n_completion += c.n_tokens;
    const int n_prompt = std::accumulate(n_prompt_.begin(), n_prompt_.end(), 0);
    const int n_cached = std::accumulate(n_cached_.begin(), n_cached_.end(), 0);
    return Json{{"prompt_tokens", n_prompt}, {"completion_tokens", n_completion}, {"total_tokens", n_prompt + n_completion},
                {"prompt_tokens_details", {{"cached_tokens", n_cached}}}};
  }

  void complete() {
    done_ = true;
    Json u = usage();
    exchange_->annotate("prompt_tokens", u["prompt_tokens"]);
    exchange_->annotate("completion_tokens", u["completion_tokens"]);
    exchange_->annotate("finish_reason", finish_text(choices_[0].finish.value_or(FinishReason::kStop)));
    if (request_.stream) {
      if (request_.include_usage) {
        Json last = chunk(0, "", nullptr, nullptr);
        last["choices"] = Json::array();
        last["usage"] = u;
        exchange_->write(sse_data(last));
      }
      exchange_->write("data: [DONE]\n\n");
      exchange_->end_stream();
    } else {
      Json choices = Json::array();
      for (size_t i = 0; i < choices_.size(); ++i) {
        const Choice& c = choices_[i];
        choices.push_back(Json{{"index", i}, {"text", valid_utf8(c.text)}, {"logprobs", c.logprobs},
                               {"finish_reason", finish_text(c.finish.value_or(FinishReason::kStop))}});
        if (request_.prompt_logprobs) choices.back()["prompt_logprobs"] = c.prompt_logprobs;
      }
      exchange_->reply_json(200, Json{{"id", meta_.id}, {"object", "text_completion"}, {"created", meta_.created},
                                      {"model", meta_.model}, {"choices", std::move(choices)}, {"usage", std::move(u)}});
    }
    ticket_.release();
  }

  void fail(const ApiError& error) {
    done_ = true;
    for (const auto& g : generations_) g->abort();
    exchange_->annotate("finish_reason", client_gone_ ? "client_disconnected" : "error");
    if (!client_gone_) {
      if (request_.stream) {
        exchange_->write(sse_data(error_json(error, ApiFormat::kOpenAI)) + "data: [DONE]\n\n");
        exchange_->end_stream();
      } else {
        exchange_->reply_error(error);
      }
    }
    ticket_.release();
  }

  std::shared_ptr<Exchange> exchange_;
  CompletionRequest request_;
  protocol::ResponseMeta meta_;
  Ticket ticket_;
  const int n_per_prompt_;  // n

  std::mutex mu_;
  std::vector<std::shared_ptr<Generation>> generations_;  // one per prompt
  std::vector<Choice> choices_;   // [prompt][sample]
  std::vector<int> n_prompt_;     // tokens of each prompt
  std::vector<int> n_cached_;     // of them served from the prefix cache
  std::vector<PromptLogprobs> prompt_logprobs_;  // [prompt]
  int n_done_ = 0;
  bool done_ = false;
  bool client_gone_ = false;
};

}  // namespace

void handle_completions(const std::shared_ptr<Exchange>& exchange) {
  ServerContext& ctx = exchange->ctx;
  Result<Json> body = parse_json_body(exchange->request().body);
  if (!body.is_ok()) return exchange->reply_error(error_from_status(body.status()));
  Result<CompletionRequest> parsed = parse_completion(*body, *ctx.tokenizer);
  if (!parsed.is_ok()) return exchange->reply_error(error_from_status(parsed.status()));
  CompletionRequest request = std::move(parsed).value();
  if (auto e = check_model(ctx, request.model)) return exchange->reply_error(*e);
  for (const std::vector<int32_t>& prompt : request.prompts) {
    if (auto e = check_context(ctx, static_cast<int64_t>(prompt.size()), request.sampling.max_tokens)) {
      if (request.prompts.size() > 1) e->param = "prompt";
      return exchange->reply_error(*e);
    }
  }
  Request engine_request;
  engine_request.sampling = request.sampling;
  engine_request.request_label = exchange->id();
  Ticket ticket = admit(*exchange);
  if (!ticket.valid()) return;
  protocol::ResponseMeta meta{new_response_id("cmpl-"), static_cast<int64_t>(std::time(nullptr)),
                              request.model.empty() ? ctx.model_id() : request.model};
  exchange->annotate("response_id", meta.id);
  auto call = std::make_shared<CompletionCall>(exchange, std::move(request), std::move(meta), std::move(ticket));
  call->run(std::move(engine_request));
}

}  // namespace deepinfer::server
