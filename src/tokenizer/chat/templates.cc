// Prompt texts of the official encoders (see templates.h). The tools template is written with
// placeholders ({D} = ｜DSML｜, {T}/{/T} = <think>/</think>, {calls}/{invoke}/{parameter} = tag
// names, {schemas}) so one text serves both families and the specials go in by id.
#include "tokenizer/chat/templates.h"

#include <fmt/format.h>

namespace deepinfer::chat {
namespace {

constexpr DsmlTags kV4Tags{"tool_calls", "invoke", "parameter"};
constexpr DsmlTags kV41Tags{" calls", " invoke", " parameter"};

constexpr std::string_view kToolsTemplate =
    "## Tools\n"
    "\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools "
    "by writing a \"<{D}{calls}>\" block like the following:\n"
    "\n"
    "<{D}{calls}>\n"
    "<{D}{invoke} name=\"$TOOL_NAME\">\n"
    "<{D}{parameter} name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{D}{parameter}>\n"
    "...\n"
    "</{D}{invoke}>\n"
    "<{D}{invoke} name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</{D}{invoke}>\n"
    "</{D}{calls}>\n"
    "\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n"
    "\n"
    "If thinking_mode is enabled (triggered by {T}), you MUST output your complete reasoning "
    "inside {T}...{/T} BEFORE any tool calls or final response.\n"
    "\n"
    "Otherwise, output directly after {/T} with tool calls or final response.\n"
    "\n"
    "### Available Tool Schemas\n"
    "\n"
    "{schemas}\n"
    "\n"
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
    "calls.\n";

}  // namespace

const DsmlTags& dsml_tags(ModelFamily family) {
  return family == ModelFamily::kV41 ? kV41Tags : kV4Tags;
}

const std::string_view kV4EffortMaxPrefix =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";

const std::string_view kResponseFormatHeader =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

std::string v41_effort_line(int level) {
  return fmt::format(
      "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the "
      "reasoning)\n\n",
      level);
}

void add_tools_block(const DsmlTags& tags, std::string_view schemas, PromptBuilder* out) {
  std::string_view rest = kToolsTemplate;
  while (!rest.empty()) {
    size_t open = rest.find('{');
    size_t close = open == std::string_view::npos ? open : rest.find('}', open);
    if (close == std::string_view::npos) {
      out->add_text(rest);
      return;
    }
    out->add_text(rest.substr(0, open));
    std::string_view key = rest.substr(open + 1, close - open - 1);
    if (key == "D") out->add_special(special::kDsml);
    else if (key == "T") out->add_special(special::kThinkStart);
    else if (key == "/T") out->add_special(special::kThinkEnd);
    else if (key == "calls") out->add_text(tags.calls);
    else if (key == "invoke") out->add_text(tags.invoke);
    else if (key == "parameter") out->add_text(tags.parameter);
    else if (key == "schemas") out->add_text(schemas);
    else out->add_text(rest.substr(open, close - open + 1));  // a literal brace in the text
    rest.remove_prefix(close + 1);
  }
}

}  // namespace deepinfer::chat
