// Rendering of prepared turns into a PromptBuilder, following render_message of the official
// V4 encoder (encoding_dsv4.py) and of the V4.1 encoder. Client text always goes in through
// add_text; only the template's own control tokens go in through add_special.
#include <fmt/format.h>

#include "tokenizer/chat/dsml_render.h"
#include "tokenizer/chat/preprocess.h"
#include "tokenizer/chat/prompt_builder.h"
#include "tokenizer/chat/py_json.h"
#include "tokenizer/chat/templates.h"

namespace deepinfer::chat {
namespace {

constexpr std::string_view kToolResultOpen = "<tool_result>";
constexpr std::string_view kToolResultClose = "</tool_result>";

struct RenderContext {
  const RenderOptions& options;
  std::span<const Turn> turns;
  bool drop_thinking;
  int last_user;
  int v41_effort = 0;  // V4.1 budget, resolved once
  bool thinking() const { return options.thinking_mode == ThinkingMode::kThinking; }
  bool v41() const { return options.family == ModelFamily::kV41; }
};

std::string task_token(std::string_view task) { return fmt::format("<｜{}｜>", task); }

// DS4's defusing of the wrapper's closing tag: "</tool_result>" in tool output becomes
// "&lt;/tool_result>", so data cannot end the wrapper early.
std::string defuse_tool_result(std::string_view text) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(kToolResultClose, pos)) != std::string_view::npos;) {
    out.append(text.substr(pos, hit - pos));
    out.append("&lt;");
    pos = hit + 1;
  }
  out.append(text.substr(pos));
  return out;
}

// The content of a non-user message; a part list is joined by blank lines (V4.1: images become
// the image placeholder token, as the V4.1 encoder's image preprocessing does).
Status add_flat_content(const Message& m, int index, ModelFamily family, PromptBuilder* out) {
  if (!m.parts) {
    out->add_text(m.content);
    return Status::ok();
  }
  for (size_t j = 0; j < m.parts->size(); ++j) {
    const ContentPart& part = (*m.parts)[j];
    if (j > 0) out->add_text("\n\n");
    if (part.type == "text") {
      out->add_text(part.text);
    } else if (part.type == "image" && family == ModelFamily::kV41) {
      out->add_image(part.text);
    } else {
      return invalid_argument("messages[{}].content[{}].type: a {} message cannot hold '{}' parts",
                              index, j, role_name(m.role), part.type);
    }
  }
  return Status::ok();
}

void add_tool_result(const Block& block, ModelFamily family, PromptBuilder* out) {
  out->add_text(kToolResultOpen);
  const Message& m = *block.result;
  if (!m.parts) {
    out->add_text(defuse_tool_result(m.content));
  } else {
    for (size_t j = 0; j < m.parts->size(); ++j) {
      const ContentPart& part = (*m.parts)[j];
      if (j > 0) out->add_text("\n\n");
      if (part.type == "text") out->add_text(defuse_tool_result(part.text));
      else if (part.type == "image" && family == ModelFamily::kV41) out->add_image(part.text);
      else out->add_text(fmt::format("[Unsupported {}]", part.type));
    }
  }
  out->add_text(kToolResultClose);
}

void add_user_blocks(const Turn& turn, ModelFamily family, PromptBuilder* out) {
  for (size_t j = 0; j < turn.blocks.size(); ++j) {
    const Block& block = turn.blocks[j];
    if (j > 0) out->add_text("\n\n");
    switch (block.kind) {
      case Block::Kind::kText: out->add_text(block.text); break;
      case Block::Kind::kImage: out->add_image(block.text); break;
      case Block::Kind::kToolResult: add_tool_result(block, family, out); break;
    }
  }
}

// The "\n\n" + tools block and "\n\n" + response format of a system/developer message.
Status add_tools_and_format(const Turn& turn, ModelFamily family, PromptBuilder* out) {
  const Message& m = *turn.message;
  if (!m.tools.empty()) {
    std::string schemas;
    for (size_t k = 0; k < m.tools.size(); ++k) {
      auto parsed = pyjson::parse(m.tools[k]);
      if (!parsed.is_ok()) {
        return parsed.status().with_context(fmt::format("messages[{}].tools[{}]",
                                                        turn.source_index, k));
      }
      if (k > 0) schemas.push_back('\n');
      pyjson::dump_to(*parsed, &schemas);
    }
    out->add_text("\n\n");
    add_tools_block(dsml_tags(family), schemas, out);
  }
  if (!m.response_format.empty()) {
    auto parsed = pyjson::parse(m.response_format);
    if (!parsed.is_ok()) {
      return parsed.status().with_context(
          fmt::format("messages[{}].response_format", turn.source_index));
    }
    if (parsed->truthy()) {  // the reference tests `if response_format:`
      out->add_text("\n\n");
      out->add_text(kResponseFormatHeader);
      out->add_text(pyjson::dump(*parsed));
    }
  }
  return Status::ok();
}

Status add_assistant(const RenderContext& ctx, int index, PromptBuilder* out) {
  const Turn& turn = ctx.turns[index];
  const Message& m = *turn.message;
  bool prev_has_task = index > 0 && !ctx.turns[index - 1].task.empty();
  if (ctx.thinking() && !prev_has_task && (!ctx.drop_thinking || index > ctx.last_user)) {
    if (turn.keep_reasoning) out->add_text(m.reasoning_content);
    out->add_special(special::kThinkEnd);
  }
  DI_RETURN_IF_ERROR(add_flat_content(m, turn.source_index, ctx.options.family, out));
  if (!m.tool_calls.empty()) add_dsml_tool_calls(m.tool_calls, ctx.options.family, out);
  if (!turn.wo_eos) out->add_special(special::kEos);
  return Status::ok();
}

