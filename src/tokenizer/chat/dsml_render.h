// DSML rendering of assistant tool calls (the reference's encode_arguments_to_dsml and
// tool_calls_template), shared by the renderer; the parser lives in dsml_stream.h.
#pragma once

#include <span>

#include "deepinfer/chat.h"
#include "tokenizer/chat/prompt_builder.h"

namespace deepinfer::chat {

// Appends "\n\n<｜DSML｜tool_calls>\n" + invoke blocks joined by "\n" + "\n</｜DSML｜tool_calls>"
// (V4.1: " calls" / " invoke" / " parameter"). Each argument of the OpenAI JSON string becomes one
// parameter: strings raw with string="true", other values as Python JSON with string="false".
// Arguments that are not a JSON object become one string parameter named "arguments".
void add_dsml_tool_calls(std::span<const ToolCall> calls, ModelFamily family, PromptBuilder* out);

}  // namespace deepinfer::chat
