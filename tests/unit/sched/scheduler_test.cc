// Scheduler basics with block_tokens = 4: chunked prefill under the token budget, decode-first
// ordering, max_num_seqs and FCFS, length and stop finishes, request/output validation,
// determinism. Exact plans are asserted; Harness checks integrity before and after each step.
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

TEST(Scheduler, ChunkedPrefillThenDecodeUntilLength) {
  Harness h(small_sched(/*budget=*/4), small_kv(16));
  h.add(1, tokens_from(1, 10), /*max_new_tokens=*/3);

  BatchPlan p = h.step();
  ASSERT_EQ(p.seqs.size(), 1u);
  SeqPlan s = p.seqs[0];
  EXPECT_EQ(s.state_slot, 0);
  EXPECT_EQ(s.state_init, StateInit::kReset);
  EXPECT_EQ(s.first_position, 0);
  EXPECT_EQ(s.n_tokens_scheduled, 4);
  EXPECT_FALSE(s.needs_logits);
  EXPECT_EQ(s.token_ids, (Toks{1, 2, 3, 4}));
  EXPECT_TRUE(s.block_table_reset);
  EXPECT_EQ(s.new_block_ids, (Ids{0}));
  EXPECT_TRUE(h.last_events.empty());

  s = h.step().seqs.at(0);
  EXPECT_EQ(s.state_init, StateInit::kKeep);
  EXPECT_EQ(s.first_position, 4);
  EXPECT_EQ(s.n_tokens_scheduled, 4);
  EXPECT_FALSE(s.block_table_reset);
  EXPECT_EQ(s.n_blocks, 2);
  EXPECT_EQ(s.new_block_ids, (Ids{1}));

  s = h.step().seqs.at(0);
  EXPECT_EQ(s.first_position, 8);
  EXPECT_EQ(s.n_tokens_scheduled, 2);
  EXPECT_TRUE(s.needs_logits);
  EXPECT_EQ(s.new_block_ids, (Ids{2}));
  ASSERT_EQ(h.last_events.size(), 1u);
  EXPECT_EQ(h.last_events[0].tokens, (Toks{model_token(1, 10)}));
  EXPECT_EQ(h.sched().find(1)->state, RequestState::kDecode);

  s = h.step().seqs.at(0);
  EXPECT_EQ(s.first_position, 10);
  EXPECT_EQ(s.n_tokens_scheduled, 1);
  EXPECT_EQ(s.token_ids, (Toks{model_token(1, 10)}));
  EXPECT_TRUE(s.new_block_ids.empty());
  EXPECT_EQ(s.n_blocks, 3);

  h.step();
  EXPECT_EQ(h.finished.at(1), FinishReason::kLength);
  EXPECT_EQ(h.generated.at(1), model_tokens(1, 10, 13));
  EXPECT_FALSE(h.sched().has_unfinished());
  p = h.step();
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.finished_ids, (std::vector<SeqId>{1}));
  h.expect_all_free();
}

TEST(Scheduler, DecodesComeFirstThenPrefillChunksFillTheBudget) {
  Harness h(small_sched(/*budget=*/6), small_kv(16));
  h.add(1, tokens_from(1, 5), 10);
  h.step();  // 1: [0, 5) + logits
  h.add(2, tokens_from(100, 9), 10);
  h.add(3, tokens_from(200, 3), 10);
  BatchPlan p = h.step();
  ASSERT_EQ(p.seqs.size(), 2u) << describe(p);
  EXPECT_EQ(p.seqs[0].seq_id, 1);
  EXPECT_EQ(p.seqs[0].n_tokens_scheduled, 1);
  EXPECT_EQ(p.seqs[1].seq_id, 2);
  EXPECT_EQ(p.seqs[1].n_tokens_scheduled, 5) << "the rest of the budget";
  EXPECT_EQ(p.n_tokens_scheduled, 6);
  EXPECT_EQ(h.sched().n_waiting(), 1) << "3 waits: no budget left";

  p = h.step();
  ASSERT_EQ(p.seqs.size(), 3u) << describe(p);
  EXPECT_EQ(p.seqs[0].seq_id, 1);
  EXPECT_EQ(p.seqs[1].seq_id, 2);
  EXPECT_EQ(p.seqs[1].first_position, 5);
  EXPECT_EQ(p.seqs[1].n_tokens_scheduled, 4);
  EXPECT_TRUE(p.seqs[1].needs_logits);
  EXPECT_EQ(p.seqs[2].seq_id, 3);
  EXPECT_EQ(p.seqs[2].n_tokens_scheduled, 1) << "one token of budget left";
  EXPECT_FALSE(p.seqs[2].needs_logits);

  p = h.step();
  ASSERT_EQ(p.seqs.size(), 3u);
  EXPECT_EQ(p.seqs[0].seq_id, 1) << "decodes in admission order";
  EXPECT_EQ(p.seqs[1].seq_id, 2);
  EXPECT_EQ(p.seqs[2].seq_id, 3);
  EXPECT_EQ(p.seqs[2].n_tokens_scheduled, 2);
}

