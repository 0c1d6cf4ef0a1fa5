// HTTP/1.1 server for `deepinfer serve` on Boost.Beast/Asio (the stack choice and its measurement:
// bench/results/server_http_stack.json). This header is Boost-free so only http/*.cc pay Beast's
// compile time. A fixed pool of io threads runs every connection and every handler; handlers must
// not block (they submit work and reply later through their Responder from any thread).
// Framing (Content-Length / chunked), keep-alive, Expect: 100-continue, body and header limits,
// idle/write timeouts and client-disconnect detection live here; routes and JSON do not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query as sent
  std::string path;    // target without the query
  HeaderList headers;  // names lower-cased
  std::string body;
  std::string remote;  // "ip:port" of the client

  // The first header with this (lower-case) name, or nullptr.
  const std::string* header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HeaderList headers;  // extra headers (x-request-id, retry-after, ...)
  std::string body;
};

// The reply channel of one request. Every method is thread-safe and non-blocking (it queues work
// on the connection). Exactly one of send() or start_stream() takes effect; later calls are
// ignored, as is everything after the client went away.
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void send(HttpResponse response) = 0;
  // Sends the status and headers now, with chunked transfer encoding; `head.body` is ignored.
  virtual void start_stream(HttpResponse head) = 0;
  virtual void write(std::string chunk) = 0;
  virtual void end_stream() = 0;
  // `fn` runs once, on an io thread, if the client disconnects (or a write times out) before the
  // response is complete; at once if that already happened. Not called after a complete response.
  virtual void on_disconnect(std::function<void()> fn) = 0;
  virtual bool is_disconnected() const = 0;
};

using HttpHandler = std::function<void(HttpRequest request, std::shared_ptr<Responder> responder)>;
// Builds the body of an error the HTTP layer answers by itself (413, 431, 400 for malformed HTTP),
// in the format of the API the path belongs to.
using HttpErrorBody = std::function<HttpResponse(int status, const std::string& message,
                                                 const std::string& path)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                    // 0: an ephemeral port (see HttpServer::port)
  int n_threads = 0;                  // io threads; 0: max(2, hardware threads)
  size_t max_body_bytes = 32u << 20;  // larger bodies get 413 without being read
  size_t max_header_bytes = 64u << 10;
  int idle_timeout_s = 60;            // waiting for (the rest of) a request
  int write_timeout_s = 60;           // a client that stops reading is dropped after this
  int backlog = 4096;
};

class HttpServer {
 public:
  // Binds, listens and starts the io threads. Errors name the address.
  static Result<std::unique_ptr<HttpServer>> start(const HttpServerOptions& options, HttpHandler handler,
                                                   HttpErrorBody error_body);
  virtual ~HttpServer() = default;

  virtual int port() const = 0;
  // Runs `fn` on an io thread.
  virtual void post(std::function<void()> fn) = 0;
  // Stops accepting; idle keep-alive connections close now, busy ones after their response.
  virtual void stop_accepting() = 0;
  // Closes every connection at once (after draining, or when the drain timed out).
  virtual void close_all() = 0;
  virtual size_t n_connections() const = 0;
  // Stops the io threads (after stop_accepting/close_all); idempotent.
  virtual void stop() = 0;
};

}  // namespace deepinfer::server
