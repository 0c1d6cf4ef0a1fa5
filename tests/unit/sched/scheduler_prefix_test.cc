// Prefix caching through the scheduler (block_tokens = 4): chained-hash sharing across
// requests with exact block ids and ref counts, replay start R in bounded and exact modes,
// snapshots taken at the prompt end / hit boundary / interval and restored by later requests;
// requests with prompt logits read no cached prefix.
// FakeRunner verifies that restored states and shared blocks hold exactly the right tokens.
#include <gtest/gtest.h>

#include <tuple>

#include "fake_runner.h"

namespace deepinfer::sched {
namespace {

using testing::Harness;
using testing::model_tokens;
using testing::small_kv;
using testing::small_sched;
using testing::tokens_from;
using Ids = std::vector<kv::BlockId>;
using Toks = std::vector<TokenId>;

Toks concat(Toks a, const Toks& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(SchedulerPrefix, HitSharesBlocksAndReplaysTheLastWindow) {
  Harness h(small_sched(64), small_kv(16));
  h.add(1, tokens_from(1, 12), 1);
  h.step();
  ASSERT_EQ(h.finished.at(1), FinishReason::kLength);
  EXPECT_EQ(h.sched().kv().block_pool().free_list().back(), 0) << "prefix head evicted last";

  h.add(2, concat(tokens_from(1, 12), tokens_from(50, 3)), 5);
  SeqPlan s = h.step().seqs.at(0);
  EXPECT_EQ(s.n_history_cached, 12);
  EXPECT_EQ(s.first_position, 10) << "bounded replay: R = H - W = 12 - 2";
  EXPECT_EQ(s.window_floor, 10);
  EXPECT_EQ(s.state_init, StateInit::kReset);
  EXPECT_EQ(s.n_tokens_scheduled, 5);
  EXPECT_EQ(s.token_ids, (Toks{11, 12, 50, 51, 52}));
  EXPECT_TRUE(s.needs_logits);
  EXPECT_TRUE(s.block_table_reset);
  EXPECT_EQ(s.new_block_ids, (Ids{0, 1, 2, 3}));

  // Shares the first two blocks with the running request 2; the third block differs.
  h.add(3, concat(tokens_from(1, 8), tokens_from(70, 4)), 5);
  BatchPlan p = h.step();
  ASSERT_EQ(p.seqs.size(), 2u);
  s = p.seqs[1];
  EXPECT_EQ(s.seq_id, 3);
  EXPECT_EQ(s.n_history_cached, 8);
  EXPECT_EQ(s.first_position, 6);
  EXPECT_EQ(s.new_block_ids, (Ids{0, 1, 4}));
  const kv::BlockPool& pool = h.sched().kv().block_pool();
  EXPECT_EQ(pool.ref_count(0), 2);
  EXPECT_EQ(pool.ref_count(1), 2);
  EXPECT_EQ(pool.ref_count(2), 1);

  // Same later blocks, different first token: chained hashes differ, nothing is shared.
  h.add(4, tokens_from(2, 12), 5);
  s = h.step().seqs.back();
  EXPECT_EQ(s.seq_id, 4);
  EXPECT_EQ(s.n_history_cached, 0);
  EXPECT_EQ(s.first_position, 0);
  EXPECT_EQ(h.last_events.at(0).n_prompt_cached, 12) << "request 2's event";
  EXPECT_EQ(h.last_events.at(1).n_prompt_cached, 8);
  EXPECT_EQ(h.last_events.at(2).n_prompt_cached, 0);
  EXPECT_EQ(h.sched().stats().n_tokens_prefix_hit, 12 + 8);
  EXPECT_EQ(h.sched().stats().n_tokens_replayed, 2 + 2);
  h.run_to_completion();
  EXPECT_EQ(h.generated.at(2), model_tokens(2, 15, 20));
  EXPECT_EQ(h.generated.at(3), model_tokens(3, 12, 17));
  h.expect_all_free();
}

TEST(SchedulerPrefix, ExactModeReplaysTheReceptiveField) {
  kv::KvConfig c = small_kv(16);
  c.replay = kv::ReplayConfig{.mode = kv::ReplayMode::kExact, .window = 2, .n_layers = 2, .max_overlap = 1};
  Harness h(small_sched(64), c);
  h.add(1, tokens_from(1, 16), 1);
  h.step();
  h.add(2, tokens_from(1, 17), 1);
  const SeqPlan s = h.step().seqs.at(0);
  EXPECT_EQ(s.n_history_cached, 16);
  EXPECT_EQ(s.first_position, 16 - (2 * 1 + 1));
  EXPECT_EQ(s.window_floor, 13);
  EXPECT_EQ(s.n_tokens_scheduled, 4);
}

TEST(SchedulerPrefix, SnapshotAtPromptEndIsRestoredBySamePrompt) {
  Harness h(small_sched(64), small_kv(16, 8, /*n_snapshots=*/2));
  h.add(1, tokens_from(1, 10), 1);
  SeqPlan s = h.step().seqs.at(0);
  EXPECT_EQ(s.n_tokens_scheduled, 8) << "chunk cut at floor((10 - 1) / 4) * 4";
  EXPECT_EQ(s.snapshot_take, 0);
  EXPECT_FALSE(s.needs_logits);
  EXPECT_EQ(h.sched().kv().snapshot_pool().state(0), kv::SnapshotPool::SlotState::kValid);
  s = h.step().seqs.at(0);
  EXPECT_EQ(s.first_position, 8);
  EXPECT_EQ(s.snapshot_take, kv::kNoId);
  EXPECT_TRUE(s.needs_logits);

  h.add(2, tokens_from(1, 10), 3);
  s = h.step().seqs.at(0);
  EXPECT_EQ(s.state_init, StateInit::kRestoreSnapshot);
  EXPECT_EQ(s.snapshot_restore, 0);
  EXPECT_EQ(s.first_position, 8) << "no replay: the state is restored at H";
  EXPECT_EQ(s.n_history_cached, 8);
  EXPECT_EQ(s.window_floor, 0);
  EXPECT_EQ(s.n_tokens_scheduled, 2);
  EXPECT_EQ(s.snapshot_take, kv::kNoId) << "already snapshotted";
  EXPECT_EQ(h.sched().stats().n_snapshot_restores, 1);
  EXPECT_EQ(h.sched().kv().snapshot_pool().n_pins(0), 0) << "unpinned after the step";
  h.run_to_completion();
  EXPECT_EQ(h.generated.at(2), model_tokens(2, 10, 13));
  h.expect_all_free();
}

TEST(SchedulerPrefix, ReplayedHitBoundaryGetsASnapshotForTheNextRequest) {
  kv::KvConfig c = small_kv(16, 8, 2);
  c.snapshot = kv::SnapshotConfig{.at_prompt_end = false, .at_hit_boundary = true, .interval_tokens = 0};
  Harness h(small_sched(64), c);
  h.add(1, tokens_from(1, 13), 1);
  EXPECT_EQ(h.step().seqs.at(0).snapshot_take, kv::kNoId) << "cold prompt: no hit boundary";

  h.add(2, concat(tokens_from(1, 12), tokens_from(50, 5)), 2);
  SeqPlan s = h.step().seqs.at(0);
  EXPECT_EQ(s.first_position, 10);
  EXPECT_EQ(s.n_tokens_scheduled, 2) << "replay [10, 12) ends at the hit boundary";
  EXPECT_EQ(s.snapshot_take, 0);
  EXPECT_FALSE(s.needs_logits);
  s = h.step().seqs.at(0);
  EXPECT_EQ(s.state_init, StateInit::kKeep);
  EXPECT_EQ(s.first_position, 12);
  EXPECT_EQ(s.n_tokens_scheduled, 5);

  h.add(3, concat(tokens_from(1, 12), tokens_from(80, 2)), 1);
  s = h.step().seqs.back();
  EXPECT_EQ(s.seq_id, 3);
  EXPECT_EQ(s.state_init, StateInit::kRestoreSnapshot);
  EXPECT_EQ(s.snapshot_restore, 0);
  EXPECT_EQ(s.first_position, 12);
  EXPECT_EQ(s.window_floor, 10) << "the snapshot's rings start where request 2 replayed from";
  h.run_to_completion();
  h.expect_all_free();
}

TEST(SchedulerPrefix, IntervalSnapshotsAreTakenWhileDecoding) {
  kv::KvConfig c = small_kv(16, 8, 2);
  c.snapshot = kv::SnapshotConfig{.at_prompt_end = false, .at_hit_boundary = false, .interval_tokens = 8};
  Harness h(small_sched(64), c);
  h.add(1, tokens_from(1, 5), 10);
  std::vector<int32_t> take_positions;
  while (h.sched().has_unfinished()) {
    const BatchPlan p = h.step();
    for (const SeqPlan& s : p.seqs) {
      if (s.snapshot_take != kv::kNoId) take_positions.push_back(s.first_position + s.n_tokens_scheduled);
    }
  }
  EXPECT_EQ(take_positions, (std::vector<int32_t>{8})) << "positions reach 14; one interval boundary";
  const kv::SnapshotPool& snaps = h.sched().kv().snapshot_pool();
  EXPECT_EQ(snaps.state(0), kv::SnapshotPool::SlotState::kValid);
  EXPECT_EQ(snaps.info(0).n_tokens, 8);

  // A follow-up turn that extends the first conversation restores at 8.
  Toks turn2 = concat(tokens_from(1, 5), model_tokens(1, 5, 15));
  turn2.push_back(999);
  h.add(2, turn2, 1);
  const SeqPlan s = h.step().seqs.at(0);
  EXPECT_EQ(s.n_history_cached, 12);
  EXPECT_EQ(s.first_position, 10) << "R = 12 - 2 beats restoring at 8 in bounded mode";
  EXPECT_EQ(s.state_init, StateInit::kReset);
}

TEST(SchedulerPrefix, DisabledCachingComputesEverything) {
  kv::KvConfig c = small_kv(16, 8, 2);
  c.enable_prefix_caching = false;
  Harness h(small_sched(64), c);
  h.add(1, tokens_from(1, 12), 1);
  h.step();
  h.add(2, tokens_from(1, 12), 1);
  const SeqPlan s = h.step().seqs.at(0);
  EXPECT_EQ(s.first_position, 0);
  EXPECT_EQ(s.n_tokens_scheduled, 12);
  EXPECT_EQ(s.snapshot_take, kv::kNoId);
  EXPECT_EQ(h.sched().kv().block_pool().n_cached(), 0);
}

// Prompt logprobs (RequestParams::prompt_logits): the request reads no cached prefix although one
// is there, runs its prompt in chunks of at most max_prompt_logits_chunk, and marks the rows each
// followed by a prompt token; planned ahead, the chunks are the same. Its blocks are committed for
// others as usual.
TEST(SchedulerPrefix, PromptLogitsReadNoCachedPrefix) {
  for (const bool ahead : {false, true}) {
    SchedulerConfig sc = small_sched(64);
    sc.max_prompt_logits_chunk = 5;
    Harness h(sc, small_kv(16, 8, 2));
    h.add(1, tokens_from(1, 12), 1);
    h.run_to_completion();
    ASSERT_EQ(h.sched().kv().match_prefix(tokens_from(1, 12), 0).n_tokens_cached, 8) << "a hit is there to take";
    ASSERT_TRUE(h.sched().add_request(RequestParams{2, tokens_from(1, 12), 2, 0, /*prompt_logits=*/true}).is_ok());
    std::vector<std::tuple<int32_t, int32_t, int32_t, bool>> chunks;  // first, n, prompt-logit rows, needs_logits
    while (h.sched().has_unfinished()) {
      const BatchPlan p = ahead ? h.step_ahead() : h.step();
      for (const SeqPlan& s : p.seqs) {
        EXPECT_EQ(s.n_history_cached, 0);
        chunks.emplace_back(s.first_position, s.n_tokens_scheduled, s.n_prompt_logit_rows, s.needs_logits);
      }
    }
    using C = std::tuple<int32_t, int32_t, int32_t, bool>;
    EXPECT_EQ(chunks, (std::vector<C>{{0, 5, 5, false}, {5, 5, 5, false}, {10, 2, 1, true}, {12, 1, 0, true}}))
        << (ahead ? "planned ahead" : "synchronous");
    EXPECT_EQ(h.generated.at(2), model_tokens(2, 12, 14));
    h.expect_all_free();
  }
}

}  // namespace
}  // namespace deepinfer::sched
