// Steps shared by the three request adapters: reasoning-effort names, thinking switches, where
// tools and response formats go in the conversation, and the final checks. Internal to
// di_protocol.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "protocol/chat_request.h"

namespace deepinfer::protocol {

// An effort name or (V4.1) integer, mapped per family (docs/chat-encoding.md):
// none -> thinking off; minimal/low -> V4 default, V4.1 "low"; medium/high -> "high";
// xhigh/max -> "max"; an integer 1..100 -> that V4.1 level (an error for V4).
Status apply_reasoning_effort(const Json& value, const std::string& path, ChatRequest* request,
                              std::optional<bool>* thinking);

// Sets the thinking mode: an explicit choice, else the server default.
void set_thinking(std::optional<bool> thinking, const ProtocolOptions& options,
                  ChatRequest* request);

// Puts the tool schemas (unless tool_choice is "none") and the response format into the first
// message when it is a system message, else into a new empty system message in front: where the
// official encoder renders them.
void attach_tools_and_format(std::vector<std::string> tool_schemas, ChatRequest* request);

// Checks that need the whole request: a named tool choice names a declared tool, required
// needs tools, a forced tool call comes without a response format, and the sampling parameters
// are valid.
Status finish_request(ChatRequest* request);

}  // namespace deepinfer::protocol
