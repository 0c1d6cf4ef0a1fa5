// Path-aware JSON accessors (see json_reader.h).
#include "protocol/json_reader.h"

namespace deepinfer::protocol {

std::string json_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string json_path(const std::string& parent, size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

Status json_error(const std::string& path, std::string_view problem) {
  return Status(StatusCode::kInvalidArgument, path + ": " + std::string(problem));
}

Status type_error(const std::string& path, std::string_view expected, const Json& got) {
  return json_error(path, "expected " + std::string(expected) + ", got " + got.type_name());
}

const Json* member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::optional<std::string>> opt_string(const Json& obj, std::string_view key,
                                              const std::string& path) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return type_error(json_path(path, key), "a string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::string> req_string(const Json& obj, std::string_view key, const std::string& path) {
  auto v = opt_string(obj, key, path);
  if (!v.is_ok()) return v.status();
  if (!v->has_value()) return json_error(json_path(path, key), "required");
  return **v;
}

Result<std::optional<double>> opt_number(const Json& obj, std::string_view key,
                                         const std::string& path) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return type_error(json_path(path, key), "a number", *v);
  return std::optional<double>(v->get<double>());
}

Result<std::optional<int64_t>> opt_int(const Json& obj, std::string_view key,
                                       const std::string& path) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX)) {
    return type_error(json_path(path, key), "an integer", *v);
  }
  return std::optional<int64_t>(v->get<int64_t>());
}

Result<std::optional<bool>> opt_bool(const Json& obj, std::string_view key, const std::string& path) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return type_error(json_path(path, key), "a boolean", *v);
  return std::optional<bool>(v->get<bool>());
}

Result<const Json*> opt_object(const Json& obj, std::string_view key, const std::string& path) {
  const Json* v = member(obj, key);
  if (v != nullptr && !v->is_object()) return type_error(json_path(path, key), "an object", *v);
  return v;
}

Result<const Json*> opt_array(const Json& obj, std::string_view key, const std::string& path) {
  const Json* v = member(obj, key);
  if (v != nullptr && !v->is_array()) return type_error(json_path(path, key), "an array", *v);
  return v;
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace deepinfer::protocol
