// BlockHasher: the chained prefix hash that keys the prefix cache and the state snapshots.
// H_i = XXH3_128(seed; H_{i-1} ‖ tokens[i·B, (i+1)·B)) with H_{-1} = root(cache_salt). The seed
// is the model fingerprint, so caches of different weights or KV formats never match.
// Only full blocks get a hash: a partial block's rows are still being written.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/types.h"

namespace deepinfer::kv {

class BlockHasher {
 public:
  BlockHasher(int32_t block_tokens, uint64_t seed) : block_tokens_(block_tokens), seed_(seed) {}

  int32_t block_tokens() const { return block_tokens_; }
  // Parent of block 0. Salt 0 is the shared namespace; a tenant/LoRA salt isolates its cache.
  BlockHash root(uint64_t cache_salt) const;
  // Hash of one full block (`tokens.size()` must equal block_tokens).
  BlockHash chain(const BlockHash& parent, std::span<const TokenId> tokens) const;
  // Appends the hashes of the full blocks of `tokens` that `hashes` does not hold yet, so a
  // growing sequence hashes each block exactly once.
  void extend(std::span<const TokenId> tokens, const BlockHash& root,
              std::vector<BlockHash>* hashes) const;

 private:
  int32_t block_tokens_;
  uint64_t seed_;
};

}  // namespace deepinfer::kv
