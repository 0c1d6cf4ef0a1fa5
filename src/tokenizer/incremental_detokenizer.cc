// IncrementalDetokenizer (include/deepinfer/tokenizer.h): streams UTF-8 text deltas. Invariant:
// pending_ holds only the proper prefix of one multi-byte sequence (at most 3 bytes), so every
// returned delta is valid UTF-8, and the concatenated deltas + flush() equal decode() of all ids
// except that a trailing incomplete sequence becomes U+FFFD.
#include "deepinfer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                               bool skip_special)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  if (skip_special_ && tokenizer_->is_special(id)) return {};
  pending_ += tokenizer_->token_bytes(id);
  const size_t n_held = tokenizer::incomplete_tail_length(pending_);
  std::string delta;
  tokenizer::append_utf8_lossy(delta,
                               std::string_view(pending_).substr(0, pending_.size() - n_held),
                               /*keep_incomplete_tail=*/false);
  pending_.erase(0, pending_.size() - n_held);
  return delta;
}

std::string IncrementalDetokenizer::flush() {
  std::string delta;
  tokenizer::append_utf8_lossy(delta, pending_, /*keep_incomplete_tail=*/false);
  pending_.clear();
  return delta;
}

}  // namespace deepinfer
