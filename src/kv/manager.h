// kv::Manager: per-sequence KV bookkeeping over three pools — history blocks (BlockPool, one
// block table per sequence), state slots (SlotPool, one per running sequence) and state
// snapshots (SnapshotPool) — plus prefix matching, replay and snapshot policies. Plain ints:
// the engine owns the bytes and performs every copy the returned ids imply.
// Invariants (check_integrity): Σ ref counts == block-table references; free + used == total;
// one distinct state slot per sequence; block hashes unique; snapshot pins == restores in flight.
// Not thread-safe: the scheduler calls it from the engine's step thread only.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "kv/block_hasher.h"
#include "kv/block_pool.h"
#include "kv/kv_config.h"
#include "kv/policies.h"
#include "kv/slot_pool.h"
#include "kv/snapshot_pool.h"
#include "kv/types.h"

namespace deepinfer::kv {

// Result of match_prefix. Valid only until the next mutation of the Manager: admit() it at once.
struct PrefixMatch {
  int32_t n_tokens_cached = 0;          // H: multiple of block_tokens, < the sequence's length
  std::vector<BlockId> blocks;          // H / block_tokens cached blocks to share, in order
  std::optional<SnapshotId> snapshot;   // state snapshot to restore (at replay_start), if any
  int32_t replay_start = 0;             // first position to compute: the snapshot's boundary, or R
  int32_t window_floor = 0;             // lowest position the window rings will ever hold
};

class Manager {
 public:
  // Pending snapshots a sequence may hold: its step in flight's and its step planned ahead's.
  static constexpr size_t kMaxPendingSnapshots = 2;

  static Result<Manager> create(KvConfig config);

  const KvConfig& config() const { return config_; }
  const BlockHasher& hasher() const { return hasher_; }
  const ReplayPolicy& replay_policy() const { return replay_; }
  const SnapshotPolicy& snapshot_policy() const { return snapshot_policy_; }
  int32_t block_tokens() const { return config_.block_tokens; }
  int32_t n_blocks_for(int64_t n_tokens) const;

  // Longest cached prefix of a sequence of `n_tokens` tokens whose full-block hashes are
  // `hashes`. Never covers the last token (one token must run to produce logits). Picks the
  // deepest snapshot S among the matched boundaries when S ≥ R (restoring is then no more work
  // than replaying); otherwise replay_start = R. Pure lookup: nothing is pinned or touched.
  PrefixMatch match_prefix(std::span<const BlockHash> hashes, int32_t n_tokens) const;
  // Same, hashing `tokens` first (routers, metrics). Callers that match repeatedly should keep
  // the hashes, as the scheduler does, so each block is hashed once.
  PrefixMatch match_prefix(std::span<const TokenId> tokens, uint64_t cache_salt) const;

  // Starts tracking `seq`: takes a state slot, shares match.blocks, pins match.snapshot and
  // allocates blocks so the table covers replay_start + n_new_tokens positions. nullopt (and no
  // change) when no state slot or not enough blocks are free.
  std::optional<SlotId> admit(SeqId seq, const PrefixMatch& match, int32_t n_new_tokens);
  // Extends the table of `seq` to cover n_tokens_computed + n_new_tokens positions (n_new_tokens
  // includes lookahead/draft tokens). Returns the appended ids (possibly none); nullopt (and no
  // change) when the pool has too few free blocks.
  std::optional<std::vector<BlockId>> allocate(SeqId seq, int32_t n_new_tokens);
  // Records that positions [0, n_tokens_computed) are computed and registers the hashes of the
  // blocks that became full (hashes[i] belongs to block i; missing hashes are registered later).
  void commit(SeqId seq, std::span<const BlockHash> hashes, int32_t n_tokens_computed);
  // Speculative rollback: positions ≥ n_tokens_computed were rejected. Blocks past the one that
  // holds position n_tokens_computed − 1 are released. Never reaches into committed blocks.
  void rollback(SeqId seq, int32_t n_tokens_computed);
  // Reserves a snapshot of seq's state at position `boundary`, which the step being planned must
  // end at (the engine copies state slot → snapshot after the forward). A sequence holds at most
  // kMaxPendingSnapshots pending, in the order of their steps: the step in flight's and the one
  // planned ahead of it (asynchronous scheduling), so `boundary` must lie past any pending one's.
  // nullopt when the key already exists, no slot is reclaimable, or the seq cannot hold another.
  std::optional<SnapshotId> reserve_snapshot(SeqId seq, const BlockHash& key, int32_t boundary);
  // After the step's forward: unpins the restored snapshot and settles the oldest pending one —
  // the step's own, steps are updated in the order they were planned — publishing it if the
  // sequence ended the step exactly at its boundary (cancelling it otherwise). keep_pending: the
  // step reserved none, so every pending snapshot belongs to a step planned ahead of this update
  // (still in flight), which settles it.
  void end_step(SeqId seq, bool keep_pending = false);
  // Releases everything `seq` holds: blocks (last block first, so a cached prefix's tail is
  // evicted before its head), the state slot, snapshot pins and a pending snapshot.
  void free(SeqId seq);

  bool contains(SeqId seq) const { return seqs_.contains(seq); }
  std::span<const BlockId> block_table(SeqId seq) const;
  SlotId state_slot(SeqId seq) const;
  int32_t n_tokens_computed(SeqId seq) const;
  int32_t n_tokens_cached(SeqId seq) const;     // H at admission
  int32_t window_floor(SeqId seq) const;
  int32_t n_seqs() const { return static_cast<int32_t>(seqs_.size()); }
  int32_t n_free_blocks() const { return blocks_.n_free(); }
  int32_t n_free_state_slots() const { return slots_.n_free(); }
  const BlockPool& block_pool() const { return blocks_; }
  const SlotPool& slot_pool() const { return slots_; }
  const SnapshotPool& snapshot_pool() const { return snapshots_; }

  // Every invariant listed at the top of this file; the Status names the first violation.
  Status check_integrity() const;

 private:
  struct SeqKv {
    std::vector<BlockId> blocks;
    SlotId state_slot = kNoId;
    int32_t n_tokens_computed = 0;
    int32_t n_blocks_committed = 0;  // blocks [0, n) were offered to the prefix cache
    int32_t n_tokens_cached = 0;
    int32_t window_floor = 0;
    SnapshotId restore_pin = kNoId;
    std::vector<SnapshotId> pending_snapshots;  // oldest first, at most kMaxPendingSnapshots
  };
  explicit Manager(KvConfig config);
  SeqKv& seq_kv(SeqId seq);
  const SeqKv& seq_kv(SeqId seq) const;
  Status check_seqs() const;
  Status check_snapshots() const;

  KvConfig config_;
  BlockHasher hasher_;
  ReplayPolicy replay_;
  SnapshotPolicy snapshot_policy_;
  BlockPool blocks_;
  SlotPool slots_;
  SnapshotPool snapshots_;
  std::unordered_map<SeqId, SeqKv> seqs_;  // never iterated on a path that shapes a plan
};

}  // namespace deepinfer::kv
