// Admission control: at most `limit` generation requests in flight (queued in the engine or
// running, including their streams). Past the bound a request is refused at once with 429 and
// Retry-After instead of waiting unboundedly; on shutdown everything is refused. A Ticket is held
// by the request until its response is complete. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace deepinfer::server {

class Admission;

class Ticket {
 public:
  Ticket() = default;
  explicit Ticket(Admission* owner) : owner_(owner) {}
  Ticket(Ticket&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
  Ticket& operator=(Ticket&& other) noexcept;
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;
  ~Ticket() { release(); }
  void release();
  bool valid() const { return owner_ != nullptr; }

 private:
  Admission* owner_ = nullptr;
};

class Admission {
 public:
  explicit Admission(int64_t limit) : limit_(limit) {}

  // An invalid ticket when the bound is reached or admission is closed.
  Ticket try_admit();
  // Refuses every later request (shutdown).
  void close();
  bool closed() const;
  // Waits until nothing is in flight or the deadline passes; true when idle.
  bool wait_idle(std::chrono::steady_clock::time_point deadline);

  int64_t in_flight() const;
  int64_t limit() const { return limit_; }

 private:
  friend class Ticket;
  void release();

  const int64_t limit_;
  mutable std::mutex mu_;
  std::condition_variable idle_;
  int64_t in_flight_ = 0;
  bool closed_ = false;
};

}  // namespace deepinfer::server
