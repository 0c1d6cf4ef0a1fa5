// Path-aware JSON accessors for the request adapters: every type error names the JSON path of
// the offending value ("messages[2].content[0].type: expected a string"). Absent and null
// members are treated alike. Internal to di_protocol.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/chat_request.h"

namespace deepinfer::protocol {

std::string json_path(const std::string& parent, std::string_view key);
std::string json_path(const std::string& parent, size_t index);
Status json_error(const std::string& path, std::string_view problem);
// "expected X, got <type>".
Status type_error(const std::string& path, std::string_view expected, const Json& got);

// The member `key` of object `obj`, or nullptr when absent or null.
const Json* member(const Json& obj, std::string_view key);

Result<std::optional<std::string>> opt_string(const Json& obj, std::string_view key,
                                              const std::string& path);
Result<std::string> req_string(const Json& obj, std::string_view key, const std::string& path);
Result<std::optional<double>> opt_number(const Json& obj, std::string_view key,
                                         const std::string& path);
Result<std::optional<int64_t>> opt_int(const Json& obj, std::string_view key,
                                       const std::string& path);
Result<std::optional<bool>> opt_bool(const Json& obj, std::string_view key, const std::string& path);
// An object member (nullptr when absent); error when present but not an object.
Result<const Json*> opt_object(const Json& obj, std::string_view key, const std::string& path);
Result<const Json*> opt_array(const Json& obj, std::string_view key, const std::string& path);

// Compact JSON text (UTF-8 kept) of a value, for tool schemas, arguments and formats.
std::string dump_json(const Json& value);

}  // namespace deepinfer::protocol

// Status propagation inside di_protocol (apps do not see src/base/status.h).
#define DI_PROTO_CONCAT_INNER(a, b) a##b
#define DI_PROTO_CONCAT(a, b) DI_PROTO_CONCAT_INNER(a, b)
#define DI_PROTO_RETURN_IF_ERROR(expr)          \
  do {                                          \
    ::deepinfer::Status di_proto_status_ = (expr); \
    if (!di_proto_status_.is_ok()) return di_proto_status_; \
  } while (0)
#define DI_PROTO_ASSIGN_OR_RETURN(lhs, expr) \
  DI_PROTO_ASSIGN_IMPL(DI_PROTO_CONCAT(di_proto_result_, __LINE__), lhs, expr)
#define DI_PROTO_ASSIGN_IMPL(result, lhs, expr) \
  auto result = (expr);                         \
  if (!result.is_ok()) return result.status();  \
  lhs = std::move(result).value()
