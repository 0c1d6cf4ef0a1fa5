// The flow shared by POST /v1/chat/completions, /v1/responses and /v1/messages: parse the API's
// JSON into a ChatRequest, render the prompt ids (client text never becomes a control token),
// check model / context / admission, submit to the engine, then turn each sequence's token ids
// into parser events -> stop-string filter -> the API's stream frames or final object. A client
// that disconnects aborts the engine request (freeing its KV) within one io-thread hop.
#pragma once

#include <memory>

#include "exchange.h"
#include "protocol/chat_request.h"

namespace deepinfer::server {

struct ChatApi {
  protocol::Api api;
  const char* id_prefix;  // "chatcmpl-", "resp_", "msg_"
  Result<protocol::ChatRequest> (*parse)(const protocol::Json& body, const protocol::ProtocolOptions& options);
};

void handle_chat(const std::shared_ptr<Exchange>& exchange, const ChatApi& api);

// A fresh id with the API's prefix (24 random hex digits).
std::string new_response_id(const char* prefix);

}  // namespace deepinfer::server
