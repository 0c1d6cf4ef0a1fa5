// TokenizerJsonSax: a SAX handler that reads a tokenizer.json into a DOM *except* model.vocab and
// model.merges, which it appends straight to a TokenizerSpec. Those two hold almost the whole
// file (128k + 128k entries for DeepSeek); skipping their DOM halves the load time, which every
// CLI run and every test process pays. Entry-level problems stop the parse with a message that
// names the entry (e.g. model.merges[17]). Used only by tokenizer_json.cc.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_json.h"

namespace deepinfer::tokenizer {

class TokenizerJsonSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  using Json = nlohmann::json;
  explicit TokenizerJsonSax(TokenizerSpec* spec) : spec_(spec) {}

  // The document without the contents of model.vocab / model.merges (kept as {} / []).
  const Json& root() const { return root_; }
  // Empty unless the parse stopped: "invalid tokenizer JSON: ..." or "<entry>: <problem>".
  const std::string& error() const { return error_; }

  bool null() override;
  bool boolean(bool val) override;
  bool number_integer(number_integer_t val) override;
  bool number_unsigned(number_unsigned_t val) override;
  bool number_float(number_float_t val, const string_t& s) override;
  bool string(string_t& val) override;
  bool binary(binary_t& val) override;
  bool start_object(std::size_t elements) override;
  bool key(string_t& val) override;
  bool end_object() override;
  bool start_array(std::size_t elements) override;
  bool end_array() override;
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override;

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };
  bool in_model_member(const char* name) const;
  Json* add_value(Json value);
  bool open(Json container);
  bool close();
  bool vocab_id(int64_t id);
  bool merge_string(std::string& s);
  bool fail(std::string message);
  bool fail_in_mode();

  TokenizerSpec* spec_;
  Json root_;
  std::vector<Json*> stack_;       // open DOM containers
  std::vector<std::string> keys_;  // key under which each open container sits ("" in arrays)
  std::string pending_key_;
  Mode mode_ = Mode::kDom;
  std::string vocab_key_;
  std::vector<std::string> pair_;  // strings of the [left, right] merge being read
  std::string error_;
};

}  // namespace deepinfer::tokenizer
