// HttpServer on Asio: one io_context run by n threads, an acceptor on its own strand, and the
// registry of live connections used by stop_accepting / close_all (see http_server.h).
#include "http/http_server.h"

#include <algorithm>
#include <thread>

#include "http/connection.h"

namespace deepinfer::server {

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return &value;
  }
  return nullptr;
}

namespace http_detail {
namespace {

class AsioHttpServer : public HttpServer {
 public:
  explicit AsioHttpServer(std::shared_ptr<ServerShared> shared)
      : shared_(std::move(shared)), work_(asio::make_work_guard(ioc_)), acceptor_(asio::make_strand(ioc_)) {}

  ~AsioHttpServer() override { stop(); }

  Status listen() {
    const HttpServerOptions& o = shared_->options;
    beast::error_code ec;
    std::string host = o.host == "localhost" ? "127.0.0.1" : o.host;
    auto address = asio::ip::make_address(host, ec);
    std::string where = o.host + ":" + std::to_string(o.port);
    if (ec) return Status(StatusCode::kInvalidArgument, "--host " + o.host + ": not an IP address");
    tcp::endpoint endpoint(address, static_cast<uint16_t>(o.port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(o.backlog, ec);
    if (ec) return Status(StatusCode::kUnavailable, "cannot listen on " + where + ": " + ec.message());
    port_ = acceptor_.local_endpoint(ec).port();
    accept_next();
    int n = o.n_threads > 0 ? o.n_threads : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { ioc_.run(); });
    return Status::ok();
  }

  int port() const override { return port_; }

  void post(std::function<void()> fn) override { asio::post(ioc_, std::move(fn)); }

  void stop_accepting() override {
    shared_->draining = true;
    asio::post(acceptor_.get_executor(), [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
    });
    for (auto& c : live_connections()) c->close_if_idle();
  }

  void close_all() override {
    for (auto& c : live_connections()) c->close_now();
  }

  size_t n_connections() const override {
    std::lock_guard lock(shared_->mu);
    return shared_->connections.size();
  }

  void stop() override {
    if (stopped_) return;
    stopped_ = true;
    stop_accepting();
    close_all();
    work_.reset();
    ioc_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::vector<std::shared_ptr<Connection>> live_connections() {
    std::vector<std::shared_ptr<Connection>> out;
    std::lock_guard lock(shared_->mu);
    for (auto& [key, weak] : shared_->connections) {
      if (auto c = weak.lock()) out.push_back(std::move(c));
    }
    return out;
  }

  void accept_next() {
    acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (ec) {
        // Out of descriptors (EMFILE) and similar: back off instead of spinning.
        auto timer = std::make_shared<asio::steady_timer>(acceptor_.get_executor(), std::chrono::milliseconds(50));
        timer->async_wait([this, timer](beast::error_code) {
          if (acceptor_.is_open()) accept_next();
        });
        return;
      }
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Connection>(std::move(socket), shared_)->start();
      accept_next();
    });
  }

  std::shared_ptr<ServerShared> shared_;
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace
}  // namespace http_detail

Result<std::unique_ptr<HttpServer>> HttpServer::start(const HttpServerOptions& options, HttpHandler handler,
                                                      HttpErrorBody error_body) {
  auto shared = std::make_shared<http_detail::ServerShared>();
  shared->options = options;
  shared->handler = std::move(handler);
  shared->error_body = std::move(error_body);
  auto server = std::make_unique<http_detail::AsioHttpServer>(shared);
  Status status = server->listen();
  if (!status.is_ok()) return status;
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace deepinfer::server
