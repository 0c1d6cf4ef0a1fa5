// ServerContext: model names, the generation registry and the log sink (see server_context.h).
#include "server_context.h"

#include <cstdio>

#include "generation.h"

namespace deepinfer::server {
namespace {

constexpr int64_t kDefaultMaxInFlight = 4096;

std::string directory_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

ServerContext::ServerContext(Engine& e, ServerOptions o)
    : engine(e),
      tokenizer(e.tokenizer()),
      options(std::move(o)),
      max_model_len(e.max_model_len()),
      admission(options.max_in_flight > 0 ? options.max_in_flight : kDefaultMaxInFlight) {
  if (options.served_model_names.empty()) {
    std::string name = directory_name(e.model_dir());
    options.served_model_names.push_back(name.empty() ? "deepinfer" : name);
  }
  protocol.family = e.model_family() == "deepseek_v41" ? chat::ModelFamily::kV41 : chat::ModelFamily::kV4;
  protocol.thinking_by_default = options.thinking_by_default;
}

bool ServerContext::serves_model(const std::string& name) const {
  if (name.empty()) return true;
  for (const std::string& n : options.served_model_names) {
    if (n == name) return true;
  }
  return false;
}

void ServerContext::add_generation(const std::shared_ptr<Generation>& g) {
  std::lock_guard lock(mu_);
  generations_[g.get()] = g;
}

void ServerContext::remove_generation(const Generation* g) {
  std::lock_guard lock(mu_);
  generations_.erase(g);
}

void ServerContext::abort_all_generations() {
  std::vector<std::shared_ptr<Generation>> live;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, weak] : generations_) {
      if (auto g = weak.lock()) live.push_back(std::move(g));
    }
  }
  for (auto& g : live) g->abort();
}

size_t ServerContext::n_generations() const {
  std::lock_guard lock(mu_);
  return generations_.size();
}

void ServerContext::log_line(const std::string& line) {
  std::lock_guard lock(log_mu_);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace deepinfer::server
