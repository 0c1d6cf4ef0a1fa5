// One client connection of the HTTP server (internal to http/*.cc; includes Beast). Reads a
// request (headers first, so an oversized body is refused before it is uploaded), hands it to the
// handler, writes the response the handler sends through its Responder (whole, or chunked for
// SSE), then reads the next request (keep-alive). Invariant: every member is touched only on the
// connection's strand; Responder calls from other threads are posted onto it.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "http/http_server.h"

namespace deepinfer::server::http_detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

class Connection;

// What every connection shares with the server object.
struct ServerShared {
  HttpServerOptions options;
  HttpHandler handler;
  HttpErrorBody error_body;
  std::atomic<bool> draining{false};  // no more keep-alive; idle connections close

  std::mutex mu;
  std::unordered_map<const Connection*, std::weak_ptr<Connection>> connections;
};

class ResponderImpl;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<ServerShared> shared);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start();
  // Thread-safe: close now if waiting for a request (busy ones close after their response).
  void close_if_idle();
  // Thread-safe: close now; an unfinished response's client counts as disconnected.
  void close_now();

 private:
  friend class ResponderImpl;

  void read_header();
  void on_header(beast::error_code ec);
  void read_body();
  void on_read_error(beast::error_code ec);
  void dispatch();
  void call_handler(HttpRequest request);
  void watch_peer();
  void on_peer_event(beast::error_code ec);
  void reply_error(int status, const std::string& message);

  // Responder operations, on the strand; `seq` identifies the request they belong to.
  void respond(uint64_t seq, HttpResponse response);
  void stream_head(uint64_t seq, HttpResponse head);
  void stream_chunk(uint64_t seq, std::string data);
  void stream_end(uint64_t seq);
  bool is_current(uint64_t seq, int phase) const;

  void queue_write(std::string bytes);
  void write_next();
  void on_write(beast::error_code ec);
  void response_complete();
  void drop();
  void graceful_close();
  void linger(std::shared_ptr<std::string> scratch);
  std::string head_bytes(const HttpResponse& response, bool chunked) const;

  beast::tcp_stream stream_;
  std::shared_ptr<ServerShared> shared_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<ResponderImpl> responder_;  // of the request being handled
  uint64_t seq_ = 0;                          // requests read on this connection
  std::deque<std::string> out_;               // bytes waiting for the socket
  std::string writing_;                       // bytes of the write in flight
  bool writing_now_ = false;
  bool complete_after_write_ = false;  // the response's last bytes are queued
  bool keep_alive_ = true;
  bool handling_ = false;  // between dispatch and the end of the response
  bool watching_ = false;
  bool closed_ = false;
};

}  // namespace deepinfer::server::http_detail
