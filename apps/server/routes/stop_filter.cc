// ContentStopFilter (see stop_filter.h).
#include "routes/stop_filter.h"

#include <algorithm>

namespace deepinfer::server {
namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

ContentStopFilter::ContentStopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
  for (const std::string& s : stops_) hold_ = std::max(hold_, s.size() - 1);
}

void ContentStopFilter::emit(std::string text, std::vector<chat::ChatEvent>* out) {
  if (text.empty()) return;
  content_ += text;
  chat::ChatEvent e;
  e.kind = chat::EventKind::kContentDelta;
  e.text = std::move(text);
  out->push_back(std::move(e));
}

void ContentStopFilter::flush(std::vector<chat::ChatEvent>* out) {
  emit(std::move(pending_), out);
  pending_.clear();
}

bool ContentStopFilter::filter(std::span<const chat::ChatEvent> in, std::vector<chat::ChatEvent>* out) {
  if (!matched_.empty()) return true;
  for (const chat::ChatEvent& e : in) {
    if (stops_.empty()) {
      if (e.kind == chat::EventKind::kContentDelta) content_ += e.text;
      out->push_back(e);
      continue;
    }
    if (e.kind != chat::EventKind::kContentDelta) {
      flush(out);
      out->push_back(e);
      continue;
    }
    pending_ += e.text;
    size_t first = std::string::npos;
    const std::string* which = nullptr;
    for (const std::string& s : stops_) {
      size_t at = pending_.find(s);
      if (at != std::string::npos && at < first) {
        first = at;
        which = &s;
      }
    }
    if (which != nullptr) {
      matched_ = *which;
      emit(pending_.substr(0, first), out);
      pending_.clear();
      return true;
    }
    if (pending_.size() > hold_) {
      size_t cut = pending_.size() - hold_;
      while (cut > 0 && cut < pending_.size() && is_continuation(pending_[cut])) --cut;
      emit(pending_.substr(0, cut), out);
      pending_.erase(0, cut);
    }
  }
  return false;
}

}  // namespace deepinfer::server
