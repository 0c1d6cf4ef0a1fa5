// Helpers for end-to-end tests: the tiny-v4f model (the demo model's exact bytes), a cache dir
// whose demo model is that same checkpoint (so the no-argument demo path runs without generating
// a second 150 MB copy), and running a shell command capturing output and exit status.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "test_models.h"

namespace deepinfer::testing {

// The tiny-v4f checkpoint, generated once per build tree.
inline std::string tiny_model_dir() { return synthetic_model_dir("tiny-v4f"); }

// A DEEPINFER_CACHE_DIR whose models/demo-tiny-v4f-seed0 links to tiny_model_dir() (the demo
// model is tiny-v4f with seed 0 and default sharding, byte for byte).
inline std::string demo_cache_dir() {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(DI_BINARY_DIR) / "test_cache" / "demo";
  const fs::path link = root / "models" / "demo-tiny-v4f-seed0";
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (!fs::exists(link / "config.json")) {
    fs::remove(link, ec);
    fs::create_directory_symlink(tiny_model_dir(), link, ec);
  }
  return root.string();
}

struct CommandResult {
  int status = -1;
  std::string out;  // stdout (and stderr when merged)
};

// Runs `command` with /bin/sh; `merge_stderr` appends 2>&1.
inline CommandResult run_shell(const std::string& command, bool merge_stderr = false) {
  CommandResult r;
  FILE* p = popen((command + (merge_stderr ? " 2>&1" : "")).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::path(DI_BINARY_DIR) / "test_cache" / "tmp";
  std::filesystem::create_directories(dir);
  return (dir / (std::to_string(::getpid()) + "-" + name)).string();
}

}  // namespace deepinfer::testing
