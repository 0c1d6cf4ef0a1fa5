// HTTP-stack measurement, Boost.Beast side: the same SSE workload as sse_httplib_proto.cc (one
// event per tick into every stream), served asynchronously by a fixed number of io threads; each
// stream also waits for readability so a client that goes away is noticed while idle. Not part of
// the product; see README.md.
#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Session;

class Clock {
 public:
  explicit Clock(int tick_ms) : tick_ms_(tick_ms) {}
  void start() { thread_ = std::thread([this] { run(); }); }
  void add(const std::shared_ptr<Session>& s) {
    std::lock_guard lock(mu_);
    sessions_.push_back(s);
  }

 private:
  void run();
  int tick_ms_;
  std::mutex mu_;
  std::list<std::weak_ptr<Session>> sessions_;
  std::thread thread_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Clock* clock, int n_events)
      : stream_(std::move(socket)), clock_(clock), n_events_(n_events) {}

  void start() {
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  // Called from the clock thread.
  void push(std::string frame) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), f = std::move(frame)]() mutable {
      if (self->closed_) return;
      self->queue_.push_back(std::move(f));
      if (!self->writing_) self->write_next();
    });
  }

 private:
  void on_read(beast::error_code ec) {
    if (ec) return;
    response_.result(http::status::ok);
    response_.version(11);
    response_.set(http::field::content_type, "text/event-stream");
    response_.chunked(true);
    serializer_.emplace(response_);
    writing_ = true;
    http::async_write_header(stream_, *serializer_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) { self->closed_ = true; return; }
      self->clock_->add(self);
      self->watch_peer();
    });
  }

  // The client sends nothing more on this connection; readability means it closed (or reset).
  void watch_peer() {
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code) {
      self->closed_ = true;
      beast::error_code ignored;
      self->stream_.socket().close(ignored);
    });
  }

  void write_next() {
    out_.clear();
    while (!queue_.empty() && sent_ < n_events_) {
      out_ += queue_.front();
      queue_.pop_front();
      ++sent_;
    }
    if (sent_ >= n_events_) out_ += "data: [DONE]\n\n";
    writing_ = true;
    asio::async_write(stream_, http::make_chunk(asio::buffer(out_)),
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (ec) { closed_ = true; return; }
    if (sent_ >= n_events_) {
      closed_ = true;
      writing_ = true;
      asio::async_write(stream_, http::make_chunk_last(), [self = shared_from_this()](beast::error_code, size_t) {
        beast::error_code ignored;
        self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      });
      return;
    }
    if (!queue_.empty()) write_next();
  }

  beast::tcp_stream stream_;
  Clock* clock_;
  int n_events_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::empty_body> response_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
  std::deque<std::string> queue_;
  std::string out_;
  bool writing_ = false;
  bool closed_ = false;
  int sent_ = 0;
};

void Clock::run() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(tick_ms_));
    std::lock_guard lock(mu_);
    int64_t t = now_ns();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      auto s = it->lock();
      if (!s) { it = sessions_.erase(it); continue; }
      s->push("data: {\"t\":" + std::to_string(t) +
              ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok\"}}]}\n\n");
      ++it;
    }
  }
}

void accept_loop(tcp::acceptor& acceptor, asio::io_context& ioc, Clock* clock, int n_events) {
  acceptor.async_accept(asio::make_strand(ioc), [&, clock, n_events](beast::error_code ec, tcp::socket socket) {
    if (!ec) std::make_shared<Session>(std::move(socket), clock, n_events)->start();
    accept_loop(acceptor, ioc, clock, n_events);
  });
}

}  // namespace

int main(int argc, char** argv) {
  int port = argc > 1 ? std::atoi(argv[1]) : 18081;
  int tick_ms = argc > 2 ? std::atoi(argv[2]) : 20;
  int n_events = argc > 3 ? std::atoi(argv[3]) : 100;
  int n_threads = argc > 4 ? std::atoi(argv[4]) : 2;
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc);
  tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port));
  acceptor.open(endpoint.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(4096);
  Clock clock(tick_ms);
  clock.start();
  accept_loop(acceptor, ioc, &clock, n_events);
  std::fprintf(stderr, "beast proto on %d with %d io threads\n", port, n_threads);
  std::vector<std::thread> threads;
  for (int i = 1; i < n_threads; ++i) threads.emplace_back([&] { ioc.run(); });
  ioc.run();
}
