// GraphCache: which prepared steps of a graph-capable backend replay a recorded graph, get
// recorded, or run eagerly — plain data, so the policy is tested without a GPU. Graphs are opaque
// handles owned by the caller (the CUDA backend stores cudaGraphExec_t); the cache says which to
// launch, which to keep and which to destroy.
//
// Policy: a signature's first sight runs eagerly (one-off shapes such as prefill chunks never pay
// for a recording), its second is recorded, later ones replay. At most max_graphs are kept, the
// least recently used dropped; once full, a recording that would evict one happens at most once
// per evict_interval prepared steps, so a workload cycling through more shapes than the cache holds
// runs mostly eagerly instead of recording on every step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace deepinfer::ops {

class GraphCache {
 public:
  struct Options {
    int max_graphs = 32;
    int64_t evict_interval = 64;
    size_t max_seen = 4096;  // remembered first sights (forgetting one only delays its recording)
  };
  enum class Decision { kReplay, kRecord, kEager };

  explicit GraphCache(const Options& options) : options_(options) {}

  // One prepared step with signature `sig`. kReplay sets *graph.
  Decision decide(uint64_t sig, void** graph);
  // The result of recording `sig` (nullptr: the recording failed, the signature stays eager).
  // Returns the graph evicted to make room, for the caller to destroy, or nullptr.
  void* store(uint64_t sig, void* graph);
  // Forgets every graph (their memory or inputs are gone); returns them for destruction.
  std::vector<void*> clear();
  size_t size() const { return graphs_.size(); }

 private:
  struct Entry {
    void* graph = nullptr;
    uint64_t last_use = 0;
  };
  Options options_;
  std::unordered_map<uint64_t, Entry> graphs_;
  std::unordered_set<uint64_t> seen_;
  uint64_t step_ = 0;           // prepared steps so far
  uint64_t last_eviction_ = 0;  // step of the last eviction (0: none yet)
};

}  // namespace deepinfer::ops
