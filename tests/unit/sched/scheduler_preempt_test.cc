// Preemption by recompute (victim choice, freed blocks, readmission through the prefix cache),
// abort mid-prefill / mid-decode / in flight / while waiting, and speculative lookahead with
// rollback of rejected drafts. block_tokens = 4.
#include <gtest/gtest.h>

#include "fake_runner.h"

namespace deepinfer::sched {
namespace {

using testing::Harness;
using testing::model_token;
using testing::model_tokens;
using testing::small_kv;
using testing::small_sched;
using testing::tokens_from;
using Ids = std::vector<kv::BlockId>;
using Toks = std::vector<TokenId>;
using SeqIds = std::vector<SeqId>;

TEST(SchedulerPreempt, MostRecentlyAdmittedIsPreemptedAndReadmittedFromTheCache) {
  Harness h(small_sched(64), small_kv(/*n_blocks=*/6));
  h.add(1, tokens_from(1, 8), 6);
  h.add(2, tokens_from(100, 8), 6);
  BatchPlan p = h.step();
  EXPECT_EQ(p.seqs.at(0).new_block_ids, (Ids{0, 1}));
  EXPECT_EQ(p.seqs.at(1).new_block_ids, (Ids{2, 3}));
  p = h.step();  // position 8 opens a third block for each
  EXPECT_EQ(p.seqs.at(0).new_block_ids, (Ids{4}));
  EXPECT_EQ(p.seqs.at(1).new_block_ids, (Ids{5}));
  for (int i = 0; i < 3; ++i) h.step();  // positions 9..11

  // Position 12 needs a fourth block for 1; the pool is empty, so 2 (admitted last) goes.
  p = h.step();
  ASSERT_EQ(p.seqs.size(), 1u) << describe(p);
  EXPECT_EQ(p.seqs[0].seq_id, 1);
  EXPECT_EQ(p.seqs[0].new_block_ids, (Ids{5})) << "2's cached tail block, evicted";
  EXPECT_EQ(p.preempted_ids, (SeqIds{2}));
  EXPECT_EQ(h.sched().stats().n_preemptions, 1);
  EXPECT_EQ(h.finished.at(1), FinishReason::kLength);
  const kv::BlockPool& pool = h.sched().kv().block_pool();
  EXPECT_EQ(pool.free_list(), (Ids{5, 3, 2, 4, 1, 0}));

  // 2 restarts: blocks 2 and 3 are still cached (its third block was evicted), R = 8 - 2.
  p = h.step();
  ASSERT_EQ(p.seqs.size(), 1u);
  const SeqPlan& s = p.seqs[0];
  EXPECT_EQ(p.finished_ids, (SeqIds{1}));
  EXPECT_EQ(s.seq_id, 2);
  EXPECT_EQ(s.state_init, StateInit::kReset);
  EXPECT_EQ(s.n_history_cached, 8);
  EXPECT_EQ(s.first_position, 6);
  EXPECT_EQ(s.n_tokens_scheduled, 7) << "replay [6, 8) + the 5 generated tokens' positions";
  EXPECT_TRUE(s.needs_logits);
  EXPECT_TRUE(s.block_table_reset);
  EXPECT_EQ(s.new_block_ids, (Ids{2, 3, 5, 4}));
  EXPECT_EQ(h.generated.at(2), model_tokens(2, 8, 14)) << "recompute yields the same tokens";
  EXPECT_EQ(h.finished.at(2), FinishReason::kLength);
  h.expect_all_free();
}

TEST(SchedulerPreempt, PrefillWithoutRoomPreemptsItselfWhenItIsTheNewest) {
  Harness h(small_sched(/*budget=*/4), small_kv(4));
  h.add(1, tokens_from(1, 4), 12);   // grows to 16 tokens: the whole pool
  h.add(2, tokens_from(50, 10), 1);
  h.step();  // 1: prefill [0, 4) in block 0; the budget is spent
  BatchPlan p = h.step();
  ASSERT_EQ(p.seqs.size(), 2u) << describe(p);
  EXPECT_EQ(p.seqs[0].new_block_ids, (Ids{1}));
  EXPECT_EQ(p.seqs[1].new_block_ids, (Ids{2})) << "2 gets a 3-token chunk";
  p = h.step();
  EXPECT_EQ(p.seqs.at(1).new_block_ids, (Ids{3})) << "chunk [3, 6): the pool is full";
  p = h.step();  // 2's chunk [6, 9) needs a block; 2 is the newest, so it preempts itself
  EXPECT_EQ(p.preempted_ids, (SeqIds{2}));
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].seq_id, 1);
  EXPECT_EQ(h.sched().waiting().front(), 2);
  EXPECT_EQ(h.sched().find(2)->state, RequestState::kPreempted);
  EXPECT_EQ(h.sched().find(2)->n_preemptions, 1);
  EXPECT_EQ(h.sched().kv().block_pool().free_list(), (Ids{3, 2})) << "partial block first";
  h.run_to_completion();
  EXPECT_EQ(h.generated.at(1), model_tokens(1, 4, 16));
  EXPECT_EQ(h.generated.at(2), model_tokens(2, 10, 11));
  h.expect_all_free();
}

