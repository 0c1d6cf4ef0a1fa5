// Fixed prompt texts of the DeepSeek encoders (tools block, response-format block, reasoning
// effort prefixes) and the per-family DSML tag names. The texts are model inputs the models were
// trained on: they must stay byte-identical to the official encoders.
#pragma once

#include <string>
#include <string_view>

#include "deepinfer/chat.h"
#include "tokenizer/chat/prompt_builder.h"

namespace deepinfer::chat {

// DSML tag names. V4.1 renamed them with a leading space ("<｜DSML｜ calls>").
struct DsmlTags {
  std::string_view calls;      // "tool_calls" / " calls"
  std::string_view invoke;     // "invoke" / " invoke"
  std::string_view parameter;  // "parameter" / " parameter"
};
const DsmlTags& dsml_tags(ModelFamily family);

// V4 thinking-mode prefix for reasoning_effort "max" (placed before the first message).
extern const std::string_view kV4EffortMaxPrefix;
// V4.1: "Reasoning Effort: {level} (range 1-100, ...)\n\n".
std::string v41_effort_line(int level);
// "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n".
extern const std::string_view kResponseFormatHeader;

// Appends the "## Tools" block; `schemas` are the json.dumps lines, already joined by "\n".
// ｜DSML｜, <think> and </think> inside the template are emitted as special tokens.
void add_tools_block(const DsmlTags& tags, std::string_view schemas, PromptBuilder* out);

}  // namespace deepinfer::chat
