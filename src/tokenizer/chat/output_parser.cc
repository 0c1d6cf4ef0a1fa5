// OutputParser: generated ids -> reasoning / content / tool-call events. Three ids steer it and
// are matched by id only: </think> ends the reasoning, ｜DSML｜ marks tool-call markup, EOS ends
// the turn. As in the official parser (model_v4_flash.md §6.5), BOS and <think> in the output are
// errors; any other control id (a role tag, a task token) is kept as its text. Content ending in
// something that could still open the tool-call block ("\n", "\n\n", "<", "\n\n<") is held back
// until the next token decides.
#include <fmt/format.h>

#include <optional>

#include "deepinfer/chat.h"
#include "tokenizer/chat/dsml_stream.h"
#include "tokenizer/chat/prompt_builder.h"
#include "tokenizer/chat/utf8.h"

namespace deepinfer::chat {
namespace {

enum class State : uint8_t { kReasoning, kContent, kToolCalls, kDone };

// Bytes at the end of `text` that might begin the tool-call opener: up to two newlines followed
// by an optional '<' ("\n\n<" is the official opener; "<" and "\n<" are accepted too).
size_t opener_holdback(std::string_view text) {
  size_t n = 0;
  if (text.ends_with('<')) n = 1;
  for (int k = 0; k < 2 && n < text.size() && text[text.size() - 1 - n] == '\n'; ++k) ++n;
  return n;
}

}  // namespace

struct OutputParser::Impl {
  std::shared_ptr<const Tokenizer> tokenizer;
  ParserOptions options;
  int32_t eos_id = 0, think_end_id = 0, dsml_id = 0;
  int32_t bos_id = -1, think_start_id = -1;  // errors wherever they appear (-1: no such token)
  State state = State::kContent;
  Utf8Assembler utf8;
  std::string held;  // content not yet streamed (a possible opener prefix)
  std::optional<DsmlStream> dsml;
  ParsedOutput out;

  void emit(std::vector<ChatEvent>* events, EventKind kind, std::string text) {
    if (text.empty()) return;
    ChatEvent e;
    e.kind = kind;
    e.text = std::move(text);
    events->push_back(std::move(e));
  }

  void finish_with(FinishReason reason, std::vector<ChatEvent>* events) {
    ChatEvent e;
    e.kind = EventKind::kFinish;
    e.finish_reason = reason;
    events->push_back(std::move(e));
    out.finish_reason = reason;
    state = State::kDone;
  }

  void fail(std::string message, FinishReason reason, std::vector<ChatEvent>* events) {
    out.error = message;
    ChatEvent e;
    e.kind = EventKind::kError;
    e.text = std::move(message);
    events->push_back(std::move(e));
    finish_with(reason, events);
  }

  void on_text(std::string text, std::vector<ChatEvent>* events) {
    if (text.empty()) return;
    switch (state) {
      case State::kReasoning:
        out.reasoning_content.append(text);
        emit(events, EventKind::kReasoningDelta, std::move(text));
        return;
      case State::kContent: {
        held.append(text);
        size_t release = held.size() - opener_holdback(held);
        release_content(release, events);
        return;
      }
      case State::kToolCalls:
        dsml->on_text(text, events);
        if (dsml->failed()) fail(dsml->error(), FinishReason::kError, events);
        return;
      case State::kDone:
        return;
    }
  }

  void release_content(size_t n, std::vector<ChatEvent>* events) {
    std::string part = held.substr(0, n);
    held.erase(0, n);
    out.content.append(part);
    emit(events, EventKind::kContentDelta, std::move(part));
  }

  void on_dsml(std::vector<ChatEvent>* events) {
    if (state == State::kToolCalls) {
      dsml->on_marker(events);
      if (dsml->failed()) fail(dsml->error(), FinishReason::kError, events);
      return;
    }
    if (state == State::kReasoning) {
      return fail("tool-call markup inside the reasoning (before </think>)", FinishReason::kError,
                  events);
    }
    if (!held.ends_with('<')) {
      return fail("tool-call markup in the middle of the content", FinishReason::kError, events);
    }
    // The opener: strip "<" and the "\n\n" before it; the rest is content.
    held.pop_back();
    for (int k = 0; k < 2 && held.ends_with('\n'); ++k) held.pop_back();
    release_content(held.size(), events);
    state = State::kToolCalls;
    dsml.emplace(options.family, options.tool_call_id_prefix, &out.tool_calls);
  }

