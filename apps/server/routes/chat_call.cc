// ChatCall: one chat request from parsed JSON to the last byte of its response (see chat_call.h).
#include "routes/chat_call.h"

#include <fmt/format.h>

#include <mutex>
#include <random>

#include "generation.h"
#include "json_text.h"
#include "routes/chat_response.h"
#include "routes/chat_stream.h"
#include "routes/logprobs_json.h"
#include "routes/output_constraint.h"
#include "routes/request_checks.h"
#include "routes/stop_filter.h"

namespace deepinfer::server {
namespace {

class ChatCall : public std::enable_shared_from_this<ChatCall> {
 public:
  ChatCall(std::shared_ptr<Exchange> exchange, protocol::ChatRequest request, protocol::ResponseMeta meta,
           Ticket ticket)
      : exchange_(std::move(exchange)), request_(std::move(request)), meta_(std::move(meta)),
        ticket_(std::move(ticket)), stream_(request_.stream),
        want_logprobs_(request_.api == protocol::Api::kChatCompletions && request_.sampling.logprobs.has_value()),
        want_prompt_logprobs_(request_.api == protocol::Api::kChatCompletions &&
                              request_.sampling.prompt_logprobs.has_value()) {}

  Status prepare() {
    int n = std::max(1, request_.sampling.n);
    samples_.resize(static_cast<size_t>(n));
    for (Sample& s : samples_) {
      auto parser = chat::OutputParser::create(exchange_->ctx.tokenizer, protocol::parser_options(request_, meta_));
      if (!parser.is_ok()) return parser.status();
      s.parser.emplace(std::move(parser).value());
      s.filter = ContentStopFilter(request_.sampling.stop);
    }
    if (stream_) encoder_ = make_stream_encoder(request_, meta_, n);
    return Status::ok();
  }

  void run(Request engine_request) {
    std::weak_ptr<ChatCall> weak = weak_from_this();
    if (want_prompt_logprobs_) prompt_ids_ = engine_request.prompt_ids;  // the rendered template's
    std::lock_guard lock(mu_);  // events wait until the stream head is queued
    auto generation = Generation::start(
        exchange_->ctx, std::move(engine_request),
        [self = shared_from_this()](const TokenEvent& e) { self->on_event(e); }, exchange_->start_time());
    if (!generation.is_ok()) {
      completed_ = true;
      exchange_->reply_error(error_from_status(generation.status()));
      return;
    }
    generation_ = *generation;
    if (stream_) exchange_->start_sse();
    exchange_->responder().on_disconnect([weak] {
      if (auto self = weak.lock()) self->on_client_gone();
    });
  }

 private:
  struct Sample {
    std::optional<chat::OutputParser> parser;
    ContentStopFilter filter{{}};
    bool done = false;
    SampleResult result;
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

  void on_event(const TokenEvent& e) {
    std::lock_guard lock(mu_);
    if (completed_ || e.sample_index < 0 || e.sample_index >= static_cast<int>(samples_.size())) return;
    Sample& s = samples_[static_cast<size_t>(e.sample_index)];
    if (s.done) return;
    n_prompt_ = std::max(n_prompt_, e.n_prompt_tokens);
    n_cached_ = std::max(n_cached_, e.n_cached_tokens);
    if (encoder_) encoder_->set_cached_tokens(n_cached_);
    if (want_prompt_logprobs_ && e.sample_index == 0 && prompt_logprobs_.is_null()) take_prompt_logprobs(e);
    std::vector<chat::ChatEvent> raw;
    for (int32_t id : e.token_ids) s.parser->push(id, &raw);
    protocol::Json lps = protocol::Json::array();
    if (want_logprobs_) {
      for (const TokenLogprobs& lp : e.logprobs) lps.push_back(chat_logprob_entry(*exchange_->ctx.tokenizer, lp));
      for (const protocol::Json& entry : lps) s.result.logprobs.push_back(entry);
    }
    if (e.finish && !finish_parser(s, e, &raw)) return;
    std::vector<chat::ChatEvent> events;
    if (s.filter.filter(raw, &events)) {
      s.result.stop_matched = s.filter.matched();
      if (encoder_) encoder_->set_stop_sequence(s.result.stop_matched);
      chat::ChatEvent finish;
      finish.kind = chat::EventKind::kFinish;
      finish.finish_reason = chat::FinishReason::kStop;
      events.push_back(finish);
    }
    bool sample_done = s.parser->is_done() || !s.result.stop_matched.empty();
    s.result.usage = protocol::usage_of(s.parser->output(), n_prompt_);
    if (sample_done) finish_sample(s);
    if (stream_) exchange_->write(encoder_->on_events(e.sample_index, events, s.result.usage, std::move(lps)));
    if (sample_done && ++n_done_ == static_cast<int>(samples_.size())) complete();
  }

  // vLLM's prompt_logprobs, which come with sample 0's first event: kept for the response, or
  // handed to the stream for its next chunk (under mu_).
  void take_prompt_logprobs(const TokenEvent& e) {
    prompt_logprobs_ = prompt_logprobs_json(*exchange_->ctx.tokenizer, prompt_ids_, e.prompt_logprobs,
                                            *request_.sampling.prompt_logprobs);
    if (encoder_) encoder_->set_prompt_logprobs(prompt_logprobs_);
  }

  // Ends the parser on the engine's final event; false when the request failed instead.
  bool finish_parser(Sample& s, const TokenEvent& e, std::vector<chat::ChatEvent>* raw) {
    switch (*e.finish) {
      case FinishReason::kLength:
        if (!s.parser->is_done()) s.parser->finish(chat::FinishReason::kLength, raw);
        return true;
      case FinishReason::kStop:
        if (!s.parser->is_done()) s.parser->finish(chat::FinishReason::kStop, raw);
        return true;
      case FinishReason::kAbort:
        fail(client_gone_ ? ApiError{499, "client disconnected", "", "", {}}
                          : ApiError{503, "The request was aborted: the server is shutting down.", "", "", {}});
        return false;
      case FinishReason::kError:
        fail(ApiError{500, "engine error: " + e.error, "", "", {}});
        return false;
    }
    return true;
  }

