// POST /tokenize and POST /detokenize (vLLM's shapes). /tokenize takes {"prompt": text,
// "add_special_tokens": true} (text tokenized with special tokens matched, BOS prepended unless
// present) or a Chat Completions body with "messages" (the rendered chat prompt, exactly the ids
// /v1/chat/completions would submit). /detokenize takes {"tokens": [ids]}.
#include "json_text.h"
#include "protocol/json_reader.h"
#include "protocol/openai_chat.h"
#include "routes/request_checks.h"
#include "routes/routes.h"

namespace deepinfer::server {
namespace {

Result<std::vector<int32_t>> tokenize_body(const ServerContext& ctx, const protocol::Json& body) {
  if (!body.is_object()) return Status(StatusCode::kInvalidArgument, "body: expected a JSON object");
  if (body.contains("messages")) {
    Result<protocol::ChatRequest> chat = protocol::parse_chat_completions(body, ctx.protocol);
    if (!chat.is_ok()) return chat.status();
    return protocol::prompt_ids(*chat, *ctx.tokenizer);
  }
  auto prompt = protocol::req_string(body, "prompt", "");
  if (!prompt.is_ok()) return prompt.status();
  auto add_special = protocol::opt_bool(body, "add_special_tokens", "");
  if (!add_special.is_ok()) return add_special.status();
  std::vector<int32_t> ids = ctx.tokenizer->encode(*prompt, /*match_special=*/true);
  int32_t bos = ctx.tokenizer->bos_id();
  if (add_special->value_or(true) && (ids.empty() || ids.front() != bos)) ids.insert(ids.begin(), bos);
  return ids;
}

// The body's optional "model": a string naming a model this server serves (a value of another
// type is a 400, not an exception out of the JSON library).
std::optional<ApiError> check_body_model(const ServerContext& ctx, const protocol::Json& body) {
  auto model = protocol::opt_string(body, "model", "");
  if (!model.is_ok()) return error_from_status(model.status());
  return check_model(ctx, model->value_or(""));
}

}  // namespace

void handle_tokenize(const std::shared_ptr<Exchange>& exchange) {
  const ServerContext& ctx = exchange->ctx;
  Result<protocol::Json> body = parse_json_body(exchange->request().body);
  if (!body.is_ok()) return exchange->reply_error(error_from_status(body.status()));
  if (body->is_object()) {
    if (auto e = check_body_model(ctx, *body)) return exchange->reply_error(*e);
  }
  Result<std::vector<int32_t>> ids = tokenize_body(ctx, *body);
  if (!ids.is_ok()) return exchange->reply_error(error_from_status(ids.status()));
  protocol::Json out;
  out["count"] = ids->size();
  out["max_model_len"] = ctx.max_model_len;
  out["tokens"] = *ids;
  exchange->reply_json(200, out);
}

void handle_detokenize(const std::shared_ptr<Exchange>& exchange) {
  const ServerContext& ctx = exchange->ctx;
  Result<protocol::Json> body = parse_json_body(exchange->request().body);
  if (!body.is_ok()) return exchange->reply_error(error_from_status(body.status()));
  if (!body->is_object()) return exchange->reply_error(bad_request("body: expected a JSON object"));
  if (auto e = check_body_model(ctx, *body)) return exchange->reply_error(*e);
  auto tokens = protocol::opt_array(*body, "tokens", "");
  if (!tokens.is_ok()) return exchange->reply_error(error_from_status(tokens.status()));
  if (*tokens == nullptr) return exchange->reply_error(bad_request("tokens: required", "tokens"));
  std::vector<int32_t> ids;
  int32_t n_vocab = ctx.tokenizer->n_vocab();
  for (size_t i = 0; i < (*tokens)->size(); ++i) {
    const protocol::Json& t = (**tokens)[i];
    std::string path = "tokens[" + std::to_string(i) + "]";
    if (!t.is_number_integer()) return exchange->reply_error(bad_request(path + ": expected an integer", path));
    int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab) {
      return exchange->reply_error(
          bad_request(path + ": token id " + std::to_string(id) + " is outside [0, " + std::to_string(n_vocab) + ")", path));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  exchange->reply_json(200, protocol::Json{{"prompt", valid_utf8(ctx.tokenizer->decode(ids))}});
}

}  // namespace deepinfer::server
