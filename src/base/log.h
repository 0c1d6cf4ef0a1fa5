// Minimal leveled logging to stderr. The level is read once from DEEPINFER_LOG_LEVEL
// (debug|info|warn|error) by the engine options, and set here with set_log_level.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace deepinfer {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
// Parses "debug|info|warn|error|off"; returns false on anything else.
bool parse_log_level(std::string_view text, LogLevel* level);
void log_line(LogLevel level, std::string_view message);

template <typename... Args>
void log_at(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level < log_level()) return;
  log_line(level, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  log_at(LogLevel::kDebug, f, std::forward<Args>(args)...);
}
template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  log_at(LogLevel::kInfo, f, std::forward<Args>(args)...);
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  log_at(LogLevel::kWarn, f, std::forward<Args>(args)...);
}
template <typename... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
  log_at(LogLevel::kError, f, std::forward<Args>(args)...);
}

}  // namespace deepinfer
