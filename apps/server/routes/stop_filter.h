// Stop strings for the chat APIs, applied to the answer text only: a stop string inside the
// reasoning or inside tool-call arguments must not end the turn, so the engine is not given the
// strings (it matches on the raw output, markup included). The filter holds back up to
// (longest stop - 1) bytes of content, never splitting a UTF-8 character; on a match it drops the
// stop string and everything after it.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "deepinfer/chat.h"

namespace deepinfer::server {

class ContentStopFilter {
 public:
  explicit ContentStopFilter(std::vector<std::string> stops);

  // Appends the filtered form of `in` to `out`. Returns true when a stop string matched: `out`
  // then ends with the content before it, and later input must be ignored (see matched()).
  bool filter(std::span<const chat::ChatEvent> in, std::vector<chat::ChatEvent>* out);
  // The stop string that matched ("" while none has).
  const std::string& matched() const { return matched_; }
  // All content let through so far.
  const std::string& content() const { return content_; }

 private:
  void flush(std::vector<chat::ChatEvent>* out);
  void emit(std::string text, std::vector<chat::ChatEvent>* out);

  std::vector<std::string> stops_;
  size_t hold_ = 0;       // bytes to hold back: longest stop - 1
  std::string pending_;   // held-back content
  std::string content_;
  std::string matched_;
};

}  // namespace deepinfer::server
