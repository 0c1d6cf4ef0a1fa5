// Settings of `deepinfer serve` that are the server's own (the engine's are EngineOptions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "http/http_server.h"

namespace deepinfer::server {

struct ServerOptions {
  HttpServerOptions http;
  // Bearer token required on /v1/*, /tokenize and /detokenize ("" = no authentication). Anthropic
  // clients may send it as x-api-key instead. /health and /metrics stay open.
  std::string api_key;
  // Model ids accepted in requests and listed by /v1/models; the first is the canonical id.
  // Empty: the model directory's name.
  std::vector<std::string> served_model_names;
  // Generation requests in flight (engine queue + running + streaming); past it 429. 0: 4096.
  int64_t max_in_flight = 0;
  // Thinking mode when a request says nothing about it (DeepSeek's API default is on).
  bool thinking_by_default = true;
  // Graceful shutdown: in-flight requests get this long to finish before they are aborted.
  double shutdown_timeout_s = 30.0;
  // One JSON line per request on stderr.
  bool access_log = true;
  // Browser origins that may call the API (CORS), as vLLM's --allowed-origins: "*" = any (the
  // default, as vLLM and SGLang allow); empty = no CORS headers and no preflight answers.
  std::vector<std::string> allowed_origins = {"*"};
};

// The Access-Control-Allow-Origin value for a request's Origin header ("" = none: no origin sent,
// or one not allowed).
std::string cors_allow_origin(const ServerOptions& options, const std::string* origin);

}  // namespace deepinfer::server
