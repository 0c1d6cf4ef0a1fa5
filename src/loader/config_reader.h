// Private to src/loader: typed reading of config.json objects with errors that name the key,
// shared by the V4 parser (model_config.cc) and the nested V4.1 parser (model_config_v41.cc).
// KeyReader remembers the first error; callers check status() once after reading a group.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "loader/model_config.h"

namespace deepinfer::loader::detail {

class KeyReader {
 public:
  using json = nlohmann::json;
  KeyReader(const json& obj, std::string label) : obj_(obj), label_(std::move(label)) {}

  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt) {
    const json* v = lookup(key, fallback.has_value());
    if (v == nullptr) return fallback.value_or(0);
    if (!v->is_number_integer()) return fail<int64_t>(key, "must be an integer");
    return v->get<int64_t>();
  }
  double number(const char* key, std::optional<double> fallback = std::nullopt) {
    const json* v = lookup(key, fallback.has_value());
    if (v == nullptr) return fallback.value_or(0.0);
    if (!v->is_number()) return fail<double>(key, "must be a number");
    return v->get<double>();
  }
  bool boolean(const char* key, bool fallback) {
    const json* v = lookup(key, true);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return fail<bool>(key, "must be true or false");
    return v->get<bool>();
  }
  std::string string(const char* key, std::optional<std::string> fallback = std::nullopt) {
    const json* v = lookup(key, fallback.has_value());
    if (v == nullptr) return fallback.value_or("");
    if (!v->is_string()) return fail<std::string>(key, "must be a string");
    return v->get<std::string>();
  }
  std::vector<int> int_list(const char* key, bool optional) {
    std::vector<int64_t> v = int64_list(key, optional);
    return std::vector<int>(v.begin(), v.end());
  }
  std::vector<int64_t> int64_list(const char* key, bool optional) {
    const json* v = lookup(key, optional);
    std::vector<int64_t> out;
    if (v == nullptr) return out;
    if (!v->is_array()) return fail<std::vector<int64_t>>(key, "must be a list of integers");
    for (const json& x : *v) {
      if (!x.is_number_integer()) return fail<std::vector<int64_t>>(key, "must be a list of integers");
      out.push_back(x.get<int64_t>());
    }
    return out;
  }
  const json* object(const char* key) {
    const json* v = lookup(key, true);
    if (v != nullptr && !v->is_object() && !v->is_null()) return fail<const json*>(key, "must be an object");
    return (v != nullptr && v->is_object()) ? v : nullptr;
  }
  bool has(const char* key) const {
    auto it = obj_.find(key);
    return it != obj_.end() && !it->is_null();
  }
  const Status& status() const { return status_; }
  const std::string& label() const { return label_; }

 private:
  const json* lookup(const char* key, bool optional) {
    auto it = obj_.find(key);
    if (it == obj_.end() || (optional && it->is_null())) {
      if (!optional && status_.is_ok()) status_ = invalid_argument("{}: missing required key '{}'", label_, key);
      return nullptr;
    }
    return &*it;
  }
  template <typename T>
  T fail(const char* key, const char* what) {
    if (status_.is_ok()) status_ = invalid_argument("{}: '{}' {}", label_, key, what);
    return T{};
  }
  const json& obj_;
  std::string label_;
  Status status_;
};

// `quantization_config` (+ a top-level `expert_dtype`) of an HF config object.
Status parse_quant(const nlohmann::json& config, const std::string& label, QuantConfig* q);
// `rope_scaling` of an HF config object (absent: no YaRN).
Status parse_rope_scaling(const nlohmann::json& config, const std::string& label, RopeScaling* rs);
// The nested V4.1 HF config.json text (model_config_v41_validate.cc).
std::string model_config_v41_to_json(const ModelConfig& config);

}  // namespace deepinfer::loader::detail
