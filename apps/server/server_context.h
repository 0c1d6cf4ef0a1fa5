// What every route shares: the engine, its tokenizer, options, metrics, admission, the io
// executor and the registry of live generations (aborted on shutdown). One per ApiServer; routes
// get a reference that outlives every request (ApiServer::shutdown waits for them).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "admission.h"
#include "deepinfer/engine.h"
#include "metrics.h"
#include "protocol/chat_request.h"
#include "server_options.h"

namespace deepinfer::server {

class Generation;

struct ServerContext {
  ServerContext(Engine& e, ServerOptions o);

  Engine& engine;
  std::shared_ptr<const Tokenizer> tokenizer;
  ServerOptions options;
  protocol::ProtocolOptions protocol;
  int32_t max_model_len = 0;
  Metrics metrics;
  Admission admission;
  // Runs a task on an io thread (set by ApiServer once the HTTP server is up).
  std::function<void(std::function<void()>)> post;
  // Open client connections (set by ApiServer).
  std::function<size_t()> n_connections;

  const std::string& model_id() const { return options.served_model_names.front(); }
  // An empty name means the default model.
  bool serves_model(const std::string& name) const;

  // Live generations, so shutdown can abort what did not drain in time.
  void add_generation(const std::shared_ptr<Generation>& g);
  void remove_generation(const Generation* g);
  void abort_all_generations();
  size_t n_generations() const;

  // Writes one line to stderr (access log, lifecycle messages); serialized.
  void log_line(const std::string& line);

 private:
  mutable std::mutex mu_;
  std::unordered_map<const Generation*, std::weak_ptr<Generation>> generations_;
  std::mutex log_mu_;
};

}  // namespace deepinfer::server
