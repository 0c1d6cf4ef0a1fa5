#include "ops/graph_cache.h"

#include <algorithm>

namespace deepinfer::ops {

GraphCache::Decision GraphCache::decide(uint64_t sig, void** graph) {
  ++step_;
  if (auto it = graphs_.find(sig); it != graphs_.end()) {
    if (it->second.graph == nullptr) return Decision::kEager;  // its recording failed
    it->second.last_use = step_;
    *graph = it->second.graph;
    return Decision::kReplay;
  }
  if (seen_.insert(sig).second) {
    if (seen_.size() > options_.max_seen) seen_ = {sig};
    return Decision::kEager;
  }
  const bool full = static_cast<int>(graphs_.size()) >= options_.max_graphs;
  if (full && last_eviction_ != 0 && step_ - last_eviction_ < static_cast<uint64_t>(options_.evict_interval)) {
    return Decision::kEager;  // throttled: recorded once the interval has passed, if seen again
  }
  return Decision::kRecord;
}

void* GraphCache::store(uint64_t sig, void* graph) {
  void* evicted = nullptr;
  if (graphs_.find(sig) == graphs_.end() && static_cast<int>(graphs_.size()) >= options_.max_graphs) {
    auto lru = std::min_element(graphs_.begin(), graphs_.end(),
                                [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
    evicted = lru->second.graph;
    graphs_.erase(lru);
    last_eviction_ = step_;
  }
  Entry& e = graphs_[sig];
  if (e.graph != nullptr && e.graph != graph) evicted = e.graph;  // re-recorded: the old one goes
  e.graph = graph;
  e.last_use = step_;
  return evicted;
}

std::vector<void*> GraphCache::clear() {
  std::vector<void*> out;
  for (auto& [sig, e] : graphs_)
    if (e.graph != nullptr) out.push_back(e.graph);
  graphs_.clear();
  return out;
}

}  // namespace deepinfer::ops
