// DsmlStream (see dsml_stream.h). Each segment (text between two ｜DSML｜ ids) starts with the
// tag name of the tag the last marker opened and ends with "<" or "</", the start of the next
// tag. A segment is checked while it grows so malformed markup fails early, and string parameter
// values stream out as soon as they cannot be the start of the closing "</".
#include "tokenizer/chat/dsml_stream.h"

#include <fmt/format.h>

#include "tokenizer/chat/py_json.h"

namespace deepinfer::chat {
namespace {

enum class Match : uint8_t { kIncomplete, kInvalid, kComplete };

// Whether `seg` is a prefix of `full` (it may still grow into it).
bool is_prefix_of(std::string_view seg, std::string_view full) {
  return seg.size() <= full.size() && full.substr(0, seg.size()) == seg;
}

// Whether `seg` (a prefix of the text) agrees with `literal` on their common length.
Match match_literal(std::string_view* seg, std::string_view literal) {
  if (seg->size() < literal.size()) {
    return is_prefix_of(*seg, literal) ? Match::kIncomplete : Match::kInvalid;
  }
  if (seg->substr(0, literal.size()) != literal) return Match::kInvalid;
  seg->remove_prefix(literal.size());
  return Match::kComplete;
}

bool is_python_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// `{invoke}\s*name="NAME">` at the start of seg; on kComplete `rest` is what follows it.
Match match_invoke_head(std::string_view seg, std::string_view tag, std::string* name,
                        std::string_view* rest) {
  if (Match m = match_literal(&seg, tag); m != Match::kComplete) return m;
  while (!seg.empty() && is_python_space(seg.front())) seg.remove_prefix(1);
  if (seg.empty()) return Match::kIncomplete;
  if (Match m = match_literal(&seg, "name=\""); m != Match::kComplete) return m;
  size_t end = seg.find("\">");
  if (end == std::string_view::npos) return Match::kIncomplete;
  *name = std::string(seg.substr(0, end));
  *rest = seg.substr(end + 2);
  return Match::kComplete;
}

// `{parameter} name="KEY" string="true|false">` at the start of seg.
Match match_param_head(std::string_view seg, std::string_view tag, std::string* key,
                       bool* is_string, size_t* head_len) {
  std::string_view start = seg;
  if (Match m = match_literal(&seg, tag); m != Match::kComplete) return m;
  if (Match m = match_literal(&seg, " name=\""); m != Match::kComplete) return m;
  constexpr std::string_view kSep = "\" string=\"";
  size_t sep = seg.find(kSep);
  if (sep == std::string_view::npos) return Match::kIncomplete;
  *key = std::string(seg.substr(0, sep));
  seg.remove_prefix(sep + kSep.size());
  if (seg.starts_with("true\">")) {
    *is_string = true;
  } else if (seg.starts_with("false\">")) {
    *is_string = false;
  } else if (is_prefix_of(seg, "true\">") || is_prefix_of(seg, "false\">")) {
    return Match::kIncomplete;
  } else {
    return Match::kInvalid;
  }
  *head_len = static_cast<size_t>(seg.data() - start.data()) + (*is_string ? 6 : 7);
  return Match::kComplete;
}

}  // namespace

DsmlStream::DsmlStream(ModelFamily family, std::string id_prefix,
                       std::vector<ToolCall>* completed)
    : tags_(dsml_tags(family)), id_prefix_(std::move(id_prefix)), completed_(completed) {}

void DsmlStream::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

bool DsmlStream::segment_viable() {
  std::string name;
  std::string_view rest;
  switch (tag_) {
    case Tag::kCallsOpen: return is_prefix_of(seg_, fmt::format("{}>\n</", tags_.calls));
    case Tag::kParamClose: return is_prefix_of(seg_, fmt::format("{}>\n</", tags_.parameter));
    case Tag::kInvokeClose: return is_prefix_of(seg_, fmt::format("{}>\n</", tags_.invoke));
    case Tag::kCallsClose: return is_prefix_of(seg_, fmt::format("{}>", tags_.calls));
    case Tag::kInvokeOpen: {
      Match m = match_invoke_head(seg_, tags_.invoke, &name, &rest);
      return m == Match::kIncomplete ||
             (m == Match::kComplete && (is_prefix_of(rest, "\n</") || is_prefix_of(rest, "\n\n</")));
    }
    case Tag::kParamOpen: return header_len_ > 0 || parse_param_header();
  }
  return false;
}

bool DsmlStream::parse_param_header() {
  std::string key;
  bool is_string = false;
  size_t head_len = 0;
  Match m = match_param_head(seg_, tags_.parameter, &key, &is_string, &head_len);
  if (m == Match::kInvalid) return false;
  if (m == Match::kIncomplete) return true;
  if (!param_names_.insert(key).second) {
    fail(fmt::format("tool call {}: duplicate parameter \"{}\"", call_.name, key));
    return true;  // fail() already recorded the reason
  }
  header_len_ = head_len;
  param_is_string_ = is_string;
  value_streamed_ = 0;
  std::string delta = param_names_.size() > 1 ? ", " : "";
  pyjson::append_quoted(key, &delta);
  delta.append(": ");
  if (is_string) delta.push_back('"');
  pending_delta_ = std::move(delta);
  return true;
}

void DsmlStream::emit_arguments(std::string text, std::vector<ChatEvent>* events) {
  if (text.empty()) return;
  call_.arguments.append(text);
  ChatEvent e;
  e.kind = EventKind::kToolCallArgumentsDelta;
  e.text = std::move(text);
  e.tool_index = static_cast<int>(completed_->size());
  events->push_back(std::move(e));
}

void DsmlStream::stream_string_value(bool final, std::vector<ChatEvent>* events) {
  std::string_view value = std::string_view(seg_).substr(header_len_);
  size_t hold = 0;
  if (final) {
    hold = 2;  // the closing "</" (checked by the caller)
  } else if (value.ends_with("</")) {
    hold = 2;
  } else if (value.ends_with("<")) {
    hold = 1;
  }
  size_t avail = value.size() - hold;
  if (avail <= value_streamed_) return;
  std::string escaped;
  pyjson::append_escaped(value.substr(value_streamed_, avail - value_streamed_), &escaped);
  value_streamed_ = avail;
  emit_arguments(std::move(escaped), events);
}

void DsmlStream::finish_param(std::vector<ChatEvent>* events) {
  if (param_is_string_) {
    stream_string_value(/*final=*/true, events);
    emit_arguments("\"", events);
  } else {
    // Verbatim, as the reference parser inserts it (model_v4_flash.md §6.5: "others inserted
    // verbatim") — also a value that is not JSON, which then makes the arguments string invalid
    // JSON, as OpenAI's own arguments may be, rather than failing the whole turn.
    std::string_view value = std::string_view(seg_).substr(header_len_);
    value.remove_suffix(2);  // "</"
    emit_arguments(std::string(value), events);
  }
  header_len_ = 0;
}

void DsmlStream::start_call(std::string name, std::vector<ChatEvent>* events) {
  in_call_ = true;
  call_ = ToolCall{};
  call_.id = id_prefix_ + std::to_string(completed_->size());
  call_.name = std::move(name);
  param_names_.clear();
  ChatEvent e;
  e.kind = EventKind::kToolCallStart;
  e.tool_index = static_cast<int>(completed_->size());
  e.tool_call_id = call_.id;
  e.tool_name = call_.name;
  events->push_back(std::move(e));
  emit_arguments("{", events);
}

void DsmlStream::end_call(std::vector<ChatEvent>* events) {
  emit_arguments("}", events);
  ChatEvent e;
  e.kind = EventKind::kToolCallEnd;
  e.tool_index = static_cast<int>(completed_->size());
  e.tool_call_id = call_.id;
  e.tool_name = call_.name;
  e.text = call_.arguments;
  events->push_back(std::move(e));
  completed_->push_back(std::move(call_));
  in_call_ = false;
}

void DsmlStream::on_text(std::string_view text, std::vector<ChatEvent>* events) {
  if (failed()) return;
  seg_.append(text);
  if (!segment_viable()) {
    fail(fmt::format("malformed DSML tool call markup after tool call {}", completed_->size()));
    return;
  }
  if (failed()) return;
  if (!pending_delta_.empty()) emit_arguments(std::exchange(pending_delta_, ""), events);
  if (tag_ == Tag::kParamOpen && header_len_ > 0 && param_is_string_) {
    stream_string_value(/*final=*/false, events);
  }
}

void DsmlStream::on_marker(std::vector<ChatEvent>* events) {
  if (failed()) return;
  bool closing = seg_.ends_with("</");
  if (!closing && !seg_.ends_with("<")) {
    fail("DSML marker without a preceding '<' or '</'");
    return;
  }
  std::string body = seg_.substr(0, seg_.size() - (closing ? 2 : 1));
  Tag next = closing ? Tag::kCallsClose : Tag::kInvokeOpen;
  switch (tag_) {
    case Tag::kCallsOpen:
      if (body != fmt::format("{}>\n", tags_.calls)) return fail("malformed DSML block opener");
      break;
    case Tag::kInvokeOpen: {
      std::string name;
      std::string_view rest;
      // "\n\n" too: a call without parameters renders as ">\n\n</" (the reference regex's "$"
      // also matches before a final newline, so its parser accepts it).
      if (match_invoke_head(body, tags_.invoke, &name, &rest) != Match::kComplete ||
          (rest != "\n" && rest != "\n\n")) {
        return fail("malformed DSML invoke tag");
      }
      start_call(std::move(name), events);
      next = closing ? Tag::kInvokeClose : Tag::kParamOpen;
      break;
    }
    case Tag::kParamOpen:
      if (!closing || header_len_ == 0) return fail("malformed DSML parameter");
      finish_param(events);
      if (failed()) return;
      next = Tag::kParamClose;
      break;
    case Tag::kParamClose:
      if (body != fmt::format("{}>\n", tags_.parameter)) return fail("malformed DSML parameter end");
      next = closing ? Tag::kInvokeClose : Tag::kParamOpen;
      break;
    case Tag::kInvokeClose:
      if (body != fmt::format("{}>\n", tags_.invoke)) return fail("malformed DSML invoke end");
      end_call(events);
      break;
    case Tag::kCallsClose:
      return fail("text after the end of the DSML tool-call block");
  }
  tag_ = next;
  seg_.clear();
}

void DsmlStream::on_end() {
  if (failed()) return;
  if (tag_ != Tag::kCallsClose || seg_ != fmt::format("{}>", tags_.calls)) {
    fail("tool-call block ended before its closing tag");
  }
}

}  // namespace deepinfer::chat