  void end(FinishReason reason, bool by_eos, std::vector<ChatEvent>* events) {
    switch (state) {
      case State::kReasoning:
        return finish_with(reason, events);  // reasoning only, no </think>: kept, not an error
      case State::kContent:
        release_content(held.size(), events);
        return finish_with(reason, events);
      case State::kToolCalls:
        if (by_eos) {
          dsml->on_end();
          if (dsml->failed()) return fail(dsml->error(), FinishReason::kError, events);
          return finish_with(FinishReason::kToolCalls, events);
        }
        // A block that closed before a stop other than EOS (a stop id, the length limit right
        // after it) holds complete calls: the official parser takes it without EOS.
        if (dsml->on_end(); !dsml->failed()) return finish_with(FinishReason::kToolCalls, events);
        return fail("tool-call block cut off before its end",
                    reason == FinishReason::kLength ? FinishReason::kLength : FinishReason::kError,
                    events);
      case State::kDone:
        return;
    }
  }

  void push(int32_t id, std::vector<ChatEvent>* events) {
    if (state == State::kDone) return;
    ++out.n_tokens;
    if (state == State::kReasoning) ++out.n_reasoning_tokens;
    bool marker = id == eos_id || id == think_end_id || id == dsml_id;
    if (id == bos_id || id == think_start_id) {
      return fail(fmt::format("unexpected control token {} in the output",
                              tokenizer->token_bytes(id)), FinishReason::kError, events);
    }
    if (!marker) return on_text(utf8.push(tokenizer->token_bytes(id)), events);
    on_text(utf8.flush(), events);
    if (state == State::kDone) return;
    if (id == eos_id) return end(FinishReason::kStop, /*by_eos=*/true, events);
    if (id == dsml_id) return on_dsml(events);
    if (state != State::kReasoning) {
      return fail("</think> outside the reasoning", FinishReason::kError, events);
    }
    state = State::kContent;
  }
};

OutputParser::OutputParser(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OutputParser::OutputParser(OutputParser&&) noexcept = default;
OutputParser& OutputParser::operator=(OutputParser&&) noexcept = default;
OutputParser::~OutputParser() = default;

Result<OutputParser> OutputParser::create(std::shared_ptr<const Tokenizer> tokenizer,
                                          const ParserOptions& options) {
  if (!tokenizer) return invalid_argument("OutputParser: no tokenizer");
  auto impl = std::make_unique<Impl>();
  auto lookup = [&](std::string_view text, int32_t* id) -> Status {
    std::optional<int32_t> found = tokenizer->token_to_id(text);
    if (!found) return not_found("OutputParser: tokenizer has no special token {}", text);
    *id = *found;
    return Status::ok();
  };
  DI_RETURN_IF_ERROR(lookup(special::kEos, &impl->eos_id));
  DI_RETURN_IF_ERROR(lookup(special::kThinkEnd, &impl->think_end_id));
  DI_RETURN_IF_ERROR(lookup(special::kDsml, &impl->dsml_id));
  impl->bos_id = tokenizer->token_to_id(special::kBos).value_or(-1);
  impl->think_start_id = tokenizer->token_to_id(special::kThinkStart).value_or(-1);
  impl->tokenizer = std::move(tokenizer);
  impl->options = options;
  impl->state = options.thinking_mode == ThinkingMode::kThinking ? State::kReasoning
                                                                 : State::kContent;
  return OutputParser(std::move(impl));
}

void OutputParser::push(int32_t id, std::vector<ChatEvent>* events) { impl_->push(id, events); }

void OutputParser::finish(FinishReason reason, std::vector<ChatEvent>* events) {
  if (impl_->state == State::kDone) return;
  impl_->on_text(impl_->utf8.flush(), events);
  if (impl_->state == State::kDone) return;
  impl_->end(reason == FinishReason::kLength ? FinishReason::kLength : FinishReason::kStop,
             /*by_eos=*/false, events);
}

bool OutputParser::is_done() const { return impl_->state == State::kDone; }

const ParsedOutput& OutputParser::output() const { return impl_->out; }

Message OutputParser::to_message() const {
  Message m;
  m.role = Role::kAssistant;
  m.content = impl_->out.content;
  m.reasoning_content = impl_->out.reasoning_content;
  m.tool_calls = impl_->out.tool_calls;
  return m;
}

}  // namespace deepinfer::chat
