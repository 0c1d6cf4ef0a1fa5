// The CUDA launchers' tuning knobs and A/B switches, read from the environment by each caller once
// (into a function-local static). Plain C++: engine_options.cc lists every name, so a misspelt one
// warns. Every knob is numerically neutral.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace deepinfer::kernels {

// On unless the variable is "0".
inline bool env_switch(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

// A positive integer; `fallback` when unset, not positive, or not one of `allowed` (when given).
inline int env_int(const char* name, int fallback, std::initializer_list<int> allowed = {}) {
  const char* v = std::getenv(name);
  const int n = v != nullptr ? std::atoi(v) : 0;
  if (n <= 0) return fallback;
  if (allowed.size() != 0 && std::find(allowed.begin(), allowed.end(), n) == allowed.end()) return fallback;
  return n;
}

// A three-way setting: 0 or 1 when the variable is exactly "0" or "1", else -1 (unset or
// anything else: the caller's automatic choice).
inline int env_tristate(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return -1;
  return std::strcmp(v, "0") == 0 ? 0 : std::strcmp(v, "1") == 0 ? 1 : -1;
}

}  // namespace deepinfer::kernels
