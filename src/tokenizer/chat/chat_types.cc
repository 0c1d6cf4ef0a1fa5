// Name tables of the public chat API: roles, families, finish reasons and the V4.1 reasoning
// effort names.
#include <fmt/format.h>

#include "base/status.h"
#include "deepinfer/chat.h"

namespace deepinfer::chat {
namespace {

constexpr EffortName kV41EffortNames[] = {{"low", 50}, {"high", 75}, {"max", 100}};
constexpr int kV41DefaultEffort = 75;  // DeepSeek's default level "high"

}  // namespace

const char* role_name(Role role) {
  switch (role) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
    case Role::kTool: return "tool";
    case Role::kLatestReminder: return "latest_reminder";
    case Role::kDeveloper: return "developer";
  }
  return "unknown";
}

std::optional<Role> role_from_name(std::string_view name) {
  for (Role role : {Role::kSystem, Role::kUser, Role::kAssistant, Role::kTool,
                    Role::kLatestReminder, Role::kDeveloper}) {
    if (name == role_name(role)) return role;
  }
  return std::nullopt;
}

const char* family_name(ModelFamily family) { return family == ModelFamily::kV41 ? "v41" : "v4"; }

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kToolCalls: return "tool_calls";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

std::span<const EffortName> v41_effort_names() { return kV41EffortNames; }

Result<int> v41_effort_level(const ReasoningEffort& effort) {
  if (effort.level != 0) {
    if (effort.level < 1 || effort.level > 100) {
      return invalid_argument("reasoning_effort: {} is outside 1..100", effort.level);
    }
    return effort.level;
  }
  if (effort.name.empty()) return kV41DefaultEffort;
  for (const EffortName& entry : kV41EffortNames) {
    if (effort.name == entry.name) return entry.level;
  }
  return invalid_argument("reasoning_effort: unknown name \"{}\" (V4.1 accepts low, high, max or "
                          "an integer 1..100)", effort.name);
}

}  // namespace deepinfer::chat
