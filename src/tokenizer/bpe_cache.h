// BpeCache: piece bytes → ids, shared by all threads using one tokenizer. Sharded by hash with
// a mutex per shard so concurrent encoders rarely contend; each shard holds at most
// kMaxEntriesPerShard entries and is simply emptied when full (bounded memory, no LRU
// bookkeeping on the hot path). Only short pieces are cached: long ones rarely repeat.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deepinfer::tokenizer {

class BpeCache {
 public:
  static constexpr size_t kMaxPieceBytes = 48;
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxEntriesPerShard = 8192;

  // Appends the cached ids of `piece` to `out` and returns true on a hit.
  bool lookup(std::string_view piece, std::vector<int32_t>& out) const;
  void insert(std::string_view piece, const int32_t* ids, size_t n_ids) const;

 private:
  // Transparent hashing lets lookups use a string_view without building a std::string.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  Shard& shard_for(size_t hash) const { return shards_[(hash >> 7) % kShards]; }

  mutable std::array<Shard, kShards> shards_;
};

}  // namespace deepinfer::tokenizer
