// kv::Manager::check_integrity: recounts every reference from the sequence records and compares
// with the pools. O(blocks + table entries); meant for tests and debug builds, not every step of
// a production run.
#include <set>

#include "kv/manager.h"

namespace deepinfer::kv {

Status Manager::check_seqs() const {
  std::set<SlotId> seen_slots;
  for (const auto& [id, s] : seqs_) {
    if (s.state_slot < 0 || s.state_slot >= slots_.n_slots() || !slots_.is_used(s.state_slot)) {
      return internal_error("kv manager: sequence {} holds state slot {} which is not in use", id,
                            s.state_slot);
    }
    if (!seen_slots.insert(s.state_slot).second) {
      return internal_error("kv manager: state slot {} is held by two sequences (one is {})",
                            s.state_slot, id);
    }
    const int64_t n_covered = static_cast<int64_t>(s.blocks.size()) * config_.block_tokens;
    if (s.n_tokens_computed < 0 || s.n_tokens_computed > n_covered) {
      return internal_error("kv manager: sequence {} has {} computed tokens but {} blocks", id,
                            s.n_tokens_computed, s.blocks.size());
    }
    if (s.n_blocks_committed > static_cast<int32_t>(s.blocks.size()) ||
        s.n_tokens_cached > s.n_blocks_committed * config_.block_tokens) {
      return internal_error("kv manager: sequence {} has {} committed blocks, {} cached tokens, {} blocks",
                            id, s.n_blocks_committed, s.n_tokens_cached, s.blocks.size());
    }
    for (int32_t i = 0; i < s.n_tokens_cached / config_.block_tokens; ++i) {
      if (!blocks_.hash(s.blocks[static_cast<size_t>(i)])) {
        return internal_error("kv manager: shared prefix block {} of sequence {} lost its hash",
                              s.blocks[static_cast<size_t>(i)], id);
      }
    }
  }
  const int32_t n_used = slots_.n_slots() - slots_.n_free();
  if (n_used != static_cast<int32_t>(seqs_.size())) {
    return internal_error("kv manager: {} state slots in use for {} sequences", n_used, seqs_.size());
  }
  return Status::ok();
}

Status Manager::check_snapshots() const {
  std::vector<int32_t> pins(static_cast<size_t>(snapshots_.n_slots()), 0);
  std::set<SnapshotId> pending_owned;
  for (const auto& [id, s] : seqs_) {
    if (s.restore_pin != kNoId) {
      if (s.restore_pin < 0 || s.restore_pin >= snapshots_.n_slots()) {
        return internal_error("kv manager: sequence {} pins snapshot {} out of range", id, s.restore_pin);
      }
      ++pins[static_cast<size_t>(s.restore_pin)];
    }
    if (s.pending_snapshots.size() > kMaxPendingSnapshots) {
      return internal_error("kv manager: sequence {} holds {} pending snapshots (at most {})", id,
                            s.pending_snapshots.size(), kMaxPendingSnapshots);
    }
    int32_t last_boundary = s.n_tokens_computed;
    for (SnapshotId p : s.pending_snapshots) {
      if (p < 0 || p >= snapshots_.n_slots() || snapshots_.state(p) != SnapshotPool::SlotState::kPending ||
          !pending_owned.insert(p).second) {
        return internal_error("kv manager: sequence {} owns snapshot {} which is not its pending slot", id, p);
      }
      // Boundaries in step order, none behind the computed positions (a step's update settles its own).
      if (snapshots_.info(p).n_tokens <= last_boundary) {
        return internal_error("kv manager: sequence {}'s pending snapshot {} at {} is not past {}", id, p,
                              snapshots_.info(p).n_tokens, last_boundary);
      }
      last_boundary = snapshots_.info(p).n_tokens;
    }
  }
  for (SnapshotId i = 0; i < snapshots_.n_slots(); ++i) {
    if (snapshots_.state(i) == SnapshotPool::SlotState::kPending && !pending_owned.contains(i)) {
      return internal_error("kv manager: pending snapshot {} has no owning sequence", i);
    }
  }
  return snapshots_.check_integrity(pins);
}

Status Manager::check_integrity() const {
  std::vector<int32_t> refs(static_cast<size_t>(blocks_.n_blocks()), 0);
  for (const auto& [id, s] : seqs_) {
    for (BlockId b : s.blocks) {
      if (b < 0 || b >= blocks_.n_blocks()) {
        return internal_error("kv manager: sequence {} references block {} out of range", id, b);
      }
      ++refs[static_cast<size_t>(b)];
    }
  }
  DI_RETURN_IF_ERROR(blocks_.check_integrity(refs));
  DI_RETURN_IF_ERROR(check_seqs());
  return check_snapshots();
}

}  // namespace deepinfer::kv
