#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

namespace deepinfer {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::mutex g_mu;  // one line at a time, so concurrent requests never interleave characters
const char* level_tag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarn: return "W";
    case LogLevel::kError: return "E";
    case LogLevel::kOff: return "-";
  }
  return "?";
}
}  // namespace

void set_log_level(LogLevel level) { g_level.store(level); }
LogLevel log_level() { return g_level.load(std::memory_order_relaxed); }

bool parse_log_level(std::string_view text, LogLevel* level) {
  if (text == "debug") *level = LogLevel::kDebug;
  else if (text == "info") *level = LogLevel::kInfo;
  else if (text == "warn" || text == "warning") *level = LogLevel::kWarn;
  else if (text == "error") *level = LogLevel::kError;
  else if (text == "off") *level = LogLevel::kOff;
  else return false;
  return true;
}

void log_line(LogLevel level, std::string_view message) {
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "[%s %lld.%03lld] %.*s\n", level_tag(level), static_cast<long long>(ms / 1000),
               static_cast<long long>(ms % 1000), static_cast<int>(message.size()), message.data());
}

}  // namespace deepinfer