TEST(SchedulerAbort, MidPrefillBetweenSteps) {
  Harness h(small_sched(/*budget=*/4), small_kv(8));
  h.add(1, tokens_from(1, 12), 4);
  h.step();
  EXPECT_TRUE(h.sched().abort(1).is_ok());
  EXPECT_EQ(h.sched().find(1), nullptr);
  h.expect_all_free();
  const BatchPlan p = h.step();
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.aborted_ids, (SeqIds{1}));
  EXPECT_EQ(h.sched().abort(1).code(), StatusCode::kNotFound);
}

TEST(SchedulerAbort, InFlightIsDeferredToUpdateAndDropsTheResults) {
  Harness h(small_sched(/*budget=*/64), small_kv(8, 4, 2));
  h.add(1, tokens_from(1, 4), 4);
  h.add(2, tokens_from(10, 10), 4);  // first chunk ends at the prompt-end snapshot boundary 8
  BatchPlan p = h.step([&] {
    EXPECT_TRUE(h.sched().abort(2).is_ok());
    EXPECT_NE(h.sched().find(2), nullptr) << "still owned by the step in flight";
    EXPECT_TRUE(h.sched().abort(2).is_ok()) << "a repeated abort is harmless";
  });
  EXPECT_EQ(p.seqs.at(1).snapshot_take, 0);
  EXPECT_EQ(h.sched().find(2), nullptr);
  ASSERT_EQ(h.last_events.size(), 1u);
  EXPECT_EQ(h.last_events[0].seq_id, 1);
  EXPECT_EQ(h.sched().kv().snapshot_pool().state(0), kv::SnapshotPool::SlotState::kFree)
      << "the aborted step's snapshot is cancelled";
  EXPECT_EQ(h.sched().kv().block_pool().n_cached(), 1) << "only 1's computed block; 2 committed nothing";

  p = h.step([&] { EXPECT_TRUE(h.sched().abort(1).is_ok()); });  // mid-decode, in flight
  EXPECT_EQ(p.aborted_ids, (SeqIds{2}));
  EXPECT_TRUE(h.last_events.empty());
  EXPECT_EQ(h.step().aborted_ids, (SeqIds{1}));
  h.expect_all_free();
}

TEST(SchedulerAbort, MidDecodeAndWhileWaiting) {
  Harness h(small_sched(64, /*max_seqs=*/1), small_kv(8));
  h.add(1, tokens_from(1, 5), 10);
  h.add(2, tokens_from(20, 5), 10);
  h.step();
  h.step();
  EXPECT_EQ(h.sched().find(1)->state, RequestState::kDecode);
  EXPECT_TRUE(h.sched().abort(2).is_ok()) << "waiting";
  EXPECT_TRUE(h.sched().waiting().empty());
  EXPECT_TRUE(h.sched().abort(1).is_ok()) << "decoding";
  h.expect_all_free();
  const BatchPlan p = h.step();
  EXPECT_EQ(p.aborted_ids, (SeqIds{2, 1}));
  EXPECT_FALSE(h.sched().has_unfinished());
}

