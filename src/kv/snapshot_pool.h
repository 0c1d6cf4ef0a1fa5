// SnapshotPool: slots holding a copy of a sequence's state slot taken at a block boundary,
// keyed by the chained hash of the block that ends there. Life cycle of a slot:
//   free → pending (reserved; the engine copies state → snapshot after the step's forward)
//        → valid (published in update(); findable by lookup) → free (LRU eviction or never used).
// A valid slot pinned by a restore in flight is never evicted. One slot per key.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kv/types.h"

namespace deepinfer::kv {

struct SnapshotInfo {
  BlockHash key;
  int32_t n_tokens = 0;      // boundary position H: the state after positions [0, H)
  int32_t window_floor = 0;  // lowest position ever written into the copied window rings
};

class SnapshotPool {
 public:
  enum class SlotState : uint8_t { kFree, kPending, kValid };

  explicit SnapshotPool(int32_t n_slots);

  int32_t n_slots() const { return static_cast<int32_t>(slots_.size()); }
  int32_t n_valid() const;
  // A valid snapshot for `key`, or nullopt (pending ones are not readable yet).
  std::optional<SnapshotId> lookup(const BlockHash& key) const;
  bool contains_key(const BlockHash& key) const { return by_key_.contains(key); }
  // True when reserve(key, ...) would succeed now.
  bool can_reserve(const BlockHash& key) const;
  // Reserves a slot for `info.key`: the lowest free slot, else evicts the least recently used
  // unpinned valid slot. nullopt when the key is already present or every slot is busy.
  std::optional<SnapshotId> reserve(const SnapshotInfo& info);
  void publish(SnapshotId s);  // pending → valid
  void cancel(SnapshotId s);   // pending → free (the copy never happened or is not wanted)
  void pin(SnapshotId s);      // a restore from s is in flight; also marks s most recently used
  void unpin(SnapshotId s);

  SlotState state(SnapshotId s) const { return slots_[static_cast<size_t>(s)].state; }
  const SnapshotInfo& info(SnapshotId s) const { return slots_[static_cast<size_t>(s)].info; }
  int32_t n_pins(SnapshotId s) const { return slots_[static_cast<size_t>(s)].n_pins; }
  int64_t n_evictions() const { return n_evictions_; }

  // Internal invariants, plus n_pins(s) == expected_pins[s] (pins held by sequences).
  Status check_integrity(const std::vector<int32_t>& expected_pins) const;

 private:
  struct Slot {
    SlotState state = SlotState::kFree;
    SnapshotInfo info;
    int32_t n_pins = 0;
    uint64_t last_use = 0;
  };
  std::optional<SnapshotId> pick_slot() const;

  std::vector<Slot> slots_;
  std::unordered_map<BlockHash, SnapshotId, BlockHashHasher> by_key_;  // pending and valid
  uint64_t clock_ = 0;
  int64_t n_evictions_ = 0;
};

}  // namespace deepinfer::kv
