#include "test_models.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "base/file.h"
#include "loader/synthetic.h"

namespace deepinfer::testing {

std::string synthetic_model_dir(const std::string& config, uint64_t seed) {
  namespace fs = std::filesystem;
  const char* bin = std::getenv("DEEPINFER_TEST_MODELS_DIR");
  const fs::path root = bin != nullptr ? fs::path(bin) : fs::path(DI_BINARY_DIR) / "test_models";
  fs::create_directories(root);
  const fs::path dir = root / (config + "-seed" + std::to_string(seed));
  const FileLock lock((root / (config + ".lock")).string());
  if (!lock.held()) throw std::runtime_error("cannot lock test model dir");
  if (!file_exists((dir / "deepinfer_synthetic.json").string())) {
    auto cfg = loader::named_test_config(config);
    if (!cfg.is_ok()) throw std::runtime_error(cfg.status().to_string());
    const fs::path tmp = dir.string() + ".partial";
    fs::remove_all(tmp);
    loader::SyntheticOptions options;
    options.seed = seed;
    const Status s = loader::write_synthetic_checkpoint(*cfg, tmp.string(), options);
    if (!s.is_ok()) throw std::runtime_error(s.to_string());
    fs::remove_all(dir);
    fs::rename(tmp, dir);
  }
  return dir.string();
}

std::string fixture_path(const std::string& name) {
  // DEEPINFER_SOURCE_DIR: where the tree lives when test binaries run elsewhere (the GPU machine).
  const char* src = std::getenv("DEEPINFER_SOURCE_DIR");
  return (std::filesystem::path(src != nullptr ? src : DI_SOURCE_DIR) / "tests" / "fixtures" / name).string();
}

std::string run_command(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

}  // namespace deepinfer::testing
