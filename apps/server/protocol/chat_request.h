// The protocol-neutral request every API adapter produces (conversation + render options +
// sampling + tool choice), and what the response side needs (ids, usage). An adapter parses one
// API's JSON into a ChatRequest; prompt_ids() renders it; an OutputParser made with
// parser_options() turns generated ids into events, which the adapter's streamer or response
// builder turns back into that API's JSON. Plain data; no HTTP, no engine.
#pragma once

#include <optional>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/chat.h"
#include "deepinfer/engine.h"
#include "deepinfer/sampling.h"
#include "deepinfer/status.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::protocol {

// Request bodies must be parsed as ordered_json: tool schemas are rendered in the client's key
// order, as the official encoder does.
using Json = nlohmann::ordered_json;

enum class Api : uint8_t { kChatCompletions, kResponses, kAnthropicMessages };

enum class ToolChoiceMode : uint8_t { kAuto, kNone, kRequired, kNamed };
struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string name;  // kNamed
};

// Server-wide settings an adapter needs.
struct ProtocolOptions {
  chat::ModelFamily family = chat::ModelFamily::kV4;
  bool thinking_by_default = true;  // when the request says nothing about thinking
};

struct ChatRequest {
  Api api = Api::kChatCompletions;
  std::string model;
  std::vector<chat::Message> messages;  // tools / response format already attached
  chat::RenderOptions render;
  SamplingParams sampling;
  // tool_choice "none" removes the tools from the prompt; required/named (and
  // parallel_tool_calls = false) are enforced by the server with a DSML tool-call grammar
  // (routes/output_constraint.h), they are only recorded here.
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;        // false: at most one call per turn
  std::vector<std::string> tool_names;    // declared tools, in order
  std::vector<std::string> tool_schemas;  // their function objects {name, parameters, ...} (JSON text)
  std::string response_format;            // JSON text of the requested format ("" = free text)
  bool stream = false;
  bool include_usage = false;  // Chat Completions stream_options.include_usage
  // Messages the client sent in `messages` (Anthropic: besides `system`); -1 where the API has no
  // such list (Responses). Both APIs refuse an empty list (the route checks it after the model).
  int n_client_messages = -1;
  std::optional<std::string> instructions;  // Responses: echoed on the response object
  // The last message is an assistant turn to continue (Anthropic prefill): it is rendered without
  // EOS and the output continues its content.
  bool continue_final_message = false;
};

// Ids of the response and of its parts; `id` is the full response id ("chatcmpl-…", "resp_…",
// "msg_…"), tool-call and item ids are derived from it.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;  // unix seconds
  std::string model;
};

struct Usage {
  int n_prompt_tokens = 0;
  int n_completion_tokens = 0;
  int n_reasoning_tokens = 0;
};

// The request's conversation rendered into ids (structural: see chat::render_ids); `images`: the
// image parts' references in placeholder order.
Result<std::vector<int32_t>> prompt_ids(const ChatRequest& request, const Tokenizer& tokenizer,
                                        std::vector<std::string>* images = nullptr);

// The engine's image inputs (Request::images) from those references: data URLs
// ("data:<media type>;base64,<payload>") decoded; anything else is refused (this server fetches
// nothing over the network), naming the image by its index.
Result<std::vector<ImageInput>> image_inputs(const std::vector<std::string>& refs);

// Parser settings matching how the prompt was rendered; tool-call ids are derived from meta.id.
chat::ParserOptions parser_options(const ChatRequest& request, const ResponseMeta& meta);

// Usage of a finished (or running) generation.
Usage usage_of(const chat::ParsedOutput& output, int n_prompt_tokens);

// The part of meta.id after its API prefix ("chatcmpl-", "resp_", "msg_"), for derived ids.
std::string id_suffix(const std::string& id);

}  // namespace deepinfer::protocol
