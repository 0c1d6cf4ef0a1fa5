// Conversation preprocessing of the official encoders, before rendering: tool messages merged
// into user turns as tool_result blocks, tool results reordered by the preceding assistant's
// call ids, and (thinking mode) earlier turns' reasoning dropped. The output is a list of Turns
// that point into the caller's messages (which must outlive them).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "deepinfer/chat.h"

namespace deepinfer::chat {

// One element of a user turn: the reference's content_blocks entry.
struct Block {
  enum class Kind : uint8_t { kText, kImage, kToolResult };
  Kind kind = Kind::kText;
  std::string text;          // kText; kImage: the part's reference (a URL or data URL)
  std::string tool_use_id;   // kToolResult
  const Message* result = nullptr;  // kToolResult: the tool message (content or parts)
  int source_index = 0;      // the message this block came from (for errors)
};

// One message after merging (role is never kTool).
struct Turn {
  Role role = Role::kUser;
  const Message* message = nullptr;  // fields other than the user blocks come from here
  int source_index = 0;              // index in the caller's list, for error messages
  std::vector<Block> blocks;         // user turns only
  std::string task;
  bool wo_eos = false;
  bool keep_reasoning = true;  // false when drop-thinking removed reasoning_content
  bool has_tools = false;      // counts for "any message has tools" (forces drop_thinking off)
};

struct PreparedConversation {
  std::vector<Turn> turns;
  bool drop_thinking = true;  // effective value (false when any turn has tools)
};

// Validates what the renderer needs (roles, tasks, content parts) and applies the three
// preprocessing steps. Errors name "messages[i].field".
Result<PreparedConversation> prepare_conversation(std::span<const Message> messages,
                                                  const RenderOptions& options);

// Index of the last turn that opens an assistant reply (user/developer; V4.1 also a system turn
// after the first position), or -1.
int last_user_index(std::span<const Turn> turns, ModelFamily family);

}  // namespace deepinfer::chat
