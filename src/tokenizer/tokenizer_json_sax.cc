// TokenizerJsonSax (see tokenizer_json_sax.h). The DOM part mirrors nlohmann's own SAX→DOM
// builder: a value goes into the innermost open container; a container stays open (on stack_)
// until its end event, and nothing else is added to its parent meanwhile, so pointers stay valid.
#include "tokenizer/tokenizer_json_sax.h"

#include <cstdint>

namespace deepinfer::tokenizer {

bool TokenizerJsonSax::in_model_member(const char* name) const {
  return stack_.size() == 2 && keys_[1] == "model" && stack_.back()->is_object() &&
         pending_key_ == name;
}

TokenizerJsonSax::Json* TokenizerJsonSax::add_value(Json value) {
  if (stack_.empty()) {
    root_ = std::move(value);
    return &root_;
  }
  Json& top = *stack_.back();
  if (top.is_array()) {
    top.push_back(std::move(value));
    return &top.back();
  }
  Json& slot = top[pending_key_];
  slot = std::move(value);
  return &slot;
}

bool TokenizerJsonSax::open(Json container) {
  const std::string key =
      !stack_.empty() && stack_.back()->is_object() ? pending_key_ : std::string();
  stack_.push_back(add_value(std::move(container)));
  keys_.push_back(key);
  return true;
}

bool TokenizerJsonSax::close() {
  stack_.pop_back();
  keys_.pop_back();
  return true;
}

bool TokenizerJsonSax::fail(std::string message) {
  error_ = std::move(message);
  return false;
}

bool TokenizerJsonSax::fail_in_mode() {
  if (mode_ == Mode::kVocab) {
    return fail("model.vocab[\"" + vocab_key_ + "\"]: id is not a non-negative 32-bit integer");
  }
  return fail("model.merges[" + std::to_string(spec_->merges.size()) +
              "]: expected a \"left right\" string or a [left, right] pair");
}

bool TokenizerJsonSax::vocab_id(int64_t id) {
  if (id < 0 || id > INT32_MAX) return fail_in_mode();
  spec_->vocab.emplace_back(std::move(vocab_key_), static_cast<int32_t>(id));
  return true;
}

// tokenizers < 0.20 writes merges as "left right" (byte-level text never holds a space).
bool TokenizerJsonSax::merge_string(std::string& s) {
  const size_t space = s.find(' ');
  if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
    return fail("model.merges[" + std::to_string(spec_->merges.size()) +
                "]: expected \"left right\" with exactly one space, got \"" + s + "\"");
  }
  spec_->merges.emplace_back(s.substr(0, space), s.substr(space + 1));
  return true;
}

bool TokenizerJsonSax::null() {
  return mode_ == Mode::kDom ? (add_value(nullptr), true) : fail_in_mode();
}
bool TokenizerJsonSax::boolean(bool val) {
  return mode_ == Mode::kDom ? (add_value(val), true) : fail_in_mode();
}

bool TokenizerJsonSax::number_integer(number_integer_t val) {
  if (mode_ == Mode::kVocab) return vocab_id(val);
  return mode_ == Mode::kDom ? (add_value(val), true) : fail_in_mode();
}

bool TokenizerJsonSax::number_unsigned(number_unsigned_t val) {
  if (mode_ == Mode::kVocab)
    return val > INT32_MAX ? fail_in_mode() : vocab_id(static_cast<int64_t>(val));
  return mode_ == Mode::kDom ? (add_value(val), true) : fail_in_mode();
}

bool TokenizerJsonSax::number_float(number_float_t val, const string_t&) {
  return mode_ == Mode::kDom ? (add_value(val), true) : fail_in_mode();
}

bool TokenizerJsonSax::string(string_t& val) {
  switch (mode_) {
    case Mode::kDom:
      add_value(std::move(val));
      return true;
    case Mode::kMerges:
      return merge_string(val);
    case Mode::kMergePair:
      if (pair_.size() == 2) return fail_in_mode();
      pair_.push_back(std::move(val));
      return true;
    case Mode::kVocab:
      return fail_in_mode();
  }
  return false;
}

bool TokenizerJsonSax::binary(binary_t&) { return fail("unexpected binary value"); }

bool TokenizerJsonSax::start_object(std::size_t) {
  if (mode_ != Mode::kDom) return fail_in_mode();
  if (in_model_member("vocab")) {
    add_value(Json::object());  // placeholder: presence and type stay visible in the DOM
    mode_ = Mode::kVocab;
    return true;
  }
  return open(Json::object());
}

bool TokenizerJsonSax::key(string_t& val) {
  (mode_ == Mode::kVocab ? vocab_key_ : pending_key_) = std::move(val);
  return true;
}

bool TokenizerJsonSax::end_object() {
  if (mode_ == Mode::kVocab) {
    mode_ = Mode::kDom;
    return true;
  }
  return close();
}

bool TokenizerJsonSax::start_array(std::size_t) {
  if (mode_ == Mode::kMerges) {
    mode_ = Mode::kMergePair;
    pair_.clear();
    return true;
  }
  if (mode_ != Mode::kDom) return fail_in_mode();
  if (in_model_member("merges")) {
    add_value(Json::array());
    mode_ = Mode::kMerges;
    return true;
  }
  return open(Json::array());
}

bool TokenizerJsonSax::end_array() {
  if (mode_ == Mode::kMergePair) {
    if (pair_.size() != 2) return fail_in_mode();
    spec_->merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
    mode_ = Mode::kMerges;
    return true;
  }
  if (mode_ == Mode::kMerges) {
    mode_ = Mode::kDom;
    return true;
  }
  return close();
}

bool TokenizerJsonSax::parse_error(std::size_t, const std::string&,
                                   const nlohmann::detail::exception& ex) {
  return fail(std::string("invalid tokenizer JSON: ") + ex.what());
}

}  // namespace deepinfer::tokenizer
