// kv::Manager: admission, allocation, commit, rollback and release of a sequence's KV resources
// (see manager.h). Integrity checks live in manager_integrity.cc.
#include "kv/manager.h"

#include <algorithm>

#include "base/check.h"

namespace deepinfer::kv {

Result<Manager> Manager::create(KvConfig config) {
  DI_RETURN_IF_ERROR(validate_kv_config(config));
  return Manager(std::move(config));
}

Manager::Manager(KvConfig config)
    : config_(std::move(config)),
      hasher_(config_.block_tokens, config_.hash_seed),
      replay_(config_.replay),
      snapshot_policy_(config_.snapshot, config_.block_tokens),
      blocks_(config_.n_blocks),
      slots_(config_.n_state_slots),
      snapshots_(config_.n_snapshot_slots) {}

int32_t Manager::n_blocks_for(int64_t n_tokens) const {
  const int64_t bt = config_.block_tokens;
  return static_cast<int32_t>((std::max<int64_t>(n_tokens, 0) + bt - 1) / bt);
}

Manager::SeqKv& Manager::seq_kv(SeqId seq) {
  auto it = seqs_.find(seq);
  DI_CHECK(it != seqs_.end(), "kv manager: unknown sequence {}", seq);
  return it->second;
}

const Manager::SeqKv& Manager::seq_kv(SeqId seq) const {
  auto it = seqs_.find(seq);
  DI_CHECK(it != seqs_.end(), "kv manager: unknown sequence {}", seq);
  return it->second;
}

PrefixMatch Manager::match_prefix(std::span<const BlockHash> hashes, int32_t n_tokens) const {
  PrefixMatch m;
  if (!config_.enable_prefix_caching || n_tokens <= 1) return m;
  const size_t n_max = std::min(hashes.size(), static_cast<size_t>((n_tokens - 1) / config_.block_tokens));
  for (size_t i = 0; i < n_max; ++i) {
    const std::optional<BlockId> b = blocks_.lookup(hashes[i]);
    if (!b) break;
    m.blocks.push_back(*b);
  }
  const int32_t n_blocks = static_cast<int32_t>(m.blocks.size());
  m.n_tokens_cached = n_blocks * config_.block_tokens;
  m.replay_start = replay_.replay_start(m.n_tokens_cached);
  m.window_floor = m.replay_start;
  // Deepest snapshot at a matched boundary that is no more work than replaying from R.
  for (int32_t i = n_blocks - 1; i >= 0; --i) {
    const int32_t boundary = (i + 1) * config_.block_tokens;
    if (boundary < m.replay_start) break;
    if (const std::optional<SnapshotId> s = snapshots_.lookup(hashes[static_cast<size_t>(i)])) {
      m.snapshot = s;
      m.replay_start = boundary;
      m.window_floor = snapshots_.info(*s).window_floor;
      break;
    }
  }
  return m;
}

PrefixMatch Manager::match_prefix(std::span<const TokenId> tokens, uint64_t cache_salt) const {
  std::vector<BlockHash> hashes;
  hasher_.extend(tokens, hasher_.root(cache_salt), &hashes);
  return match_prefix(hashes, static_cast<int32_t>(tokens.size()));
}

std::optional<SlotId> Manager::admit(SeqId seq, const PrefixMatch& match, int32_t n_new_tokens) {
  DI_CHECK(!seqs_.contains(seq), "kv manager: sequence {} admitted twice", seq);
  DI_CHECK(n_new_tokens >= 0 && match.replay_start <= match.n_tokens_cached, "bad admission of {}", seq);
  if (slots_.n_free() == 0) return std::nullopt;
  const int32_t n_shared = static_cast<int32_t>(match.blocks.size());
  const int32_t n_total = std::max(n_shared, n_blocks_for(int64_t{match.replay_start} + n_new_tokens));
  // A free cached block taken by this match leaves the free list, so it cannot also be allocated.
  int32_t n_free_after_share = blocks_.n_free();
  for (BlockId b : match.blocks) {
    DI_CHECK(blocks_.hash(b).has_value(), "stale prefix match: block {} is no longer cached", b);
    if (blocks_.ref_count(b) == 0) --n_free_after_share;
  }
  if (n_total - n_shared > n_free_after_share) return std::nullopt;

  SeqKv s;
  s.state_slot = *slots_.acquire();
  for (BlockId b : match.blocks) blocks_.share(b);
  s.blocks = match.blocks;
  std::optional<std::vector<BlockId>> fresh = blocks_.allocate(n_total - n_shared);
  DI_CHECK(fresh.has_value(), "allocation failed after the free-block check");
  s.blocks.insert(s.blocks.end(), fresh->begin(), fresh->end());
  s.n_tokens_computed = match.replay_start;
  s.n_blocks_committed = n_shared;
  s.n_tokens_cached = match.n_tokens_cached;
  s.window_floor = match.window_floor;
  if (match.snapshot) {
    snapshots_.pin(*match.snapshot);
    s.restore_pin = *match.snapshot;
  }
  const SlotId slot = s.state_slot;
  seqs_.emplace(seq, std::move(s));
  return slot;
}

std::optional<std::vector<BlockId>> Manager::allocate(SeqId seq, int32_t n_new_tokens) {
  DI_CHECK(n_new_tokens >= 0, "allocate({}, {})", seq, n_new_tokens);
  SeqKv& s = seq_kv(seq);
  const int32_t n_have = static_cast<int32_t>(s.blocks.size());
  const int32_t n_need = n_blocks_for(int64_t{s.n_tokens_computed} + n_new_tokens);
  if (n_need <= n_have) return std::vector<BlockId>{};
  std::optional<std::vector<BlockId>> fresh = blocks_.allocate(n_need - n_have);
  if (!fresh) return std::nullopt;
  s.blocks.insert(s.blocks.end(), fresh->begin(), fresh->end());
  return fresh;
}

void Manager::commit(SeqId seq, std::span<const BlockHash> hashes, int32_t n_tokens_computed) {
  SeqKv& s = seq_kv(seq);
  DI_CHECK(n_tokens_computed >= s.n_tokens_computed &&
               n_tokens_computed <= static_cast<int64_t>(s.blocks.size()) * config_.block_tokens,
           "commit of sequence {}: {} computed tokens (was {}, table covers {} blocks)", seq,
           n_tokens_computed, s.n_tokens_computed, s.blocks.size());
  s.n_tokens_computed = n_tokens_computed;
  const int32_t n_full = std::min<int32_t>(n_tokens_computed / config_.block_tokens,
                                           static_cast<int32_t>(hashes.size()));
  if (!config_.enable_prefix_caching) return;
  for (int32_t i = s.n_blocks_committed; i < n_full; ++i) {
    // A false return means another sequence computed the same block first; ours stays uncached.
    blocks_.register_hash(s.blocks[static_cast<size_t>(i)], hashes[static_cast<size_t>(i)]);
  }
  s.n_blocks_committed = std::max(s.n_blocks_committed, n_full);
}

void Manager::rollback(SeqId seq, int32_t n_tokens_computed) {
  SeqKv& s = seq_kv(seq);
  DI_CHECK(n_tokens_computed <= s.n_tokens_computed &&
               n_tokens_computed >= s.n_blocks_committed * config_.block_tokens,
           "rollback of sequence {} to {} (computed {}, {} committed blocks)", seq,
           n_tokens_computed, s.n_tokens_computed, s.n_blocks_committed);
  s.n_tokens_computed = n_tokens_computed;
  const size_t n_keep = static_cast<size_t>(n_blocks_for(n_tokens_computed));
  while (s.blocks.size() > n_keep) {
    blocks_.release(s.blocks.back());
    s.blocks.pop_back();
  }
}

std::optional<SnapshotId> Manager::reserve_snapshot(SeqId seq, const BlockHash& key, int32_t boundary) {
  SeqKv& s = seq_kv(seq);
  if (s.pending_snapshots.size() >= kMaxPendingSnapshots || !config_.enable_prefix_caching) return std::nullopt;
  // Steps end at their boundaries in the order they are planned: a later step's lies further.
  if (!s.pending_snapshots.empty() && boundary <= snapshots_.info(s.pending_snapshots.back()).n_tokens) {
    return std::nullopt;
  }
  DI_CHECK(boundary > s.n_tokens_computed && boundary % config_.block_tokens == 0,
           "snapshot of sequence {} at {} (computed {})", seq, boundary, s.n_tokens_computed);
  const std::optional<SnapshotId> id = snapshots_.reserve(SnapshotInfo{key, boundary, s.window_floor});
  if (id) s.pending_snapshots.push_back(*id);
  return id;
}

void Manager::end_step(SeqId seq, bool keep_pending) {
  SeqKv& s = seq_kv(seq);
  if (s.restore_pin != kNoId) {
    snapshots_.unpin(s.restore_pin);
    s.restore_pin = kNoId;
  }
  if (!s.pending_snapshots.empty() && !keep_pending) {
    const SnapshotId own = s.pending_snapshots.front();
    if (snapshots_.info(own).n_tokens == s.n_tokens_computed) {
      snapshots_.publish(own);
    } else {
      snapshots_.cancel(own);
    }
    s.pending_snapshots.erase(s.pending_snapshots.begin());
  }
}

void Manager::free(SeqId seq) {
  SeqKv& s = seq_kv(seq);
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) blocks_.release(*it);
  slots_.release(s.state_slot);
  if (s.restore_pin != kNoId) snapshots_.unpin(s.restore_pin);
  for (SnapshotId p : s.pending_snapshots) snapshots_.cancel(p);
  seqs_.erase(seq);
}

std::span<const BlockId> Manager::block_table(SeqId seq) const { return seq_kv(seq).blocks; }
SlotId Manager::state_slot(SeqId seq) const { return seq_kv(seq).state_slot; }
int32_t Manager::n_tokens_computed(SeqId seq) const { return seq_kv(seq).n_tokens_computed; }
int32_t Manager::n_tokens_cached(SeqId seq) const { return seq_kv(seq).n_tokens_cached; }
int32_t Manager::window_floor(SeqId seq) const { return seq_kv(seq).window_floor; }

}  // namespace deepinfer::kv
