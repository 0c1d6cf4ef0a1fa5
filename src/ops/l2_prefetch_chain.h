// L2PrefetchChain: which weights a decode GEMM launch should prefetch into the L2 for the launches
// that follow it — plain data, so the policy is tested without a GPU.
//
// Why: a batch-1 decode step reads ~1 GB of weights once each, but most of its launches are latency
// bound (norms, attention, mHC, routing, the small projections' prologues and folds), so the HBM
// idles for most of the step (the step runs at ~52% of the copy bandwidth). A launch knows nothing
// of what comes next; the order of a forward's weight launches, though, is the same every step. The
// chain learns it from the launches themselves (each launch's successor in the previous pass), and
// each small-M launch then issues bulk L2 prefetches (cp.async.bulk.prefetch.L2) of the next
// `budget` bytes of weights before it waits for its predecessor, so the HBM works during the
// latency-bound stretches and the next projections read from the L2. A prefetch is a hint: results
// never depend on it, and a stale chain only wastes bandwidth.
//
// Rules:
//   * A launch's window starts at its successor's first weight byte and ends `budget` bytes later
//     (weights counted in the order the launches read them); bytes an earlier launch of the chain
//     already prefetched are not issued again (one cursor, carried from launch to launch while each
//     is the recorded successor of the one before; a launch out of order starts afresh).
//   * A barrier (an expert launch: which weights it streams is known only on the device) ends every
//     window before it: what it streams would evict what was prefetched across it. Its own window
//     starts after it.
//   * At most kMaxSpans pieces per launch (kernel parameters); pieces are 16-byte aligned and sized
//     (the bulk prefetch's rule): unaligned weights are skipped, sizes rounded down.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace deepinfer::ops {

class L2PrefetchChain {
 public:
  struct Span {
    const uint8_t* ptr = nullptr;
    int64_t bytes = 0;
  };
  static constexpr int kMaxSpans = 4;
  struct Plan {
    Span spans[kMaxSpans];
    int n = 0;
    int64_t bytes() const;
  };

  // budget: bytes each launch keeps prefetched ahead of itself (0: the chain plans nothing).
  // max_entries: launches remembered (when more keys appear the chain starts over: a backend
  // whose weights move must not grow it without bound).
  explicit L2PrefetchChain(int64_t budget, size_t max_entries = 8192)
      : budget_(budget / 16 * 16), max_entries_(max_entries) {}

  // One launch, in issue order: `key` identifies it from pass to pass (its first weight's address),
  // `reads` are the weight bytes it streams (empty with barrier). Returns what it should prefetch.
  Plan on_launch(const void* key, std::span<const Span> reads, bool barrier = false);
  // Forgets the previous launch: the next one starts a window afresh (its links are kept).
  void break_sequence() { prev_ = nullptr; }
  int64_t budget() const { return budget_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<Span> reads;  // 16-byte aligned pointers, sizes multiples of 16
    bool barrier = false;
    const void* next = nullptr;  // the launch that followed it last time
  };
  static int64_t bytes_of(const Entry& e);
  int64_t budget_;
  size_t max_entries_;
  std::unordered_map<const void*, Entry> entries_;
  const void* prev_ = nullptr;
  // Bytes prefetched so far past the start of the previous launch's window (its successor's
  // first weight byte).
  int64_t ahead_ = 0;
};

}  // namespace deepinfer::ops