TEST(SchedulerSpec, DraftsReserveLookaheadAndRejectedOnesRollBack) {
  SchedulerConfig c = small_sched(64);
  c.max_draft_tokens = 3;
  Harness h(c, small_kv(16));
  h.add(1, tokens_from(1, 6), 20);
  h.step();
  const Toks drafts = {model_token(1, 7), model_token(1, 8) + 1, 5};
  ASSERT_TRUE(h.sched().set_draft_tokens(1, drafts).is_ok());
  SeqPlan s = h.step().seqs.at(0);
  EXPECT_EQ(s.first_position, 6);
  EXPECT_EQ(s.n_tokens_scheduled, 4);
  EXPECT_EQ(s.n_draft_tokens, 3);
  EXPECT_EQ(s.token_ids, (Toks{model_token(1, 6), drafts[0], drafts[1], drafts[2]}));
  EXPECT_EQ(s.new_block_ids, (Ids{2})) << "positions 6..9 reach a third block";
  ASSERT_EQ(h.last_events.size(), 1u);
  EXPECT_EQ(h.last_events[0].tokens, (Toks{model_token(1, 7), model_token(1, 8)}));
  EXPECT_EQ(h.last_events[0].n_drafts_accepted, 1);
  EXPECT_EQ(h.sched().find(1)->n_computed, 8);
  const auto table = h.sched().block_table(1);
  EXPECT_EQ(Ids(table.begin(), table.end()), (Ids{0, 1})) << "the lookahead block went back";
  EXPECT_EQ(h.sched().kv().block_pool().free_list().front(), 2);

  s = h.step().seqs.at(0);  // no drafts this time
  EXPECT_EQ(s.first_position, 8);
  EXPECT_EQ(s.n_tokens_scheduled, 1);
  EXPECT_EQ(s.n_blocks, 3);
  EXPECT_EQ(s.new_block_ids, (Ids{2}));

  ASSERT_TRUE(h.sched().set_draft_tokens(1, model_tokens(1, 10, 13)).is_ok());
  s = h.step().seqs.at(0);
  EXPECT_EQ(s.n_draft_tokens, 3);
  EXPECT_EQ(h.last_events.at(0).n_drafts_accepted, 3);
  EXPECT_EQ(h.sched().find(1)->n_computed, 13);
  h.run_to_completion();
  EXPECT_EQ(h.generated.at(1), model_tokens(1, 6, 26));
  h.expect_all_free();
}

TEST(SchedulerSpec, DraftCountRespectsBudgetLengthAndPrefill) {
  SchedulerConfig c = small_sched(/*budget=*/3);
  c.max_draft_tokens = 5;
  Harness h(c, small_kv(16));
  h.add(1, tokens_from(1, 3), 4);
  ASSERT_TRUE(h.sched().set_draft_tokens(1, Toks{1, 2}).is_ok());
  EXPECT_EQ(h.step().seqs.at(0).n_draft_tokens, 0) << "prefill ignores drafts";
  ASSERT_TRUE(h.sched().set_draft_tokens(1, Toks{1, 2, 3, 4, 5}).is_ok());
  EXPECT_EQ(h.step().seqs.at(0).n_draft_tokens, 2) << "budget 3 = 1 + 2 drafts";
  // 1 + 2 tokens generated at most so far; max_new_tokens 4 leaves room for at most 1 + 0.
  const int32_t n_left = 4 - h.sched().find(1)->n_generated();
  ASSERT_TRUE(h.sched().set_draft_tokens(1, Toks{1, 2, 3, 4, 5}).is_ok());
  EXPECT_EQ(h.step().seqs.at(0).n_draft_tokens, std::min(2, n_left - 1));
  EXPECT_EQ(h.sched().set_draft_tokens(99, Toks{1}).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace deepinfer::sched
