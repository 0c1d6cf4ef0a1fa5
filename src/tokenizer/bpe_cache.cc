// BpeCache (see bpe_cache.h).
#include "tokenizer/bpe_cache.h"

namespace deepinfer::tokenizer {

bool BpeCache::lookup(std::string_view piece, std::vector<int32_t>& out) const {
  Shard& shard = shard_for(Hash{}(piece));
  std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.map.find(piece);
  if (it == shard.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void BpeCache::insert(std::string_view piece, const int32_t* ids, size_t n_ids) const {
  Shard& shard = shard_for(Hash{}(piece));
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= kMaxEntriesPerShard) shard.map.clear();
  shard.map.emplace(std::string(piece), std::vector<int32_t>(ids, ids + n_ids));
}

}  // namespace deepinfer::tokenizer