  void finish_sample(Sample& s) {
    s.done = true;
    s.result.output = s.parser->output();
    if (!s.result.stop_matched.empty()) {
      s.result.output.content = s.filter.content();
      s.result.output.finish_reason = chat::FinishReason::kStop;
    }
  }

  void fail(const ApiError& error) {
    completed_ = true;
    if (generation_) generation_->abort();
    exchange_->annotate("finish_reason", error.status == 499 ? "client_disconnected" : "error");
    if (client_gone_) {
      ticket_.release();
      return;
    }
    if (stream_) {
      exchange_->write(encoder_->error(error));
      exchange_->end_stream();
    } else {
      exchange_->reply_error(error);
    }
    ticket_.release();
  }

  void complete() {
    completed_ = true;
    if (generation_ && !generation_->is_done()) generation_->abort();  // e.g. a stop string matched
    std::vector<SampleResult> results;
    for (Sample& s : samples_) results.push_back(s.result);
    protocol::Usage total = total_usage(results);
    total.n_prompt_tokens = n_prompt_;
    exchange_->annotate("prompt_tokens", n_prompt_);
    exchange_->annotate("cached_tokens", n_cached_);
    exchange_->annotate("completion_tokens", total.n_completion_tokens);
    if (results[0].output.finish_reason) {
      exchange_->annotate("finish_reason", chat::finish_reason_name(*results[0].output.finish_reason));
    }
    if (stream_) {
      exchange_->write(encoder_->finish(total, n_cached_));
      exchange_->end_stream();
    } else {
      Result<protocol::Json> body = chat_response_json(request_, meta_, results, n_cached_, want_logprobs_);
      if (body.is_ok()) {
        if (want_prompt_logprobs_) (*body)["prompt_logprobs"] = prompt_logprobs_;  // top level, as vLLM
        exchange_->reply_json(200, *body);
      } else {
        exchange_->reply_error(error_from_status(body.status()));
      }
    }
    ticket_.release();
  }

  std::shared_ptr<Exchange> exchange_;
  protocol::ChatRequest request_;
  protocol::ResponseMeta meta_;
  Ticket ticket_;
  const bool stream_;
  const bool want_logprobs_;
  const bool want_prompt_logprobs_;  // sampling.prompt_logprobs (Chat Completions only)
  std::vector<int32_t> prompt_ids_;  // with want_prompt_logprobs_: the engine request's

  std::mutex mu_;
  std::shared_ptr<Generation> generation_;
  std::unique_ptr<ChatStreamEncoder> encoder_;
  std::vector<Sample> samples_;
  protocol::Json prompt_logprobs_;  // prompt_logprobs_json, once sample 0's first event came
  int n_prompt_ = 0, n_cached_ = 0, n_done_ = 0;
  bool completed_ = false;
  bool client_gone_ = false;
};

}  // namespace

std::string new_response_id(const char* prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

void handle_chat(const std::shared_ptr<Exchange>& exchange, const ChatApi& api) {
  ServerContext& ctx = exchange->ctx;
  Result<protocol::Json> body = parse_json_body(exchange->request().body);
  if (!body.is_ok()) return exchange->reply_error(error_from_status(body.status()));
  Result<protocol::ChatRequest> parsed = api.parse(*body, ctx.protocol);
  if (!parsed.is_ok()) return exchange->reply_error(error_from_status(parsed.status()));
  protocol::ChatRequest request = std::move(parsed).value();
  if (auto e = check_model(ctx, request.model)) return exchange->reply_error(*e);
  if (request.n_client_messages == 0) {
    // Both APIs refuse it (a prompt of the template alone would otherwise be generated from).
    return exchange->reply_error(bad_request("messages: at least one message is required", "messages"));
  }
  std::vector<std::string> image_refs;
  Result<std::vector<int32_t>> ids = protocol::prompt_ids(request, *ctx.tokenizer, &image_refs);
  if (!ids.is_ok()) return exchange->reply_error(error_from_status(ids.status()));
  Result<std::vector<ImageInput>> images = protocol::image_inputs(image_refs);
  if (!images.is_ok()) return exchange->reply_error(bad_request(images.status().message(), "messages"));
  if (auto e = check_context(ctx, static_cast<int64_t>(ids->size()), request.sampling.max_tokens)) {
    return exchange->reply_error(*e);
  }
  auto structured = output_constraint(request);
  if (!structured.is_ok()) return exchange->reply_error(error_from_status(structured.status()));

  Request engine_request;
  engine_request.prompt_ids = std::move(ids).value();
  engine_request.sampling = request.sampling;
  engine_request.sampling.stop.clear();  // applied to the answer text by ContentStopFilter
  engine_request.structured_output = *structured;
  engine_request.request_label = exchange->id();
  engine_request.images = std::move(images).value();

  Ticket ticket = admit(*exchange);
  if (!ticket.valid()) return;
  protocol::ResponseMeta meta{new_response_id(api.id_prefix), static_cast<int64_t>(std::time(nullptr)),
                              request.model.empty() ? ctx.model_id() : request.model};
  exchange->annotate("response_id", meta.id);
  auto call = std::make_shared<ChatCall>(exchange, std::move(request), std::move(meta), std::move(ticket));
  if (Status s = call->prepare(); !s.is_ok()) return exchange->reply_error(error_from_status(s));
  call->run(std::move(engine_request));
}

}  // namespace deepinfer::server
