// Plain-data identifiers shared by the KV bookkeeping and the scheduler: block ids, state and
// snapshot slots, sequence ids and the 128-bit chained block hash. Nothing here knows memory:
// the engine maps an id to bytes in its own pools (architecture.md §1.1 rule 3).
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::kv {

using TokenId = int32_t;
using SeqId = int64_t;      // engine-assigned request id, unique while the request lives
using BlockId = int32_t;    // one id indexes every history pool (compressed rows, indexer keys)
using SlotId = int32_t;     // per-sequence state slot: window rings + compressor streaming state
using SnapshotId = int32_t; // copy of a state slot taken at a block boundary

inline constexpr int32_t kNoId = -1;

// Chained prefix hash of a full block: XXH3-128 over (parent hash, the block's token ids).
// Equal hashes mean equal token prefixes (up to a 2^-128 collision), so equal history rows.
struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull)); }
};

}  // namespace deepinfer::kv
