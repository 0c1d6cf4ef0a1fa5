// Grammar for DeepSeek-V4 assistant output with DSML tool calls (model_v4_flash.md §6.5):
//   [reasoning </think>] [content] "\n\n<" ｜DSML｜ "tool_calls>\n" invoke ("\n" invoke)*
//   "\n</" ｜DSML｜ "tool_calls>"            then EOS
//   invoke = "<" ｜DSML｜ "invoke name=\"NAME\">\n" param ("\n" param)* "\n</" ｜DSML｜ "invoke>"
//   param  = "<" ｜DSML｜ "parameter name=\"KEY\" string=\"true\">" RAW "</" ｜DSML｜ "parameter>"
//          | ... string="false">" JSON (Python json.dumps separators ", " / ": ") ...
// ｜DSML｜ and </think> are token terminals (their special-token ids), so raw text can never
// forge markup. Each tool's JSON-schema "parameters" constrains names, required parameters and
// values (raw strings for string values, JSON for the rest). V4.1 tags (" calls", " invoke",
// " parameter") are selected with `v41_tags`.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace deepinfer::grammar {

class Vocabulary;

struct DsmlTool {
  std::string name;
  Json parameters = Json::object();  // JSON schema of the arguments object
};

enum class DsmlToolChoice : uint8_t {
  kAuto,      // free text, optionally followed by one tool-call block
  kRequired,  // a tool-call block must follow (text before it is still allowed)
};

struct DsmlOptions {
  DsmlToolChoice tool_choice = DsmlToolChoice::kAuto;
  bool thinking = false;          // output starts with reasoning text closed by the </think> token
  bool allow_content = true;      // text before the tool-call block
  bool parallel_calls = true;     // more than one invoke per block
  bool any_order = true;          // parameters in any order (else schema order)
  bool v41_tags = false;          // DeepSeek-V4.1 tag spelling
  JsonSchemaOptions values = python_json_style();  // for string="false" values
};

Result<Grammar> dsml_tool_call_grammar(const std::vector<DsmlTool>& tools, const DsmlOptions& options,
                                       const Vocabulary& vocab);

}  // namespace deepinfer::grammar
