// Chained XXH3-128 block hashes (see block_hasher.h). Tokens are hashed as their int32 bytes
// in host order; the cache never leaves the process, so host order is enough.
#include "kv/block_hasher.h"

// Stack-allocated XXH3 state (the header documents this opt-in for a fixed library version).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "base/check.h"

namespace deepinfer::kv {

BlockHash BlockHasher::root(uint64_t cache_salt) const {
  if (cache_salt == 0) return BlockHash{};
  XXH128_hash_t h = XXH3_128bits_withSeed(&cache_salt, sizeof(cache_salt), seed_);
  return BlockHash{h.low64, h.high64};
}

BlockHash BlockHasher::chain(const BlockHash& parent, std::span<const TokenId> tokens) const {
  DI_CHECK(static_cast<int64_t>(tokens.size()) == block_tokens_, "block of {} tokens, expected {}",
           tokens.size(), block_tokens_);
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, seed_);
  const uint64_t parent_words[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(&state, parent_words, sizeof(parent_words));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockHash{h.low64, h.high64};
}

void BlockHasher::extend(std::span<const TokenId> tokens, const BlockHash& root,
                         std::vector<BlockHash>* hashes) const {
  const size_t n_full = tokens.size() / static_cast<size_t>(block_tokens_);
  for (size_t i = hashes->size(); i < n_full; ++i) {
    const BlockHash& parent = i == 0 ? root : (*hashes)[i - 1];
    hashes->push_back(chain(parent, tokens.subspan(i * block_tokens_, block_tokens_)));
  }
}

}  // namespace deepinfer::kv
