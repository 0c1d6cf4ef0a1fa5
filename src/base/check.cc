#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace deepinfer::detail {

void check_failed(const char* expr, const std::string& message, const std::source_location& loc) {
  std::fprintf(stderr, "FATAL %s:%u (%s): check failed: %s%s%s\n", loc.file_name(),
               static_cast<unsigned>(loc.line()), loc.function_name(), expr,
               message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace deepinfer::detail
