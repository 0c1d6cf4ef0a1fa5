// The `deepinfer serve` server object: an Engine (not owned) behind the OpenAI- and
// Anthropic-compatible HTTP API. start() binds and serves from io threads at once; shutdown()
// drains: it stops accepting, lets in-flight requests finish for options.shutdown_timeout_s,
// aborts what is left (its streams end with an error event), closes the connections and stops
// the threads. The engine must outlive the ApiServer; nothing here locks around generation, so
// requests reach the engine's continuous batching concurrently.
#pragma once

#include <memory>

#include "deepinfer/engine.h"
#include "http/http_server.h"
#include "server_options.h"

namespace deepinfer::server {

struct ServerContext;

class ApiServer {
 public:
  static Result<std::unique_ptr<ApiServer>> start(Engine& engine, ServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  int port() const;
  // Graceful shutdown (see above); idempotent. Returns the number of requests it had to abort.
  size_t shutdown();

  ServerContext& context();
  size_t n_connections() const;

 private:
  ApiServer();
  void handle(HttpRequest request, std::shared_ptr<Responder> responder);

  std::unique_ptr<ServerContext> ctx_;
  std::unique_ptr<HttpServer> http_;
  bool shut_down_ = false;
  size_t n_aborted_ = 0;
};

}  // namespace deepinfer::server
