// resolve_model_dir / cache_dir (include/deepinfer/model.h): where checkpoints are found.
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "base/file.h"
#include "base/log.h"
#include "deepinfer/model.h"
#include "loader/synthetic.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

bool has_checkpoint(const fs::path& dir) {
  return file_exists((dir / "config.json").string()) &&
         (file_exists((dir / "model.safetensors.index.json").string()) ||
          file_exists((dir / "model.safetensors").string()));
}

// hub/models--org--name/snapshots/<rev>: the revision named by refs/main, else any snapshot.
std::string find_in_hf_cache(const fs::path& hub, const std::string& repo_id) {
  std::string folder = "models--";
  for (char c : repo_id) folder += (c == '/') ? std::string("--") : std::string(1, c);
  const fs::path base = hub / folder;
  std::error_code ec;
  auto ref = read_file((base / "refs" / "main").string());
  if (ref.is_ok()) {
    std::string rev = *ref;
    while (!rev.empty() && (rev.back() == '\n' || rev.back() == ' ')) rev.pop_back();
    if (has_checkpoint(base / "snapshots" / rev)) return (base / "snapshots" / rev).string();
  }
  for (const auto& entry : fs::directory_iterator(base / "snapshots", ec)) {
    if (has_checkpoint(entry.path())) return entry.path().string();
  }
  return "";
}

Result<std::string> demo_model_dir(bool v41) {
  static std::mutex mu;  // one generator at a time within the process ...
  std::lock_guard<std::mutex> lock(mu);
  const fs::path dir = fs::path(cache_dir()) / "models" / (v41 ? "demo-tiny-v41-seed0" : "demo-tiny-v4f-seed0");
  if (has_checkpoint(dir) && file_exists((dir / "deepinfer_synthetic.json").string())) return dir.string();
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);
  // ... and across processes (two CLIs or servers started at once on a fresh machine wrote the
  // same .partial folder, each removing what the other was writing): the second waits for the
  // first's model and then finds it.
  FileLock file_lock(dir.string() + ".lock");
  if (!file_lock.held()) return data_loss("cannot lock {}.lock to generate the demo model", dir.string());
  if (has_checkpoint(dir) && file_exists((dir / "deepinfer_synthetic.json").string())) return dir.string();
  log_info("generating the embedded demo model (tiny synthetic {}) into {}", v41 ? "V4.1-Flash" : "V4-Flash",
           dir.string());
  const fs::path tmp = dir.string() + ".partial";
  fs::remove_all(tmp, ec);
  DI_RETURN_IF_ERROR(loader::write_synthetic_checkpoint(v41 ? loader::tiny_v41_config() : loader::tiny_v4_flash_config(),
                                                        tmp.string(), {}));
  fs::remove_all(dir, ec);
  fs::rename(tmp, dir, ec);
  if (ec) return data_loss("cannot move the demo model into {}: {}", dir.string(), ec.message());
  return dir.string();
}

}  // namespace

std::string cache_dir() {
  if (!env("DEEPINFER_CACHE_DIR").empty()) return env("DEEPINFER_CACHE_DIR");
  if (!env("XDG_CACHE_HOME").empty()) return (fs::path(env("XDG_CACHE_HOME")) / "deepinfer").string();
  const std::string home = env("HOME").empty() ? "/tmp" : env("HOME");
  return (fs::path(home) / ".cache" / "deepinfer").string();
}

Result<std::string> resolve_model_dir(const std::string& model) {
  if (model.empty() || model == kDemoModelName) return demo_model_dir(/*v41=*/false);
  if (model == kDemoV41ModelName) return demo_model_dir(/*v41=*/true);
  std::vector<std::string> looked;
  if (is_directory(model)) {
    if (has_checkpoint(model)) return model;
    return not_found("{} is a directory but holds no config.json with model.safetensors[.index.json]", model);
  }
  looked.push_back(model + " (as a directory)");
  const std::string name = model.substr(model.find('/') == std::string::npos ? 0 : model.find('/') + 1);
  const std::string local = env("DEEPINFER_HF_MODEL_DIR");
  if (!local.empty()) {
    for (const fs::path& p : {fs::path(local), fs::path(local) / name, fs::path(local) / model}) {
      if (has_checkpoint(p)) return p.string();
      looked.push_back(p.string());
    }
  }
  if (model.find('/') != std::string::npos) {
    const std::string hf_home = !env("HF_HOME").empty() ? env("HF_HOME")
                                                         : (fs::path(env("HOME")) / ".cache" / "huggingface").string();
    const fs::path hub = !env("HF_HUB_CACHE").empty() ? fs::path(env("HF_HUB_CACHE")) : fs::path(hf_home) / "hub";
    const std::string found = find_in_hf_cache(hub, model);
    if (!found.empty()) return found;
    looked.push_back(hub.string() + " (Hugging Face cache, models--<org>--<name>/snapshots/<revision>)");
  }
  std::string where;
  for (const auto& l : looked) where += "\n  " + l;
  return not_found(
      "model '{}' was not found locally and cannot be downloaded here. Looked in:{}\n"
      "Point at a local copy with --model /path/to/checkpoint or DEEPINFER_HF_MODEL_DIR=/path, or use "
      "--model demo for the embedded tiny model.",
      model, where);
}

}  // namespace deepinfer
