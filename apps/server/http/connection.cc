// Connection: request reading, handler dispatch, response writing and disconnect detection (see
// connection.h). Responses are written as raw HTTP/1.1 bytes (status line, headers, then either
// a Content-Length body or chunks), so one write queue serves both whole and streamed replies.
#include "http/connection.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>

namespace deepinfer::server::http_detail {
namespace {

enum Phase : int { kPhaseNone = 0, kPhaseStreaming = 1, kPhaseDone = 2 };

// After a response that closes the connection, unread request bytes are drained for this long so
// the client sees the response instead of a reset.
constexpr auto kLingerTime = std::chrono::seconds(2);

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string endpoint_text(const tcp::socket& socket) {
  beast::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

std::string hex(size_t n) {
  char buf[32];
  int len = std::snprintf(buf, sizeof(buf), "%zx", n);
  return std::string(buf, static_cast<size_t>(len));
}

}  // namespace

// The Responder handed to the handler: posts every call onto the connection's strand.
class ResponderImpl : public Responder, public std::enable_shared_from_this<ResponderImpl> {
 public:
  ResponderImpl(std::shared_ptr<Connection> conn, uint64_t seq) : conn_(std::move(conn)), seq_(seq) {}

  void send(HttpResponse response) override {
    asio::post(conn_->stream_.get_executor(), [c = conn_, s = seq_, r = std::move(response)]() mutable {
      c->respond(s, std::move(r));
    });
  }
  void start_stream(HttpResponse head) override {
    asio::post(conn_->stream_.get_executor(), [c = conn_, s = seq_, h = std::move(head)]() mutable {
      c->stream_head(s, std::move(h));
    });
  }
  void write(std::string chunk) override {
    if (chunk.empty() || disconnected_.load()) return;
    asio::post(conn_->stream_.get_executor(), [c = conn_, s = seq_, d = std::move(chunk)]() mutable {
      c->stream_chunk(s, std::move(d));
    });
  }
  void end_stream() override {
    asio::post(conn_->stream_.get_executor(), [c = conn_, s = seq_] { c->stream_end(s); });
  }
  void on_disconnect(std::function<void()> fn) override {
    asio::post(conn_->stream_.get_executor(), [self = shared_from_this(), f = std::move(fn)]() mutable {
      if (self->disconnected_.load()) {
        f();
      } else if (self->phase_ != kPhaseDone) {
        self->disconnect_fn_ = std::move(f);
      }
    });
  }
  bool is_disconnected() const override { return disconnected_.load(); }

  // Strand only.
  void notify_disconnect() {
    if (disconnected_.exchange(true)) return;
    if (disconnect_fn_) {
      auto fn = std::move(disconnect_fn_);
      disconnect_fn_ = nullptr;
      fn();
    }
  }
  void release() {
    disconnect_fn_ = nullptr;
    conn_.reset();  // breaks the connection <-> responder cycle; later calls are dropped
  }
  int phase_ = kPhaseNone;  // strand only

 private:
  std::shared_ptr<Connection> conn_;
  uint64_t seq_;
  std::atomic<bool> disconnected_{false};
  std::function<void()> disconnect_fn_;  // strand only
};

Connection::Connection(tcp::socket socket, std::shared_ptr<ServerShared> shared)
    : stream_(std::move(socket)), shared_(std::move(shared)) {
  remote_ = endpoint_text(stream_.socket());
  // The peek in on_peer_event must never block the io thread (a stale readiness report from
  // the previous request on this connection arrives after its bytes were consumed).
  beast::error_code ignored;
  stream_.socket().non_blocking(true, ignored);
}

Connection::~Connection() {
  std::lock_guard lock(shared_->mu);
  shared_->connections.erase(this);
}

void Connection::start() {
  {
    std::lock_guard lock(shared_->mu);
    shared_->connections[this] = weak_from_this();
  }
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
}

void Connection::close_if_idle() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] {
    if (!self->handling_) self->drop();
  });
}

void Connection::close_now() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] { self->drop(); });
}

