// Preprocessing steps of encoding_dsv4.py / the V4.1 encoder (merge_tool_messages,
// sort_tool_results_by_call_order, _drop_thinking_messages), restated over Turns. Differences
// between the families are marked V4 / V4.1 where they occur.
#include "tokenizer/chat/preprocess.h"

#include <algorithm>
#include <map>
#include <string_view>

namespace deepinfer::chat {
namespace {

constexpr std::string_view kTasks[] = {"action", "query", "authority", "domain", "title", "read_url"};

bool is_known_task(std::string_view task) {
  return std::find(std::begin(kTasks), std::end(kTasks), task) != std::end(kTasks);
}

// The blocks a user message contributes: one text block, or one block per content part.
Result<std::vector<Block>> user_blocks(const Message& m, int index, ModelFamily family) {
  std::vector<Block> blocks;
  if (!m.parts) {
    blocks.push_back({Block::Kind::kText, m.content, "", nullptr, index});
    return blocks;
  }
  for (size_t j = 0; j < m.parts->size(); ++j) {
    const ContentPart& part = (*m.parts)[j];
    if (part.type == "text") {
      blocks.push_back({Block::Kind::kText, part.text, "", nullptr, index});
    } else if (part.type == "image") {
      if (family != ModelFamily::kV41) {
        return invalid_argument("messages[{}].content[{}]: image content needs model family v41",
                                index, j);
      }
      blocks.push_back({Block::Kind::kImage, part.text, "", nullptr, index});
    } else {
      return invalid_argument("messages[{}].content[{}].type: unsupported content part type '{}'",
                              index, j, part.type);
    }
  }
  // An empty part list adds no block (so no blank-line separator when merged), as in V4.1.
  return blocks;
}

// V4.1 rejects the image placeholder spelled in text (images must be image parts), as its
// encoder does; in the id form such text could not become an image token anyway.
Status check_no_image_placeholder(const Message& m, int index) {
  constexpr std::string_view kPlaceholder = "<｜deepseek_image｜>";
  if (m.content.find(kPlaceholder) != std::string::npos) {
    return invalid_argument("messages[{}].content: contains the image placeholder text; send "
                            "images as image parts", index);
  }
  if (m.reasoning_content.find(kPlaceholder) != std::string::npos) {
    return invalid_argument("messages[{}].reasoning_content: contains the image placeholder text",
                            index);
  }
  if (m.parts) {
    for (size_t j = 0; j < m.parts->size(); ++j) {
      if ((*m.parts)[j].text.find(kPlaceholder) != std::string::npos) {
        return invalid_argument("messages[{}].content[{}].text: contains the image placeholder "
                                "text; send images as image parts", index, j);
      }
    }
  }
  return Status::ok();
}

Status validate_message(const Message& m, int index, ModelFamily family) {
  if (family == ModelFamily::kV41) {
    if (m.role == Role::kDeveloper) {
      return invalid_argument("messages[{}].role: V4.1 has no developer role (use system)", index);
    }
    DI_RETURN_IF_ERROR(check_no_image_placeholder(m, index));
  }
  if (!m.task.empty() && !is_known_task(m.task)) {
    return invalid_argument(
        "messages[{}].task: unknown task '{}' (expected action, query, authority, domain, title "
        "or read_url)",
        index, m.task);
  }
  if (m.role == Role::kDeveloper && m.content.empty() && !m.parts) {
    return invalid_argument("messages[{}].content: a developer message needs non-empty content",
                            index);
  }
  if (m.role == Role::kTool && m.parts) {
    for (size_t j = 0; j < m.parts->size(); ++j) {
      const std::string& type = (*m.parts)[j].type;
      // V4 renders other block types as "[Unsupported <type>]"; V4.1 accepts text and images.
      if (family == ModelFamily::kV41 && type != "text" && type != "image") {
        return invalid_argument(
            "messages[{}].content[{}].type: unsupported tool result part type '{}'", index, j, type);
      }
    }
  }
  return Status::ok();
}

bool last_is_open_user(const std::vector<Turn>& turns) {
  return !turns.empty() && turns.back().role == Role::kUser;
}

Result<std::vector<Turn>> merge_tool_messages(std::span<const Message> messages,
                                              ModelFamily family) {
  std::vector<Turn> turns;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    int index = static_cast<int>(i);
    DI_RETURN_IF_ERROR(validate_message(m, index, family));
    if (m.role == Role::kTool) {
      Block block{Block::Kind::kToolResult, "", m.tool_call_id, &m, index};
      // Every user turn carries blocks after merging, so a tool result joins any user turn
      // directly before it (even one with a task: the reference does not check).
      if (last_is_open_user(turns)) {
        turns.back().blocks.push_back(std::move(block));
      } else {
        Turn turn{Role::kUser, &m, index};
        turn.blocks.push_back(std::move(block));
        turns.push_back(std::move(turn));
      }
      continue;
    }
    if (m.role == Role::kUser) {
      DI_ASSIGN_OR_RETURN(std::vector<Block> blocks, user_blocks(m, index, family));
      if (last_is_open_user(turns) && turns.back().task.empty()) {
        auto& dst = turns.back().blocks;
        dst.insert(dst.end(), blocks.begin(), blocks.end());
        // V4.1 keeps the merged message's own fields on the first message only; a later user
        // message's tools are lost in both encoders.
        continue;
      }
      Turn turn{Role::kUser, &m, index, std::move(blocks), m.task, m.wo_eos};
      // V4 rebuilds user messages without their tools; V4.1 keeps the whole message.
      turn.has_tools = family == ModelFamily::kV41 && !m.tools.empty();
      turns.push_back(std::move(turn));
      continue;
    }
    Turn turn{m.role, &m, index, {}, m.task, m.wo_eos};
    turn.has_tools = !m.tools.empty();
    turns.push_back(std::move(turn));
  }
  return turns;
}

void sort_tool_results_by_call_order(std::vector<Turn>* turns) {
  std::map<std::string, size_t> order;  // call id -> position in the last assistant's calls
  for (Turn& turn : *turns) {
    if (turn.role == Role::kAssistant && !turn.message->tool_calls.empty()) {
      order.clear();
      const auto& calls = turn.message->tool_calls;
      for (size_t k = 0; k < calls.size(); ++k) {
        if (!calls[k].id.empty()) order[calls[k].id] = k;  // a repeated id keeps the last position
      }
      continue;
    }
    if (turn.role != Role::kUser || order.empty()) continue;
    std::vector<Block> results;
    for (const Block& b : turn.blocks) {
      if (b.kind == Block::Kind::kToolResult) results.push_back(b);
    }
    if (results.size() < 2) continue;
    // Python's sorted() is stable; unknown ids sort as position 0.
    auto key = [&](const Block& b) {
      auto it = order.find(b.tool_use_id);
      return it == order.end() ? size_t{0} : it->second;
    };
    std::stable_sort(results.begin(), results.end(),
                     [&](const Block& a, const Block& b) { return key(a) < key(b); });
    size_t next = 0;
    for (Block& b : turn.blocks) {
      if (b.kind == Block::Kind::kToolResult) b = results[next++];
    }
  }
}

std::vector<Turn> drop_thinking_turns(std::vector<Turn> turns, ModelFamily family) {
  int last_user = last_user_index(turns, family);
  std::vector<Turn> kept;
  for (size_t i = 0; i < turns.size(); ++i) {
    Turn& turn = turns[i];
    bool keep_role = turn.role == Role::kUser || turn.role == Role::kSystem ||
                     turn.role == Role::kLatestReminder;
    if (keep_role || static_cast<int>(i) >= last_user) {
      kept.push_back(std::move(turn));
    } else if (turn.role == Role::kAssistant) {
      turn.keep_reasoning = false;
      kept.push_back(std::move(turn));
    }
    // Earlier developer turns are dropped entirely.
  }
  return kept;
}

}  // namespace

int last_user_index(std::span<const Turn> turns, ModelFamily family) {
  for (int i = static_cast<int>(turns.size()) - 1; i >= 0; --i) {
    Role role = turns[i].role;
    if (role == Role::kUser || role == Role::kDeveloper) return i;
    if (family == ModelFamily::kV41 && role == Role::kSystem && i > 0) return i;
  }
  return -1;
}

Result<PreparedConversation> prepare_conversation(std::span<const Message> messages,
                                                  const RenderOptions& options) {
  PreparedConversation out;
  DI_ASSIGN_OR_RETURN(out.turns, merge_tool_messages(messages, options.family));
  sort_tool_results_by_call_order(&out.turns);
  out.drop_thinking = options.drop_thinking;
  for (const Turn& turn : out.turns) {
    if (turn.has_tools) out.drop_thinking = false;
  }
  if (options.thinking_mode == ThinkingMode::kThinking && out.drop_thinking) {
    out.turns = drop_thinking_turns(std::move(out.turns), options.family);
  }
  return out;
}

}  // namespace deepinfer::chat
