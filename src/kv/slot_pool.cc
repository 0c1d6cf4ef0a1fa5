// Lowest-id-first slot pool (see slot_pool.h).
#include "kv/slot_pool.h"

#include "base/check.h"

namespace deepinfer::kv {

SlotPool::SlotPool(int32_t n_slots) : used_(static_cast<size_t>(n_slots), 0) {
  for (SlotId s = 0; s < n_slots; ++s) free_.insert(free_.end(), s);
}

std::optional<SlotId> SlotPool::acquire() {
  if (free_.empty()) return std::nullopt;
  const SlotId s = *free_.begin();
  free_.erase(free_.begin());
  used_[static_cast<size_t>(s)] = 1;
  return s;
}

void SlotPool::release(SlotId s) {
  DI_CHECK(s >= 0 && s < n_slots() && is_used(s), "releasing slot {} which is not in use", s);
  used_[static_cast<size_t>(s)] = 0;
  free_.insert(s);
}

}  // namespace deepinfer::kv
