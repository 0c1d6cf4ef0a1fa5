// Status helpers for the engine internals: builders that format messages and the
// DI_RETURN_IF_ERROR / DI_ASSIGN_OR_RETURN propagation macros.
#pragma once

#include <fmt/format.h>

#include "deepinfer/status.h"

namespace deepinfer {

template <typename... Args>
Status make_status(StatusCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> f, Args&&... args) {
  return make_status(StatusCode::kInvalidArgument, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status not_found(fmt::format_string<Args...> f, Args&&... args) {
  return make_status(StatusCode::kNotFound, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status data_loss(fmt::format_string<Args...> f, Args&&... args) {
  return make_status(StatusCode::kDataLoss, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status out_of_range(fmt::format_string<Args...> f, Args&&... args) {
  return make_status(StatusCode::kOutOfRange, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status unimplemented(fmt::format_string<Args...> f, Args&&... args) {
  return make_status(StatusCode::kUnimplemented, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status failed_precondition(fmt::format_string<Args...> f, Args&&... args) {
  return make_status(StatusCode::kFailedPrecondition, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status resource_exhausted(fmt::format_string<Args...> f, Args&&... args) {
  return make_status(StatusCode::kResourceExhausted, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status internal_error(fmt::format_string<Args...> f, Args&&... args) {
  return make_status(StatusCode::kInternal, f, std::forward<Args>(args)...);
}

}  // namespace deepinfer

#define DI_STATUS_CONCAT_INNER(a, b) a##b
#define DI_STATUS_CONCAT(a, b) DI_STATUS_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is an error.
#define DI_RETURN_IF_ERROR(expr)                             \
  do {                                                       \
    ::deepinfer::Status di_status_ = (expr);                 \
    if (!di_status_.is_ok()) return di_status_;             \
  } while (0)

// `DI_ASSIGN_OR_RETURN(auto x, f())`: unwraps a Result or returns its Status.
#define DI_ASSIGN_OR_RETURN(lhs, expr) \
  DI_ASSIGN_OR_RETURN_IMPL(DI_STATUS_CONCAT(di_result_, __LINE__), lhs, expr)
#define DI_ASSIGN_OR_RETURN_IMPL(result, lhs, expr) \
  auto result = (expr);                             \
  if (!result.is_ok()) return result.status();      \
  lhs = std::move(result).value()
