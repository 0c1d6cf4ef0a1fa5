// Bad words (see bad_words.h).
#include "engine/bad_words.h"

#include <algorithm>

#include "base/status.h"

namespace deepinfer::engine {

std::vector<std::vector<int32_t>> bad_word_token_ids(std::span<const std::string> words, const Tokenizer& tokenizer,
                                                     int32_t n_vocab) {
  std::vector<std::vector<int32_t>> out;
  auto in_vocab = [n_vocab](const std::vector<int32_t>& ids) {
    return !ids.empty() && std::all_of(ids.begin(), ids.end(), [n_vocab](int32_t t) { return t >= 0 && t < n_vocab; });
  };
  for (const std::string& word : words) {
    const size_t start = word.find_first_not_of(" \t\n\r");
    if (start == std::string::npos) continue;
    const std::string bare = word.substr(start);
    std::vector<int32_t> plain = tokenizer.encode(bare, /*match_special=*/false);
    std::vector<int32_t> spaced = tokenizer.encode(" " + bare, /*match_special=*/false);
    const bool have_plain = in_vocab(plain);
    if (have_plain) out.push_back(plain);
    if (in_vocab(spaced) && (!have_plain || (spaced.front() != plain.front() && spaced.size() == plain.size()))) {
      out.push_back(std::move(spaced));
    }
  }
  return out;
}

BadWordsMatcher::BadWordsMatcher(std::unique_ptr<StructuredOutputMatcher> inner,
                                 std::vector<std::vector<int32_t>> words, int32_t n_vocab)
    : inner_(std::move(inner)), words_(std::move(words)), n_vocab_(n_vocab) {}

Status BadWordsMatcher::fill_bitmask(std::span<uint32_t> bits) {
  if (inner_ != nullptr) {
    DI_RETURN_IF_ERROR(inner_->fill_bitmask(bits));
  } else {
    std::fill(bits.begin(), bits.end(), ~0u);
  }
  for (const std::vector<int32_t>& w : words_) {
    const size_t prefix = w.size() - 1;
    if (prefix > output_.size()) continue;
    if (!std::equal(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(prefix),
                    output_.end() - static_cast<std::ptrdiff_t>(prefix))) {
      continue;
    }
    const int32_t last = w.back();
    if (last >= 0 && last < n_vocab_ && static_cast<size_t>(last >> 5) < bits.size()) {
      bits[static_cast<size_t>(last) >> 5] &= ~(1u << (last & 31));
    }
  }
  return Status::ok();
}

bool BadWordsMatcher::accept(int32_t token) {
  if (inner_ != nullptr && !inner_->accept(token)) return false;
  output_.push_back(token);
  return true;
}

Status BadWordsMatcher::rollback(int32_t n) {
  if (n < 0 || static_cast<size_t>(n) > output_.size()) {
    return invalid_argument("bad_words: rollback of {} tokens, {} accepted", n, output_.size());
  }
  if (inner_ != nullptr) DI_RETURN_IF_ERROR(inner_->rollback(n));
  output_.resize(output_.size() - static_cast<size_t>(n));
  return Status::ok();
}

}  // namespace deepinfer::engine
