// The route handlers of `deepinfer serve`, one file per endpoint. Each answers through its
// Exchange; generating routes return as soon as the request is submitted and finish the response
// from the io threads that drain engine events.
#pragma once

#include <memory>

#include "exchange.h"

namespace deepinfer::server {

void handle_chat_completions(const std::shared_ptr<Exchange>& exchange);  // POST /v1/chat/completions
void handle_completions(const std::shared_ptr<Exchange>& exchange);       // POST /v1/completions
void handle_responses(const std::shared_ptr<Exchange>& exchange);         // POST /v1/responses
void handle_messages(const std::shared_ptr<Exchange>& exchange);          // POST /v1/messages
void handle_models(const std::shared_ptr<Exchange>& exchange);            // GET /v1/models[/{id}]
void handle_health(const std::shared_ptr<Exchange>& exchange);            // GET /health
void handle_metrics(const std::shared_ptr<Exchange>& exchange);           // GET /metrics
void handle_tokenize(const std::shared_ptr<Exchange>& exchange);          // POST /tokenize
void handle_detokenize(const std::shared_ptr<Exchange>& exchange);        // POST /detokenize

}  // namespace deepinfer::server
