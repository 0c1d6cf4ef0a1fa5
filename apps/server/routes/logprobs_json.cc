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

}  // namespace deepinfer::server