void Connection::read_header() {
  if (closed_) return;
  if (shared_->draining.load()) {
    drop();
    return;
  }
  parser_.emplace();
  parser_->body_limit(shared_->options.max_body_bytes);
  parser_->header_limit(static_cast<uint32_t>(shared_->options.max_header_bytes));
  stream_.expires_after(std::chrono::seconds(shared_->options.idle_timeout_s));
  bhttp::async_read_header(stream_, buffer_, *parser_,
                           [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void Connection::on_header(beast::error_code ec) {
  if (ec) {
    on_read_error(ec);
    return;
  }
  auto length = parser_->content_length();
  if (length && *length > shared_->options.max_body_bytes) {
    reply_error(413, "request body of " + std::to_string(*length) + " bytes exceeds the limit of " +
                         std::to_string(shared_->options.max_body_bytes) + " bytes");
    return;
  }
  const auto& req = parser_->get();
  auto expect = req.find(bhttp::field::expect);
  if (expect != req.end() && lower(expect->value()) == "100-continue") {
    auto interim = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    stream_.expires_after(std::chrono::seconds(shared_->options.write_timeout_s));
    asio::async_write(stream_, asio::buffer(*interim),
                      [self = shared_from_this(), interim](beast::error_code wec, size_t) {
                        if (wec) {
                          self->drop();
                        } else {
                          self->read_body();
                        }
                      });
    return;
  }
  read_body();
}

void Connection::read_body() {
  stream_.expires_after(std::chrono::seconds(shared_->options.idle_timeout_s));
  bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) {
      self->on_read_error(ec);
    } else {
      self->dispatch();
    }
  });
}

void Connection::on_read_error(beast::error_code ec) {
  if (ec == bhttp::error::body_limit) {
    reply_error(413, "request body exceeds the limit of " +
                         std::to_string(shared_->options.max_body_bytes) + " bytes");
  } else if (ec == bhttp::error::header_limit) {
    reply_error(431, "request headers exceed the limit of " +
                         std::to_string(shared_->options.max_header_bytes) + " bytes");
  } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
             ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    reply_error(400, "malformed HTTP request: " + ec.message());
  } else {
    drop();  // end of stream, timeout, reset: nothing to answer
  }
}

// Errors the HTTP layer answers itself; the connection closes afterwards.
void Connection::reply_error(int status, const std::string& message) {
  // The start line is stored as soon as it is parsed, even when a later header fails a limit.
  std::string path = "/";
  if (parser_ && !parser_->get().target().empty()) {
    std::string target(parser_->get().target());
    path = target.substr(0, target.find('?'));
  }
  HttpResponse response = shared_->error_body(status, message, path);
  response.status = status;
  keep_alive_ = false;
  handling_ = true;
  ++seq_;
  responder_ = std::make_shared<ResponderImpl>(shared_from_this(), seq_);
  respond(seq_, std::move(response));
}

