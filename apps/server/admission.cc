// Admission bound and tickets (see admission.h).
#include "admission.h"

namespace deepinfer::server {

Ticket& Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    other.owner_ = nullptr;
  }
  return *this;
}

void Ticket::release() {
  if (owner_ == nullptr) return;
  owner_->release();
  owner_ = nullptr;
}

Ticket Admission::try_admit() {
  std::lock_guard lock(mu_);
  if (closed_ || in_flight_ >= limit_) return Ticket();
  ++in_flight_;
  return Ticket(this);
}

void Admission::release() {
  std::lock_guard lock(mu_);
  --in_flight_;
  if (in_flight_ == 0) idle_.notify_all();
}

void Admission::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
}

bool Admission::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

bool Admission::wait_idle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return idle_.wait_until(lock, deadline, [this] { return in_flight_ == 0; });
}

int64_t Admission::in_flight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

}  // namespace deepinfer::server
