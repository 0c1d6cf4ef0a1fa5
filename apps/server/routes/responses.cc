// POST /v1/responses: OpenAI Responses (stateless: the client sends the whole conversation;
// previous_response_id is refused) through the shared chat flow.
#include "protocol/responses.h"
#include "routes/chat_call.h"
#include "routes/routes.h"

namespace deepinfer::server {

void handle_responses(const std::shared_ptr<Exchange>& exchange) {
  static const ChatApi kApi{protocol::Api::kResponses, "resp_", &protocol::parse_responses};
  handle_chat(exchange, kApi);
}

}  // namespace deepinfer::server
