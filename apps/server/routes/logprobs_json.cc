// Logprob JSON (see logprobs_json.h).
#include "routes/logprobs_json.h"

#include <cmath>

#include "json_text.h"

namespace deepinfer::server {
namespace {

double printable(float logprob) { return std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0; }

protocol::Json bytes_of(const std::string& piece) {
  protocol::Json bytes = protocol::Json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

protocol::Json chat_logprob_entry(const Tokenizer& tokenizer, const TokenLogprobs& lp) {
  protocol::Json entry;
  std::string piece = tokenizer.token_bytes(lp.token);
  entry["token"] = valid_utf8(piece);
  entry["logprob"] = printable(lp.logprob);
  entry["bytes"] = bytes_of(piece);
  protocol::Json top = protocol::Json::array();
  for (const TokenLogprob& t : lp.top) {
    std::string p = tokenizer.token_bytes(t.token);
    top.push_back(protocol::Json{{"token", valid_utf8(p)}, {"logprob", printable(t.logprob)}, {"bytes", bytes_of(p)}});
  }
  entry["top_logprobs"] = std::move(top);
  return entry;
}

void append_completion_logprobs(const Tokenizer& tokenizer, std::span<const TokenLogprobs> lps,
                                size_t text_offset, protocol::Json* logprobs) {
  using protocol::Json;
  if (!logprobs->is_object()) {
    *logprobs = Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()},
                     {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
  }
  size_t offset = text_offset;
  for (const TokenLogprobs& lp : lps) {
    std::string piece = tokenizer.token_bytes(lp.token);
    (*logprobs)["tokens"].push_back(valid_utf8(piece));
    (*logprobs)["token_logprobs"].push_back(printable(lp.logprob));
    Json top = Json::object();
    for (const TokenLogprob& t : lp.top) top[valid_utf8(tokenizer.token_bytes(t.token))] = printable(t.logprob);
    (*logprobs)["top_logprobs"].push_back(std::move(top));
    (*logprobs)["text_offset"].push_back(offset);
    offset += piece.size();
  }
}

void append_prompt_completion_logprobs(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                       std::span<const TokenLogprobs> lps, int32_t n_top, const std::string& echo,
                                       protocol::Json* logprobs) {
  using protocol::Json;
  if (prompt.empty()) return;
  append_completion_logprobs(tokenizer, {}, 0, logprobs);  // creates the object
  size_t offset = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string piece = tokenizer.token_bytes(prompt[i]);
    const TokenLogprobs* lp = i > 0 && i - 1 < lps.size() ? &lps[i - 1] : nullptr;
    (*logprobs)["tokens"].push_back(valid_utf8(piece));
    (*logprobs)["token_logprobs"].push_back(lp != nullptr ? Json(printable(lp->logprob)) : Json(nullptr));
    Json top = lp != nullptr ? Json::object() : Json(nullptr);
    for (size_t j = 0; lp != nullptr && j < lp->top.size() && j < static_cast<size_t>(n_top); ++j) {
      top[valid_utf8(tokenizer.token_bytes(lp->top[j].token))] = printable(lp->top[j].logprob);
    }
    (*logprobs)["top_logprobs"].push_back(std::move(top));
    (*logprobs)["text_offset"].push_back(offset);
    if (echo.compare(offset, piece.size(), piece) == 0) offset += piece.size();
  }
}

protocol::Json prompt_logprobs_json(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                    std::span<const TokenLogprobs> lps, int32_t n_top) {
  using protocol::Json;
  auto entry = [&](int32_t token, float logprob, int32_t rank) {
    return Json{{"logprob", printable(logprob)}, {"rank", rank}, {"decoded_token", valid_utf8(tokenizer.token_bytes(token))}};
  };
  Json out = Json::array();
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (i == 0 || i - 1 >= lps.size()) {
      out.push_back(nullptr);
      continue;
    }
    const TokenLogprobs& lp = lps[i - 1];
    Json d = Json::object();
    for (size_t j = 0; j < lp.top.size() && j < static_cast<size_t>(n_top); ++j) {
      d[std::to_string(lp.top[j].token)] = entry(lp.top[j].token, lp.top[j].logprob, static_cast<int32_t>(j) + 1);
    }
    d[std::to_string(lp.token)] = entry(lp.token, lp.logprob, lp.rank);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace deepinfer::server
