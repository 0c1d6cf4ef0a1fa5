// DI_CHECK: invariants whose failure is a programmer error (abort with file:line and a message).
// DI_DCHECK is compiled out in release builds; use it on per-element hot paths only.
#pragma once

#include <fmt/format.h>

#include <source_location>
#include <string>

namespace deepinfer::detail {
[[noreturn]] void check_failed(const char* expr, const std::string& message,
                               const std::source_location& loc);
}  // namespace deepinfer::detail

#define DI_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) [[unlikely]] {                                                              \
      ::deepinfer::detail::check_failed(#cond, ::fmt::format("" __VA_ARGS__),                \
                                        std::source_location::current());                   \
    }                                                                                        \
  } while (0)

#ifdef NDEBUG
#define DI_DCHECK(cond, ...) \
  do {                       \
  } while (0)
#else
#define DI_DCHECK(cond, ...) DI_CHECK(cond, __VA_ARGS__)
#endif
