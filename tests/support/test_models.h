// Test helpers: synthetic checkpoints generated once per build tree (shared by every test binary,
// guarded by a file lock so parallel ctest runs generate each model once) and fixture paths.
#pragma once

#include <string>

namespace deepinfer::testing {

// <build>/test_models/<config>-seed<seed>, generated on first use with the official-format writer.
std::string synthetic_model_dir(const std::string& config, uint64_t seed = 0);
// <source>/tests/fixtures/<name>
std::string fixture_path(const std::string& name);
// Output of a shell command (stdout), for tools like sha256sum.
std::string run_command(const std::string& command);

}  // namespace deepinfer::testing
