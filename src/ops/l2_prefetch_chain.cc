#include "ops/l2_prefetch_chain.h"

#include <algorithm>

namespace deepinfer::ops {

int64_t L2PrefetchChain::Plan::bytes() const {
  int64_t total = 0;
  for (int i = 0; i < n; ++i) total += spans[i].bytes;
  return total;
}

int64_t L2PrefetchChain::bytes_of(const Entry& e) {
  int64_t total = 0;
  for (const Span& s : e.reads) total += s.bytes;
  return total;
}

L2PrefetchChain::Plan L2PrefetchChain::on_launch(const void* key, std::span<const Span> reads,
                                                 bool barrier) {
  Plan plan;
  if (budget_ <= 0 || key == nullptr) return plan;
  if (entries_.size() >= max_entries_ && entries_.find(key) == entries_.end()) {
    entries_.clear();  // keys keep changing: start over rather than grow
    prev_ = nullptr;
  }
  Entry& self = entries_[key];
  self.reads.clear();
  if (!barrier) {
    for (const Span& s : reads) {
      const int64_t b = s.bytes / 16 * 16;
      if (s.ptr != nullptr && b > 0 && reinterpret_cast<uintptr_t>(s.ptr) % 16 == 0)
        self.reads.push_back({s.ptr, b});
    }
  }
  self.barrier = barrier;

  // What the launches before already prefetched of this launch's window: the previous launch's
  // window started at this launch's first byte when this launch is its recorded successor.
  int64_t covered = 0;
  if (prev_ != nullptr) {
    Entry& before = entries_[prev_];
    if (before.next == key) covered = std::max<int64_t>(0, ahead_ - bytes_of(self));
    before.next = key;
  }
  prev_ = key;

  // Walk the recorded successors: the window [covered, budget) of the bytes they read.
  int64_t at = 0;  // distance of the current span's first byte from the window's start
  int64_t reached = covered;
  const void* node = self.next;
  for (int hops = 0;
       node != nullptr && node != key && at < budget_ && plan.n < kMaxSpans && hops < 64; ++hops) {
    const auto it = entries_.find(node);
    if (it == entries_.end() || it->second.barrier) break;
    for (const Span& s : it->second.reads) {
      const int64_t lo = std::max(at, covered), hi = std::min(at + s.bytes, budget_);
      if (lo < hi) {
        if (plan.n == kMaxSpans) break;
        plan.spans[plan.n++] = {s.ptr + (lo - at), hi - lo};
        reached = hi;
      }
      at += s.bytes;
      if (at >= budget_) break;
    }
    node = it->second.next;
  }
  ahead_ = reached;
  return plan;
}

}  // namespace deepinfer::ops
