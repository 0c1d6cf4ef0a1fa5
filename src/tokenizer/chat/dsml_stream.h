// DsmlStream: incremental parser of one generated DSML tool-call block. The caller feeds the text
// between ｜DSML｜ ids (on_text) and each ｜DSML｜ id (on_marker); markup is only recognised at a
// marker id, so text that merely spells a tag is data. Grammar (V4 tag names; V4.1 uses " calls",
// " invoke", " parameter"), after the opener "<" ｜DSML｜:
//   tool_calls>\n  { <｜DSML｜invoke name="N">\n
//                     { <｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>\n }
//                     </｜DSML｜invoke>\n }  </｜DSML｜tool_calls>  EOS
// Arguments stream as the OpenAI JSON string: {"K": "escaped V", "K2": V2}.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "deepinfer/chat.h"
#include "tokenizer/chat/templates.h"

namespace deepinfer::chat {

class DsmlStream {
 public:
  DsmlStream(ModelFamily family, std::string id_prefix, std::vector<ToolCall>* completed);

  void on_text(std::string_view text, std::vector<ChatEvent>* events);
  void on_marker(std::vector<ChatEvent>* events);
  // EOS arrived: fine only right after "</｜DSML｜tool_calls>".
  void on_end();
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  bool has_open_call() const { return in_call_; }

 private:
  // The tag whose text follows the last marker.
  enum class Tag : uint8_t { kCallsOpen, kInvokeOpen, kParamOpen, kParamClose, kInvokeClose,
                             kCallsClose };

  void fail(std::string message);
  // Whether seg_ can still grow into a valid segment for tag_ (early error detection).
  bool segment_viable();
  // For kParamOpen: parses ` name="K" string="B">` once complete; false on a malformed header.
  bool parse_param_header();
  void stream_string_value(bool final, std::vector<ChatEvent>* events);
  void finish_param(std::vector<ChatEvent>* events);
  void start_call(std::string name, std::vector<ChatEvent>* events);
  void end_call(std::vector<ChatEvent>* events);
  void emit_arguments(std::string text, std::vector<ChatEvent>* events);

  DsmlTags tags_;
  std::string id_prefix_;
  std::vector<ToolCall>* completed_;
  std::string error_;

  Tag tag_ = Tag::kCallsOpen;
  std::string seg_;  // text since the last marker

  bool in_call_ = false;
  ToolCall call_;                  // the call being parsed; arguments grow with each delta
  std::set<std::string> param_names_;
  size_t header_len_ = 0;          // kParamOpen: bytes of tag + header in seg_, 0 = incomplete
  bool param_is_string_ = false;
  size_t value_streamed_ = 0;      // bytes of a string value already emitted
  std::string pending_delta_;      // the key part of the next arguments delta
};

}  // namespace deepinfer::chat
