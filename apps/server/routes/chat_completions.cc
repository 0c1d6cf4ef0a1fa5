// POST /v1/chat/completions: OpenAI Chat Completions (n choices, logprobs, vLLM's prompt_logprobs,
// tools, reasoning_content deltas, stream_options.include_usage) through the shared chat flow.
#include "protocol/openai_chat.h"
#include "routes/chat_call.h"
#include "routes/routes.h"

namespace deepinfer::server {

void handle_chat_completions(const std::shared_ptr<Exchange>& exchange) {
  static const ChatApi kApi{protocol::Api::kChatCompletions, "chatcmpl-", &protocol::parse_chat_completions};
  handle_chat(exchange, kApi);
}

}  // namespace deepinfer::server