TEST(Scheduler, MaxPrefillChunkCapsOneSequence) {
  SchedulerConfig c = small_sched(/*budget=*/100);
  c.max_prefill_chunk = 3;
  Harness h(c, small_kv(16));
  h.add(1, tokens_from(1, 7), 2);
  EXPECT_EQ(h.step().seqs.at(0).n_tokens_scheduled, 3);
  EXPECT_EQ(h.step().seqs.at(0).n_tokens_scheduled, 3);
  const SeqPlan s = h.step().seqs.at(0);
  EXPECT_EQ(s.n_tokens_scheduled, 1);
  EXPECT_TRUE(s.needs_logits);
}

TEST(Scheduler, MaxNumSeqsKeepsTheRestWaitingInArrivalOrder) {
  Harness h(small_sched(/*budget=*/64, /*max_seqs=*/2), small_kv(32));
  h.add(1, tokens_from(1, 4), 2);
  h.add(2, tokens_from(10, 4), 5);
  h.add(3, tokens_from(20, 4), 5);
  h.add(4, tokens_from(30, 4), 5);
  BatchPlan p = h.step();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].seq_id, 1);
  EXPECT_EQ(p.seqs[1].seq_id, 2);
  EXPECT_EQ(h.sched().waiting(), (std::deque<SeqId>{3, 4}));
  h.step();  // 1 generates its second token and finishes
  EXPECT_EQ(h.finished.at(1), FinishReason::kLength);
  p = h.step();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].seq_id, 2);
  EXPECT_EQ(p.seqs[1].seq_id, 3);
  EXPECT_EQ(p.seqs[1].state_slot, 0) << "1's slot is reused";
  EXPECT_EQ(p.finished_ids, (std::vector<SeqId>{1}));
  h.run_to_completion();
  h.expect_all_free();
}

TEST(Scheduler, StateSlotsBoundRunningSequences) {
  Harness h(small_sched(64), small_kv(32, /*n_slots=*/1));
  h.add(1, tokens_from(1, 4), 3);
  h.add(2, tokens_from(10, 4), 3);
  EXPECT_EQ(h.step().seqs.size(), 1u);
  EXPECT_EQ(h.sched().n_waiting(), 1);
  h.run_to_completion();
  EXPECT_EQ(h.generated.at(2), model_tokens(2, 4, 7));
  h.expect_all_free();
}

TEST(Scheduler, MaxModelLenEndsWithLength) {
  SchedulerConfig c = small_sched(64);
  c.max_model_len = 12;
  Harness h(c, small_kv(32));
  EXPECT_EQ(h.sched().max_seq_tokens(), 12);
  h.add(1, tokens_from(1, 10), 0);
  h.run_to_completion();
  EXPECT_EQ(h.generated.at(1), model_tokens(1, 10, 12));
  EXPECT_EQ(h.finished.at(1), FinishReason::kLength);
  // The pool bounds it too: 3 blocks of 4 hold at most 12 tokens.
  Harness small(small_sched(64), small_kv(3));
  EXPECT_EQ(small.sched().max_seq_tokens(), 12);
}

