// StopChecker (contract in stop_checker.h). pending_ stays short: at most the longest stop
// string minus one byte plus the last delta, so the plain substring searches here are cheap.
#include "sample/stop_checker.h"

#include <algorithm>
#include <climits>

#include "base/check.h"

namespace deepinfer::sample {

size_t incomplete_utf8_suffix(std::string_view text) {
  // Walk back over at most 3 continuation bytes to the lead byte of the last character.
  const size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return need > back ? back : 0;
  }
  return 0;  // only continuation bytes: invalid text, nothing to wait for
}

StopChecker::StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                         int32_t max_tokens_cap)
    : stop_token_ids_(params.stop_token_ids),
      stop_strings_(params.stop),
      min_tokens_(params.min_tokens),
      max_tokens_(std::min(params.max_tokens.value_or(INT32_MAX), max_tokens_cap)),
      include_stop_(params.include_stop_str_in_output) {
  if (!params.ignore_eos) {
    stop_token_ids_.insert(stop_token_ids_.end(), eos_token_ids.begin(), eos_token_ids.end());
  }
}

bool StopChecker::is_stop_token(int32_t token) const {
  return std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token) != stop_token_ids_.end();
}

std::pair<size_t, int32_t> StopChecker::find_stop_string() const {
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  int32_t best_index = -1;
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    const std::string& s = stop_strings_[i];
    if (s.empty()) continue;
    const size_t start = pending_.find(s);  // first occurrence = earliest end for this string
    if (start == std::string::npos) continue;
    const size_t end = start + s.size();
    // Earliest end wins (the string a character-by-character stream would see first); on equal
    // ends the longer string (earlier start); index order breaks the rest.
    if (best_index < 0 || end < best_end || (end == best_end && start < best_start)) {
      best_start = start, best_end = end, best_index = static_cast<int32_t>(i);
    }
  }
  return {best_start, best_index};
}

size_t StopChecker::hold_back_length() const {
  size_t hold = incomplete_utf8_suffix(pending_);
  for (const std::string& s : stop_strings_) {
    if (s.empty()) continue;  // rejected by validate(); would match everywhere
    // Longest proper prefix of s that is a suffix of pending_.
    const size_t max_k = std::min(s.size() - 1, pending_.size());
    for (size_t k = max_k; k > hold; --k) {
      if (std::string_view(pending_).substr(pending_.size() - k) ==
          std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

StopUpdate StopChecker::append(int32_t token, std::string_view text_delta) {
  DI_CHECK(!finished(), "StopChecker::append after the sequence finished");
  StopUpdate update;
  ++n_generated_;
  if (is_stop_token(token)) {
    if (include_stop_) pending_.append(text_delta);
    update.text = flush();
    update.finish = finish_ = FinishReason::kStop;
    update.stop_token = token;
    return update;
  }
  pending_.append(text_delta);
  if (n_generated_ > min_tokens_ && !stop_strings_.empty()) {
    const auto [start, index] = find_stop_string();
    if (index >= 0) {
      const size_t keep = include_stop_ ? start + stop_strings_[index].size() : start;
      update.text = pending_.substr(0, keep);
      pending_.clear();
      update.finish = finish_ = FinishReason::kStop;
      update.stop_string_index = index;
      return update;
    }
  }
  if (n_generated_ >= max_tokens_) {
    update.text = flush();
    update.finish = finish_ = FinishReason::kLength;
    return update;
  }
  const size_t release = pending_.size() - hold_back_length();
  update.text = pending_.substr(0, release);
  pending_.erase(0, release);
  return update;
}

std::string StopChecker::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace deepinfer::sample
