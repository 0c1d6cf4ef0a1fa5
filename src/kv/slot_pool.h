// SlotPool: a fixed set of integer slots handed out lowest-id first. Used for per-sequence
// state slots (window rings + compressor streaming state of every layer). Lowest-id-first keeps
// plans deterministic and lets tests name exact slots. No byte knowledge: the engine owns them.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "kv/types.h"

namespace deepinfer::kv {

class SlotPool {
 public:
  explicit SlotPool(int32_t n_slots);

  int32_t n_slots() const { return static_cast<int32_t>(used_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  bool is_used(SlotId s) const { return used_[static_cast<size_t>(s)] != 0; }

  std::optional<SlotId> acquire();
  void release(SlotId s);

 private:
  std::set<SlotId> free_;
  std::vector<uint8_t> used_;
};

}  // namespace deepinfer::kv
