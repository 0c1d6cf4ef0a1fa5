// POST /v1/messages: Anthropic Messages (thinking blocks, tool_use / tool_result, stop_sequences,
// prefilled assistant turns) through the shared chat flow; errors in Anthropic's format.
#include "protocol/anthropic.h"
#include "routes/chat_call.h"
#include "routes/routes.h"

namespace deepinfer::server {

void handle_messages(const std::shared_ptr<Exchange>& exchange) {
  static const ChatApi kApi{protocol::Api::kAnthropicMessages, "msg_", &protocol::parse_anthropic_messages};
  handle_chat(exchange, kApi);
}

}  // namespace deepinfer::server
