// Public chat-encoding API for DeepSeek V4 and V4.1: conversation types, prompt rendering (exact
// text, and token ids built structurally) and the streaming parser that turns generated token ids
// into reasoning / content / tool-call events. Implemented in src/tokenizer/chat (library di_chat).
// Key invariant: client-supplied text never yields a control token. render_ids emits template
// specials by id and tokenizes every data span with special matching off; the parser recognises
// </think>, ｜DSML｜ and EOS by id only. All functions are thread-safe; an OutputParser belongs to
// one request.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/status.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::chat {

enum class ModelFamily : uint8_t { kV4, kV41 };
enum class ThinkingMode : uint8_t { kChat, kThinking };
enum class Role : uint8_t { kSystem, kUser, kAssistant, kTool, kLatestReminder, kDeveloper };

const char* role_name(Role role);  // "system", "user", ..., "latest_reminder", "developer"
std::optional<Role> role_from_name(std::string_view name);
const char* family_name(ModelFamily family);  // "v4" / "v41"

// One element of a list-valued content (parts joined by a blank line). "text" parts render their
// text; "image" parts (V4.1 only) render the image placeholder token; inside a V4 tool result any
// other type renders as "[Unsupported <type>]", as the reference does.
struct ContentPart {
  std::string type;
  std::string text;
};

struct ToolCall {
  std::string id;         // may be empty; orders the tool results that answer this call
  std::string name;
  std::string arguments;  // the OpenAI JSON string, e.g. {"city": "Paris"}
};

// One conversation message. Fields a role does not use are ignored.
struct Message {
  Role role = Role::kUser;
  std::string content;                            // null content is the same as ""
  std::optional<std::vector<ContentPart>> parts;  // list content; replaces `content` when set
  std::string reasoning_content;                  // assistant
  std::vector<ToolCall> tool_calls;               // assistant
  std::string tool_call_id;                       // tool
  std::string task;  // "" or a quick-instruction task: action, query, authority, domain, title, read_url
  std::vector<std::string> tools;  // system/developer: JSON text of each function schema (the
                                   // OpenAI "function" object); key order is kept when rendered
  std::string response_format;     // system/developer: JSON text; "" = none
  bool wo_eos = false;             // assistant: no EOS after it (a prefilled, unfinished turn)
};

// V4: name "" (default), "high" (renders as the default) or "max". V4.1: a budget 1..100 in
// `level`, or a name from v41_effort_names(); unset means "high" (75).
struct ReasoningEffort {
  std::string name;
  int level = 0;  // 0 = use `name`
};

struct EffortName {
  const char* name;
  int level;
};
// The V4.1 name table: low 50, high 75, max 100 (DeepSeek's reference values).
std::span<const EffortName> v41_effort_names();
// The numeric V4.1 budget for `effort`; error names the bad value.
Result<int> v41_effort_level(const ReasoningEffort& effort);

struct RenderOptions {
  ModelFamily family = ModelFamily::kV4;
  ThinkingMode thinking_mode = ThinkingMode::kChat;
  ReasoningEffort reasoning_effort;
  bool drop_thinking = true;  // drop earlier turns' reasoning (forced off when any message has tools)
  bool add_bos = true;
};

// The exact prompt string the official encoder produces (V4: encoding/encoding_dsv4.py; V4.1:
// encoding/encoding.py of the V4.1 release), except that "</tool_result>" inside tool output is
// defused to "&lt;/tool_result>". V4.1 has no developer role, and images ("image" parts) render as
// <｜deepseek_image｜>. Errors name the message index and field.
Result<std::string> render_text(std::span<const Message> messages, const RenderOptions& options);

// Token ids of the same prompt, built structurally: equal to tokenizer.encode(render_text(...),
// match_special=true) whenever no client text spells a special token, and never containing a
// control id that comes from client text. The tokenizer must hold the family's special tokens.
// `images` (optional): the image parts' `text` (a URL or data URL), one per image placeholder in
// the ids, in the placeholders' order (Request::images wants them so).
Result<std::vector<int32_t>> render_ids(std::span<const Message> messages,
                                        const RenderOptions& options, const Tokenizer& tokenizer,
                                        std::vector<std::string>* images = nullptr);

// A conversation as JSON (the format of the official encoder's tests): either a message list, or
// {"messages": [...], "tools": [...], "thinking_mode": "chat"|"thinking", "reasoning_effort":
// null|"high"|"max"|<1..100>, "drop_thinking": bool, "add_bos": bool}. Top-level "tools" go to the
// first message when it is system/developer, else to a new empty system message in front. JSON is
// read like Python's json.loads (key order kept, big integers exact). Errors name the JSON path.
struct ChatInput {
  std::vector<Message> messages;
  RenderOptions options;
};
Result<ChatInput> parse_chat_json(std::string_view json_text, ModelFamily family);

// ---------------------------------------------------------------------------------------------
// Output parsing: generated token ids -> events.

enum class FinishReason : uint8_t { kStop, kLength, kToolCalls, kError };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "tool_calls", "error"

enum class EventKind : uint8_t {
  kReasoningDelta,          // text
  kContentDelta,            // text
  kToolCallStart,           // tool_index, tool_call_id, tool_name
  kToolCallArgumentsDelta,  // tool_index, text (concatenated deltas = the final arguments)
  kToolCallEnd,             // tool_index, tool_call_id, tool_name, text = complete arguments
  kError,                   // text = what was malformed; always followed by kFinish
  kFinish,                  // finish_reason; the last event of a stream
};

struct ChatEvent {
  EventKind kind = EventKind::kContentDelta;
  std::string text;
  int tool_index = -1;
  std::string tool_call_id;
  std::string tool_name;
  FinishReason finish_reason = FinishReason::kStop;
};

// Everything parsed so far (complete once the parser is done).
struct ParsedOutput {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;  // complete calls only
  std::optional<FinishReason> finish_reason;
  std::string error;      // non-empty after a kError event
  int n_tokens = 0;       // tokens pushed
  int n_reasoning_tokens = 0;  // of which were reasoning (including </think>)
};

struct ParserOptions {
  ModelFamily family = ModelFamily::kV4;
  ThinkingMode thinking_mode = ThinkingMode::kChat;  // thinking: output starts inside reasoning
  std::string tool_call_id_prefix = "call_";         // ids are prefix + call index
};

// Streaming state machine over generated ids. Content that could still become the tool-call
// opener ("\n\n<" before ｜DSML｜) is held back until disambiguated, so markup never streams as
// content; malformed DSML yields kError, never content. Not thread-safe (one per request).
class OutputParser {
 public:
  static Result<OutputParser> create(std::shared_ptr<const Tokenizer> tokenizer,
                                     const ParserOptions& options);
  OutputParser(OutputParser&&) noexcept;
  OutputParser& operator=(OutputParser&&) noexcept;
  ~OutputParser();

  // Consumes one generated id and appends the resulting events (possibly none). Ignored once done.
  void push(int32_t id, std::vector<ChatEvent>* events);
  // The engine stopped without EOS: kLength (max tokens) or kStop (a stop string). Flushes held
  // text and appends kFinish (after kError if a tool call was cut off). Ignored once done.
  void finish(FinishReason reason, std::vector<ChatEvent>* events);
  bool is_done() const;
  const ParsedOutput& output() const;
  // The parsed turn as an assistant message (to append to the conversation for the next turn).
  Message to_message() const;

 private:
  struct Impl;
  explicit OutputParser(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::chat
