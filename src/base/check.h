// DI_CHECK: invariants whose failure is a programmer error (abort with file:line and a message).
// DI_DCHECK is compiled out in release builds; use it on per-element hot paths only.
#pragma once

#include <fmt/format.h>

#include <source_location>
#include <string>

namespace deepinfer::detail {
[[noreturn]] void check_failed(const char* expr, const std::string& message,
                               const std::source_location& loc);

inline std::string check_message() { return ""; }
#ifdef __CUDACC__
// nvcc's front end cannot evaluate fmt's consteval format-string checks; CUDA translation units
// format at run time (host translation units still check every DI_CHECK message at compile time).
template <typename... Args>
std::string check_message(const char* f, Args&&... args) {
  return ::fmt::format(::fmt::runtime(f), std::forward<Args>(args)...);
}
#else
template <typename... Args>
std::string check_message(::fmt::format_string<Args...> f, Args&&... args) {
  return ::fmt::format(f, std::forward<Args>(args)...);
}
#endif
}  // namespace deepinfer::detail

#define DI_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) [[unlikely]] {                                                              \
      ::deepinfer::detail::check_failed(#cond, ::deepinfer::detail::check_message(__VA_ARGS__), \
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
