// HTTP-stack measurement, cpp-httplib side: an SSE server whose "token clock" pushes one event
// every tick into every open stream through a per-stream queue (the shape the real server uses:
// engine thread -> queue -> connection thread). One thread per connection (an elastic pool, since
// the library's fixed pool would queue the 65th stream). Not part of the product; see README.md.
#include <httplib.h>
#include <pthread.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> frames;
};

// Ticks every `tick_ms`, appending one ~120-byte event to every registered channel.
class Clock {
 public:
  explicit Clock(int tick_ms) : tick_ms_(tick_ms), thread_([this] { run(); }) {}
  void add(const std::shared_ptr<Channel>& ch) {
    std::lock_guard lock(mu_);
    channels_.push_back(ch);
  }

 private:
  void run() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(tick_ms_));
      std::lock_guard lock(mu_);
      int64_t t = now_ns();
      for (auto it = channels_.begin(); it != channels_.end();) {
        auto ch = it->lock();
        if (!ch) { it = channels_.erase(it); continue; }
        {
          std::lock_guard l(ch->mu);
          ch->frames.push_back("data: {\"t\":" + std::to_string(t) +
                               ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok\"}}]}\n\n");
        }
        ch->cv.notify_one();
        ++it;
      }
    }
  }
  int tick_ms_;
  std::mutex mu_;
  std::list<std::weak_ptr<Channel>> channels_;
  std::thread thread_;
};

// A pool that starts a thread whenever no idle one is waiting (256 KiB stacks).
class ElasticPool : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mu_);
    jobs_.push_back(std::move(fn));
    if (n_idle_ > 0) { cv_.notify_one(); return; }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t t;
    pthread_create(&t, &attr, [](void* self) -> void* { static_cast<ElasticPool*>(self)->work(); return nullptr; }, this);
    pthread_detach(t);
    pthread_attr_destroy(&attr);
  }
  void shutdown() override {}

 private:
  void work() {
    std::unique_lock lock(mu_);
    for (;;) {
      while (jobs_.empty()) { ++n_idle_; cv_.wait(lock); --n_idle_; }
      auto fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  int n_idle_ = 0;
};

class Server : public httplib::Server {
 public:
  // The packaged library listens with a backlog of 5; Linux accepts a second listen() call on a
  // listening socket to raise it.
  void raise_backlog() { ::listen(svr_sock_, 4096); }
};

}  // namespace

int main(int argc, char** argv) {
  int port = argc > 1 ? std::atoi(argv[1]) : 18080;
  int tick_ms = argc > 2 ? std::atoi(argv[2]) : 20;
  int n_events = argc > 3 ? std::atoi(argv[3]) : 100;
  Clock clock(tick_ms);
  Server server;
  server.new_task_queue = [] { return new ElasticPool(); };
  server.Post("/stream", [&](const httplib::Request&, httplib::Response& res) {
    auto ch = std::make_shared<Channel>();
    clock.add(ch);
    auto sent = std::make_shared<int>(0);
    res.set_chunked_content_provider("text/event-stream", [ch, sent, n_events](size_t, httplib::DataSink& sink) {
      std::string out;
      {
        std::unique_lock lock(ch->mu);
        ch->cv.wait(lock, [&] { return !ch->frames.empty(); });
        while (!ch->frames.empty() && *sent < n_events) {
          out += ch->frames.front();
          ch->frames.pop_front();
          ++*sent;
        }
      }
      if (!sink.write(out.data(), out.size())) return false;
      if (*sent >= n_events) {
        static const std::string kDone = "data: [DONE]\n\n";
        sink.write(kDone.data(), kDone.size());
        sink.done();
      }
      return true;
    });
  });
  if (!server.bind_to_port("127.0.0.1", port)) { std::perror("bind"); return 1; }
  server.raise_backlog();
  std::fprintf(stderr, "httplib proto on %d\n", port);
  server.listen_after_bind();
}
