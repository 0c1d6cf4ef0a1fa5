// POST /v1/completions: the legacy OpenAI Completions API on raw text. The prompt (a string, or
// token ids, or a one-element list of either) is tokenized with special tokens matched, like any
// raw-prompt API: the client writes the whole prompt, so there is no template boundary to protect.
// Stop strings, UTF-8 completeness and text deltas come from the engine's TokenEvent.text.
// One prompt per request; echo without logprobs; n choices; legacy logprobs (int, 0..20).
#include <mutex>

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

struct CompletionRequest {
  std::string model;
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  bool stream = false, include_usage = false, echo = false;
};

Result<std::vector<int32_t>> read_prompt(const Json& body, const Tokenizer& tokenizer, bool add_special) {
  const Json* prompt = protocol::member(body, "prompt");
  if (prompt == nullptr) return Status(StatusCode::kInvalidArgument, "prompt: required");
  const Json* one = prompt;
  if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number_integer()) {
    if (prompt->size() != 1) return Status(StatusCode::kInvalidArgument, "prompt: only one prompt per request is supported");
    one = &(*prompt)[0];
  }
  if (one->is_string()) {
    std::vector<int32_t> ids = tokenizer.encode(one->get<std::string>(), /*match_special=*/true);
    if (add_special && (ids.empty() || ids.front() != tokenizer.bos_id())) ids.insert(ids.begin(), tokenizer.bos_id());
    return ids;
  }
  if (!one->is_array() || one->empty()) {
    return Status(StatusCode::kInvalidArgument, "prompt: expected a string or a non-empty array of token ids");
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < one->size(); ++i) {
    const Json& t = (*one)[i];
    int64_t id = t.is_number_integer() ? t.get<int64_t>() : -1;
    if (id < 0 || id >= tokenizer.n_vocab()) {
      return Status(StatusCode::kInvalidArgument, "prompt[" + std::to_string(i) + "]: expected a token id in [0, " +
                                                      std::to_string(tokenizer.n_vocab()) + ")");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
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
  DI_PROTO_ASSIGN_OR_RETURN(r.prompt_ids, read_prompt(body, tokenizer, add_special.value_or(true)));
  Json sampling_fields = body;
  sampling_fields.erase("logprobs");  // an integer here, a boolean in Chat Completions
  DI_PROTO_RETURN_IF_ERROR(protocol::read_openai_sampling(sampling_fields, &r.sampling));
  if (!r.sampling.max_tokens) r.sampling.max_tokens = kDefaultMaxTokens;
  DI_PROTO_ASSIGN_OR_RETURN(auto logprobs, protocol::opt_int(body, "logprobs", ""));
  if (logprobs) r.sampling.logprobs = static_cast<int32_t>(*logprobs);
  DI_PROTO_ASSIGN_OR_RETURN(auto best_of, protocol::opt_int(body, "best_of", ""));
  if (best_of && *best_of != r.sampling.n) return Status(StatusCode::kInvalidArgument, "best_of: must equal n");
  DI_PROTO_ASSIGN_OR_RETURN(auto suffix, protocol::opt_string(body, "suffix", ""));
  if (suffix && !suffix->empty()) return Status(StatusCode::kInvalidArgument, "suffix: not supported");
  DI_PROTO_ASSIGN_OR_RETURN(auto echo, protocol::opt_bool(body, "echo", ""));
  r.echo = echo.value_or(false);
  if (r.echo && r.sampling.logprobs) {
    return Status(StatusCode::kInvalidArgument, "echo: not supported together with logprobs (prompt logprobs)");
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
  return r;
}

class CompletionCall : public std::enable_shared_from_this<CompletionCall> {
 public:
  CompletionCall(std::shared_ptr<Exchange> exchange, CompletionRequest request, protocol::ResponseMeta meta, Ticket ticket)
      : exchange_(std::move(exchange)), request_(std::move(request)), meta_(std::move(meta)), ticket_(std::move(ticket)),
        choices_(static_cast<size_t>(std::max(1, request_.sampling.n))) {
    if (request_.echo) prompt_text_ = valid_utf8(exchange_->ctx.tokenizer->decode(request_.prompt_ids));
    for (Choice& c : choices_) c.text = prompt_text_;
  }

  void run(Request engine_request) {
    std::weak_ptr<CompletionCall> weak = weak_from_this();
    std::lock_guard lock(mu_);
    auto generation = Generation::start(exchange_->ctx, std::move(engine_request),
                                        [self = shared_from_this()](const TokenEvent& e) { self->on_event(e); },
                                        exchange_->start_time());
    if (!generation.is_ok()) {
      done_ = true;
      return exchange_->reply_error(error_from_status(generation.status()));
    }
    generation_ = *generation;
    if (request_.stream) exchange_->start_sse();
    exchange_->responder().on_disconnect([weak] {
      if (auto self = weak.lock()) self->on_client_gone();
    });
  }

 private:
  struct Choice {
    std::string text;
    Json logprobs;  // null until the first token
    std::optional<FinishReason> finish;
    int n_tokens = 0;
    bool streamed_echo = false;
  };

  void on_client_gone() {
    exchange_->ctx.metrics.on_client_disconnect();
    std::shared_ptr<Generation> g;
    {
      std::lock_guard lock(mu_);
      client_gone_ = true;
      g = generation_;
    }
    if (g) g->abort();
  }

  Json chunk(int index, std::string text, Json logprobs, const Json& finish) const {
    Json choice{{"index", index}, {"text", std::move(text)}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
    Json c{{"id", meta_.id}, {"object", "text_completion"}, {"created", meta_.created}, {"model", meta_.model},
           {"choices", Json::array({std::move(choice)})}};
    if (request_.include_usage) c["usage"] = nullptr;
    return c;
  }

  void on_event(const TokenEvent& e) {
    std::lock_guard lock(mu_);
    if (done_ || e.sample_index < 0 || e.sample_index >= static_cast<int>(choices_.size())) return;
    Choice& c = choices_[static_cast<size_t>(e.sample_index)];
    n_prompt_ = std::max(n_prompt_, e.n_prompt_tokens);
    n_cached_ = std::max(n_cached_, e.n_cached_tokens);
    if (e.finish && (*e.finish == FinishReason::kAbort || *e.finish == FinishReason::kError)) {
      return fail(*e.finish == FinishReason::kError ? ApiError{500, "engine error: " + e.error, "", "", {}}
                                                    : ApiError{503, "The request was aborted: the server is shutting down.", "", "", {}});
    }
    size_t offset = c.text.size();
    c.text += e.text;
    c.n_tokens += static_cast<int>(e.token_ids.size());
    Json lps = nullptr;
    if (request_.sampling.logprobs && !e.logprobs.empty()) {
      append_completion_logprobs(*exchange_->ctx.tokenizer, e.logprobs, offset, &lps);
      append_completion_logprobs(*exchange_->ctx.tokenizer, e.logprobs, offset, &c.logprobs);
    }
    if (e.finish) c.finish = e.finish;
    if (request_.stream) {
      std::string delta = c.streamed_echo ? e.text : prompt_text_ + e.text;
      c.streamed_echo = true;
      Json finish = e.finish ? Json(finish_text(*e.finish)) : Json(nullptr);
      if (!delta.empty() || !lps.is_null() || e.finish) {
        exchange_->write(sse_data(chunk(e.sample_index, valid_utf8(delta), std::move(lps), finish)));
      }
    }
    if (e.finish && ++n_done_ == static_cast<int>(choices_.size())) complete();
  }

  protocol::Json usage() const {
    int n_completion = 0;
    for (const Choice& c : choices_) n_completion += c.n_tokens;
    return Json{{"prompt_tokens", n_prompt_}, {"completion_tokens", n_completion}, {"total_tokens", n_prompt_ + n_completion},
                {"prompt_tokens_details", {{"cached_tokens", n_cached_}}}};
  }

  void complete() {
    done_ = true;
    Json u = usage();
    exchange_->annotate("prompt_tokens", n_prompt_);
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
      }
      exchange_->reply_json(200, Json{{"id", meta_.id}, {"object", "text_completion"}, {"created", meta_.created},
                                      {"model", meta_.model}, {"choices", std::move(choices)}, {"usage", std::move(u)}});
    }
    ticket_.release();
  }

  void fail(const ApiError& error) {
    done_ = true;
    if (generation_) generation_->abort();
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
  std::string prompt_text_;

  std::mutex mu_;
  std::shared_ptr<Generation> generation_;
  std::vector<Choice> choices_;
  int n_prompt_ = 0, n_cached_ = 0, n_done_ = 0;
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
  if (auto e = check_context(ctx, static_cast<int64_t>(request.prompt_ids.size()), request.sampling.max_tokens)) {
    return exchange->reply_error(*e);
  }
  Request engine_request;
  engine_request.prompt_ids = request.prompt_ids;
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
