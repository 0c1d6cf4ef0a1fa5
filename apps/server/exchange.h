// One HTTP request and its response, as routes see it: the request, its id (x-request-id from the
// client or generated; echoed in the response and in every log line), the error format of its
// API, helpers to answer with JSON / an error / an SSE stream, and the access-log line written
// once the response is complete. Thread-safe where the Responder is; routes call it from the io
// thread that received the request and, for generations, from the io threads that drain events.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "api_error.h"
#include "http/http_server.h"
#include "server_context.h"

namespace deepinfer::server {

class Exchange {
 public:
  Exchange(ServerContext& ctx, HttpRequest request, std::shared_ptr<Responder> responder,
           std::string endpoint);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  ServerContext& ctx;
  const HttpRequest& request() const { return request_; }
  Responder& responder() { return *responder_; }
  const std::string& id() const { return id_; }
  ApiFormat format() const { return format_; }
  std::chrono::steady_clock::time_point start_time() const { return start_; }

  void reply_json(int status, const protocol::Json& body);
  void reply(HttpResponse response);
  void reply_error(const ApiError& error);
  // 200 text/event-stream; then write() frames and end_stream().
  void start_sse();
  void write(std::string frames);
  void end_stream();

  // Extra access-log fields (JSON members), e.g. tokens and finish reason.
  void annotate(const std::string& key, const protocol::Json& value);

 private:
  void complete(int status);
  // CORS headers for a browser client whose Origin the server allows (ServerOptions::allowed_origins).
  void add_cors_headers(HeaderList& headers) const;

  HttpRequest request_;
  std::shared_ptr<Responder> responder_;
  std::string endpoint_;
  std::string id_;
  ApiFormat format_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  protocol::Json log_fields_ = protocol::Json::object();
  int status_ = 0;
  bool logged_ = false;
};

}  // namespace deepinfer::server