TEST(Scheduler, EngineStopAndFinishApi) {
  Harness h(small_sched(64), small_kv(32));
  h.runner().stop_token = model_token(1, 6);
  h.add(1, tokens_from(1, 4), 100);
  h.add(2, tokens_from(10, 4), 100);
  for (int i = 0; i < 4; ++i) h.step();  // 1 stops at its third token; 2 keeps going
  EXPECT_EQ(h.finished.at(1), FinishReason::kStop);
  EXPECT_EQ(h.generated.at(1), model_tokens(1, 4, 7)) << "the stop token is emitted";
  EXPECT_TRUE(h.sched().finish(2, FinishReason::kStop).is_ok());
  EXPECT_EQ(h.sched().find(2), nullptr);
  const BatchPlan p = h.step();
  EXPECT_EQ(p.finished_ids, (std::vector<SeqId>{2}));
  EXPECT_EQ(h.sched().finish(2, FinishReason::kStop).code(), StatusCode::kNotFound);
  h.expect_all_free();
}

TEST(Scheduler, AddRequestRejectsBadInputWithTheRequestId) {
  SchedulerConfig c = small_sched(64);
  c.max_model_len = 8;
  Harness h(c, small_kv(32));
  h.add(1, tokens_from(1, 4), 1);
  Status s = h.sched().add_request(RequestParams{1, tokens_from(1, 4), 1, 0});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("request 1"), std::string::npos);
  EXPECT_EQ(h.sched().add_request(RequestParams{2, {}, 1, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(h.sched().add_request(RequestParams{3, {1, -5}, 1, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(h.sched().add_request(RequestParams{4, tokens_from(1, 8), 1, 0}).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(h.sched().add_request(RequestParams{5, tokens_from(1, 7), -1, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(h.sched().add_request(RequestParams{6, tokens_from(1, 7), 0, 0}).is_ok());
  EXPECT_FALSE(Scheduler::create(small_sched(0), small_kv(4)).is_ok());
  EXPECT_FALSE(Scheduler::create(small_sched(8), small_kv(0)).is_ok());
}

TEST(Scheduler, UpdateRejectsMismatchedOutputsAndChangesNothing) {
  Harness h(small_sched(64), small_kv(32));
  h.add(1, tokens_from(1, 4), 5);
  h.add(2, tokens_from(10, 6), 5);
  const BatchPlan p = h.sched().schedule();
  ASSERT_EQ(p.seqs.size(), 2u);
  std::vector<SeqOutput> good = {{1, {7}, FinishReason::kNone}, {2, {8}, FinishReason::kNone}};
  std::vector<SeqOutput> bad = good;
  bad.pop_back();
  EXPECT_EQ(h.sched().update(p, bad).status().code(), StatusCode::kInvalidArgument);
  bad = good;
  bad[1].seq_id = 3;
  EXPECT_EQ(h.sched().update(p, bad).status().code(), StatusCode::kInvalidArgument);
  bad = good;
  bad[0].tokens = {7, 9};
  EXPECT_EQ(h.sched().update(p, bad).status().code(), StatusCode::kInvalidArgument) << "no drafts";
  bad = good;
  bad[1].tokens.clear();
  EXPECT_EQ(h.sched().update(p, bad).status().code(), StatusCode::kInvalidArgument) << "logits expected";
  BatchPlan other = p;
  other.step_id += 1;
  EXPECT_EQ(h.sched().update(other, good).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.sched().find(1)->n_tokens(), 4);
  EXPECT_TRUE(h.sched().check_integrity().is_ok());
  Result<std::vector<SeqEvent>> ev = h.sched().update(p, good);
  ASSERT_TRUE(ev.is_ok()) << ev.status().to_string();
  EXPECT_EQ(ev->size(), 2u);
  EXPECT_EQ(h.sched().find(2)->tokens.back(), 8);
  EXPECT_EQ(h.sched().update(p, good).status().code(), StatusCode::kFailedPrecondition) << "applied once";
}

TEST(Scheduler, IdenticalInputsGiveIdenticalPlans) {
  auto run = [] {
    Harness h(small_sched(7, 3), small_kv(10, 3, 2));
    for (SeqId id = 1; id <= 6; ++id) h.add(id, tokens_from(static_cast<TokenId>(id % 2), 5 + 3 * static_cast<int32_t>(id)), 6);
    h.run_to_completion();
    return h.log;
  };
  const std::string a = run();
  EXPECT_EQ(a, run());
  EXPECT_GT(a.size(), 200u);
}

}  // namespace
}  // namespace deepinfer::sched