void Connection::dispatch() {
  auto message = parser_->release();
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.path = request.target.substr(0, request.target.find('?'));
  for (const auto& field : message) {
    request.headers.emplace_back(lower(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(message.body());
  request.remote = remote_;
  keep_alive_ = message.keep_alive() && !shared_->draining.load();
  handling_ = true;
  ++seq_;
  responder_ = std::make_shared<ResponderImpl>(shared_from_this(), seq_);
  stream_.expires_never();
  watch_peer();
  call_handler(std::move(request));
}

void Connection::call_handler(HttpRequest request) {
  auto responder = responder_;
  try {
    shared_->handler(std::move(request), responder);
  } catch (const std::exception& e) {
    respond(seq_, shared_->error_body(500, std::string("internal error: ") + e.what(), "/"));
  }
}

// While a request is handled the client sends nothing; the socket turning readable means it
// closed (EOF or reset), unless it pipelined the next request (then detection stops).
void Connection::watch_peer() {
  if (watching_ || closed_ || buffer_.size() > 0) return;
  watching_ = true;
  stream_.socket().async_wait(tcp::socket::wait_read,
                              [self = shared_from_this()](beast::error_code ec) { self->on_peer_event(ec); });
}

void Connection::on_peer_event(beast::error_code ec) {
  watching_ = false;
  if (ec || closed_ || !handling_) return;
  char byte = 0;
  beast::error_code peek_ec;
  size_t n = stream_.socket().receive(asio::buffer(&byte, 1), tcp::socket::message_peek, peek_ec);
  if (peek_ec == asio::error::would_block || peek_ec == asio::error::try_again) {
    watch_peer();
  } else if (peek_ec || n == 0) {
    drop();
  }
}

bool Connection::is_current(uint64_t seq, int phase) const {
  return !closed_ && seq == seq_ && responder_ && responder_->phase_ == phase;
}

void Connection::respond(uint64_t seq, HttpResponse response) {
  if (!is_current(seq, kPhaseNone)) return;
  responder_->phase_ = kPhaseDone;
  std::string bytes = head_bytes(response, false);
  bytes += response.body;
  complete_after_write_ = true;
  queue_write(std::move(bytes));
}

void Connection::stream_head(uint64_t seq, HttpResponse head) {
  if (!is_current(seq, kPhaseNone)) return;
  responder_->phase_ = kPhaseStreaming;
  queue_write(head_bytes(head, true));
}

void Connection::stream_chunk(uint64_t seq, std::string data) {
  if (!is_current(seq, kPhaseStreaming) || data.empty()) return;
  std::string bytes = hex(data.size());
  bytes += "\r\n";
  bytes += data;
  bytes += "\r\n";
  queue_write(std::move(bytes));
}

void Connection::stream_end(uint64_t seq) {
  if (!is_current(seq, kPhaseStreaming)) return;
  responder_->phase_ = kPhaseDone;
  complete_after_write_ = true;
  queue_write("0\r\n\r\n");
}

std::string Connection::head_bytes(const HttpResponse& response, bool chunked) const {
  std::string head = "HTTP/1.1 " + std::to_string(response.status) + " ";
  head += std::string(bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(response.status))));
  head += "\r\nServer: deepinfer\r\n";
  if (!response.content_type.empty()) head += "Content-Type: " + response.content_type + "\r\n";
  for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
  if (chunked) {
    head += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
  } else if (response.status != 204) {  // (a 204 has no body and no Content-Length, RFC 9110 8.6)
    head += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  }
  head += keep_alive_ && !shared_->draining.load() ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return head;
}

void Connection::queue_write(std::string bytes) {
  out_.push_back(std::move(bytes));
  if (!writing_now_) write_next();
}

// Coalesces everything queued into one write: under load many SSE events wait behind a slow one.
void Connection::write_next() {
  writing_.clear();
  while (!out_.empty()) {
    writing_ += out_.front();
    out_.pop_front();
  }
  writing_now_ = true;
  stream_.expires_after(std::chrono::seconds(shared_->options.write_timeout_s));
  asio::async_write(stream_, asio::buffer(writing_),
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void Connection::on_write(beast::error_code ec) {
  writing_now_ = false;
  if (ec) {
    drop();
    return;
  }
  if (!out_.empty()) {
    write_next();
    return;
  }
  stream_.expires_never();
  if (complete_after_write_) {
    complete_after_write_ = false;
    response_complete();
  }
}

void Connection::response_complete() {
  handling_ = false;
  if (responder_) {
    responder_->release();
    responder_.reset();
  }
  if (!keep_alive_ || shared_->draining.load()) {
    graceful_close();
    return;
  }
  read_header();
}

// The client went away, a write failed or the server closes: tell the handler, close the socket.
void Connection::drop() {
  if (closed_) return;
  closed_ = true;
  out_.clear();
  if (responder_) {
    auto responder = std::move(responder_);
    responder->notify_disconnect();
    responder->release();
  }
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

void Connection::graceful_close() {
  if (closed_) return;
  closed_ = true;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(kLingerTime);
  linger(std::make_shared<std::string>(4096, '\0'));
}

void Connection::linger(std::shared_ptr<std::string> scratch) {
  stream_.async_read_some(asio::buffer(scratch->data(), scratch->size()),
                          [self = shared_from_this(), scratch](beast::error_code ec, size_t) {
                            if (!ec) {
                              self->linger(scratch);
                              return;
                            }
                            beast::error_code ignored;
                            self->stream_.socket().close(ignored);
                          });
}

}  // namespace deepinfer::server::http_detail
