// What the engine must enforce for a chat request: its response format (JSON object / schema),
// or a DSML tool-call grammar (StructuredOutput::Kind::kDsmlToolCalls) when tool_choice forces a
// call ("required" / Anthropic "any": one or more calls of any declared tool; a named function /
// Anthropic "tool": that tool only) or when parallel calls are turned off. The two never meet:
// protocol::finish_request rejects a forced tool call together with a response format.
#pragma once

#include <optional>
#include <string>

#include "deepinfer/engine.h"
#include "protocol/chat_request.h"

namespace deepinfer::server {

// The DSML spec (engine.h) of the request's tool choice; nullopt when the choice constrains
// nothing (no tools, "none", or "auto" with parallel calls allowed). A forced call admits no
// content before the tool-call block; reasoning comes first when the request is in thinking
// mode; V4.1 servers get V4.1 tags. A tool without parameters takes none. Parameters may come in
// any order unless a tool has more than 10 (then schema order, the grammar engine's limit).
Result<std::optional<StructuredOutput>> tool_call_constraint(const protocol::ChatRequest& request);

// response_format when set (see structured_output_of; in thinking mode with after_reasoning, so
// the format constrains the answer after </think> and the reasoning stays free), else
// tool_call_constraint.
Result<std::optional<StructuredOutput>> output_constraint(const protocol::ChatRequest& request);

}  // namespace deepinfer::server
