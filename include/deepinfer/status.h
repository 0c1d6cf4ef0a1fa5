// Status and Result<T>: how every DeepInfer boundary reports an expected failure.
// No exceptions cross module boundaries; the message names the object at fault
// (file and tensor, request id, schema keyword). Programmer errors use DI_CHECK instead.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace deepinfer {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // bad input from a caller: request, option, schema, config key
  kNotFound,           // missing file, tensor, model, request id
  kOutOfRange,         // a value outside its documented limits (context length, offsets)
  kDataLoss,           // corrupt or truncated file contents
  kUnimplemented,      // a feature this build or model does not support
  kResourceExhausted,  // queue full, memory budget exceeded
  kFailedPrecondition, // operation not valid in the current state
  kCancelled,          // aborted by the caller
  kUnavailable,        // transient: retry later
  kInternal,           // an invariant broke on a path that must not abort the process
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" (or "OK").
  std::string to_string() const;
  // Returns a copy whose message is "context: message" (for adding the file or tensor name).
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none. Accessing value() of an error aborts.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).is_ok()) v_ = Status(StatusCode::kInternal, "Result built from OK status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { check_ok(); return std::get<T>(v_); }
  const T& value() const& { check_ok(); return std::get<T>(v_); }
  T&& value() && { check_ok(); return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void check_ok() const;
  std::variant<T, Status> v_;
};

namespace detail {
[[noreturn]] void result_value_of_error(const Status& status);
}  // namespace detail

template <typename T>
void Result<T>::check_ok() const {
  if (!is_ok()) detail::result_value_of_error(std::get<Status>(v_));
}

}  // namespace deepinfer