// Assistant header (+ thinking token) or task token after a message, when the conversation
// continues with an assistant / latest_reminder turn or ends here.
void add_transition(const RenderContext& ctx, int index, PromptBuilder* out) {
  const Turn& turn = ctx.turns[index];
  int n = static_cast<int>(ctx.turns.size());
  bool is_last = index == n - 1;
  if (!is_last) {
    Role next = ctx.turns[index + 1].role;
    if (next != Role::kAssistant && next != Role::kLatestReminder) return;
  }
  if (!turn.task.empty()) {
    if (turn.task != "action") {
      out->add_special(task_token(turn.task));
      return;
    }
    out->add_special(special::kAssistant);
    out->add_special(ctx.thinking() ? special::kThinkStart : special::kThinkEnd);
    out->add_special(task_token(turn.task));
    return;
  }
  // V4.1: a system message after the first position opens a reply like a user turn.
  bool opens_reply = turn.role == Role::kUser || turn.role == Role::kDeveloper ||
                     (ctx.v41() && turn.role == Role::kSystem && index > 0);
  if (!opens_reply) return;
  out->add_special(special::kAssistant);
  bool think = ctx.thinking() && (!ctx.drop_thinking || index >= ctx.last_user);
  out->add_special(think ? special::kThinkStart : special::kThinkEnd);
}

Status add_turn(const RenderContext& ctx, int index, PromptBuilder* out) {
  const Turn& turn = ctx.turns[index];
  const Message& m = *turn.message;
  if (index == 0 && ctx.thinking()) {
    if (ctx.v41()) {
      out->add_special(special::kSystem);
      out->add_text(v41_effort_line(ctx.v41_effort));
    } else if (ctx.options.reasoning_effort.name == "max") {
      out->add_text(kV4EffortMaxPrefix);
    }
  } else if (index == 0 && ctx.v41() && turn.role == Role::kSystem) {
    out->add_special(special::kSystem);
  }
  switch (turn.role) {
    case Role::kSystem: {
      if (ctx.v41() && index > 0) out->add_special(special::kSystem);
      DI_RETURN_IF_ERROR(add_flat_content(m, turn.source_index, ctx.options.family, out));
      DI_RETURN_IF_ERROR(add_tools_and_format(turn, ctx.options.family, out));
      break;
    }
    case Role::kDeveloper: {
      out->add_special(special::kUser);
      DI_RETURN_IF_ERROR(add_flat_content(m, turn.source_index, ctx.options.family, out));
      DI_RETURN_IF_ERROR(add_tools_and_format(turn, ctx.options.family, out));
      break;
    }
    case Role::kUser:
      out->add_special(special::kUser);
      add_user_blocks(turn, ctx.options.family, out);
      break;
    case Role::kLatestReminder: {
      out->add_special(special::kLatestReminder);
      DI_RETURN_IF_ERROR(add_flat_content(m, turn.source_index, ctx.options.family, out));
      break;
    }
    case Role::kAssistant:
      DI_RETURN_IF_ERROR(add_assistant(ctx, index, out));
      break;
    case Role::kTool:
      return internal_error("messages[{}]: tool message survived merging", turn.source_index);
  }
  add_transition(ctx, index, out);
  return Status::ok();
}

Status validate_effort(const RenderOptions& options) {
  const ReasoningEffort& e = options.reasoning_effort;
  if (options.family == ModelFamily::kV41) return v41_effort_level(e).status();
  if (e.level != 0 || (!e.name.empty() && e.name != "high" && e.name != "max")) {
    return invalid_argument("reasoning_effort: V4 accepts null, \"high\" or \"max\" (got {})",
                            e.level != 0 ? std::to_string(e.level) : "\"" + e.name + "\"");
  }
  return Status::ok();
}

Result<PromptBuilder> build_prompt(std::span<const Message> messages,
                                   const RenderOptions& options) {
  DI_RETURN_IF_ERROR(validate_effort(options));
  DI_ASSIGN_OR_RETURN(PreparedConversation prepared, prepare_conversation(messages, options));
  RenderContext ctx{options, prepared.turns, prepared.drop_thinking,
                    last_user_index(prepared.turns, options.family)};
  if (ctx.v41()) ctx.v41_effort = v41_effort_level(options.reasoning_effort).value();
  PromptBuilder out;
  if (options.add_bos) out.add_special(special::kBos);
  for (int i = 0; i < static_cast<int>(prepared.turns.size()); ++i) {
    DI_RETURN_IF_ERROR(add_turn(ctx, i, &out));
  }
  return out;
}

}  // namespace

Result<std::string> render_text(std::span<const Message> messages, const RenderOptions& options) {
  DI_ASSIGN_OR_RETURN(PromptBuilder prompt, build_prompt(messages, options));
  return prompt.to_text();
}

Result<std::vector<int32_t>> render_ids(std::span<const Message> messages,
                                        const RenderOptions& options, const Tokenizer& tokenizer,
                                        std::vector<std::string>* images) {
  DI_ASSIGN_OR_RETURN(PromptBuilder prompt, build_prompt(messages, options));
  if (images != nullptr) *images = prompt.images();
  return prompt.to_ids(tokenizer);
}

}  // namespace deepinfer::chat
