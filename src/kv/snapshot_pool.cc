// Snapshot slots with LRU eviction (see snapshot_pool.h). Slots are few (a snapshot is MiBs), so
// eviction scans them linearly; a logical clock instead of wall time keeps the order exact.
#include "kv/snapshot_pool.h"

#include "base/check.h"

namespace deepinfer::kv {

SnapshotPool::SnapshotPool(int32_t n_slots) : slots_(static_cast<size_t>(n_slots)) {}

int32_t SnapshotPool::n_valid() const {
  int32_t n = 0;
  for (const Slot& s : slots_) n += s.state == SlotState::kValid ? 1 : 0;
  return n;
}

std::optional<SnapshotId> SnapshotPool::lookup(const BlockHash& key) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end() || slots_[static_cast<size_t>(it->second)].state != SlotState::kValid) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<SnapshotId> SnapshotPool::pick_slot() const {
  std::optional<SnapshotId> victim;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.state == SlotState::kFree) return static_cast<SnapshotId>(i);
    if (s.state == SlotState::kValid && s.n_pins == 0 &&
        (!victim || s.last_use < slots_[static_cast<size_t>(*victim)].last_use)) {
      victim = static_cast<SnapshotId>(i);
    }
  }
  return victim;
}

bool SnapshotPool::can_reserve(const BlockHash& key) const {
  return !by_key_.contains(key) && pick_slot().has_value();
}

std::optional<SnapshotId> SnapshotPool::reserve(const SnapshotInfo& info) {
  if (by_key_.contains(info.key)) return std::nullopt;
  const std::optional<SnapshotId> id = pick_slot();
  if (!id) return std::nullopt;
  Slot& slot = slots_[static_cast<size_t>(*id)];
  if (slot.state == SlotState::kValid) {
    by_key_.erase(slot.info.key);
    ++n_evictions_;
  }
  slot.state = SlotState::kPending;
  slot.info = info;
  slot.n_pins = 0;
  slot.last_use = ++clock_;
  by_key_.emplace(info.key, *id);
  return id;
}

void SnapshotPool::publish(SnapshotId s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  DI_CHECK(slot.state == SlotState::kPending, "publishing snapshot {} which is not pending", s);
  slot.state = SlotState::kValid;
  slot.last_use = ++clock_;
}

void SnapshotPool::cancel(SnapshotId s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  DI_CHECK(slot.state == SlotState::kPending, "cancelling snapshot {} which is not pending", s);
  by_key_.erase(slot.info.key);
  slot = Slot{};
}

void SnapshotPool::pin(SnapshotId s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  DI_CHECK(slot.state == SlotState::kValid, "pinning snapshot {} which is not valid", s);
  ++slot.n_pins;
  slot.last_use = ++clock_;
}

void SnapshotPool::unpin(SnapshotId s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  DI_CHECK(slot.n_pins > 0, "unpinning snapshot {} with no pins", s);
  --slot.n_pins;
}

Status SnapshotPool::check_integrity(const std::vector<int32_t>& expected_pins) const {
  if (expected_pins.size() != slots_.size()) {
    return internal_error("snapshot pool: {} expected pin counts for {} slots", expected_pins.size(),
                          slots_.size());
  }
  size_t n_keyed = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.n_pins != expected_pins[i]) {
      return internal_error("snapshot pool: slot {} has {} pins, sequences hold {}", i, s.n_pins,
                            expected_pins[i]);
    }
    if (s.state == SlotState::kFree) {
      if (s.n_pins != 0) return internal_error("snapshot pool: free slot {} is pinned", i);
      continue;
    }
    if (s.state == SlotState::kPending && s.n_pins != 0) {
      return internal_error("snapshot pool: pending slot {} is pinned", i);
    }
    auto it = by_key_.find(s.info.key);
    if (it == by_key_.end() || it->second != static_cast<SnapshotId>(i)) {
      return internal_error("snapshot pool: key of slot {} is not indexed to it", i);
    }
    ++n_keyed;
  }
  if (n_keyed != by_key_.size()) {
    return internal_error("snapshot pool: {} keys indexed but {} slots in use", by_key_.size(), n_keyed);
  }
  return Status::ok();
}

}  // namespace deepinfer::kv
