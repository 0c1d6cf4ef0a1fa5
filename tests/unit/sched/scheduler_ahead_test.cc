// Scheduler::schedule_ahead (asynchronous scheduling) with block_tokens = 4: the plan for step n + 1
// made while step n is in flight continues every decode one position with the device's token, every
// prompt with its next chunk (snapshots at its boundaries included), and admits waiting requests
// into the slots free now; a run scheduled ahead generates exactly what the
// synchronous run generates, with the same finishes and everything freed, also with requests
// arriving during the run; a request that ends while the plan ahead holds it is released at once
// and its row there ignored; a snapshot is planned ahead of a pending one; and the plan declines
// wherever step n's results could change step n + 1.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "fake_runner.h"

namespace deepinfer::sched {
namespace {

using testing::Harness;
using testing::small_kv;
using testing::small_sched;
using testing::tokens_from;

// Runs both to completion (the second planning ahead wherever it can) and expects the same tokens
// and finishes, and everything freed.
void expect_ahead_generates_the_same(Harness& sync, Harness& async, const std::string& what) {
  sync.run_to_completion();
  async.run_ahead_to_completion();
  EXPECT_GT(async.n_ahead, 0) << what;
  EXPECT_EQ(async.generated, sync.generated) << what << "\n" << async.log;
  EXPECT_EQ(async.finished, sync.finished) << what;
  async.expect_all_free();
}

// Step n scheduled and the step after it planned ahead, both run on the fake device in the engine's
// order (n, then the plan ahead), neither updated yet; `arrive` runs in between (requests that
// arrive while step n is in flight).
struct TwoInFlight {
  BatchPlan n, ahead;
  std::vector<SeqOutput> out, ahead_out;
};
TwoInFlight plan_two(Harness& h, const std::function<void()>& arrive = [] {}) {
  TwoInFlight t;
  t.n = h.sched().schedule();
  t.out = h.runner().run(t.n);
  arrive();
  t.ahead = h.sched().schedule_ahead(t.n);
  if (!t.ahead.empty()) t.ahead_out = h.runner().run(t.ahead);
  return t;
}

// A plan ahead of two rows: request 1 decoding the device's token, then request 2 running `ids`
// from the host at `first` (an admission's prompt, a prompt's next chunk).
void expect_decode_then_host_row(const BatchPlan& ahead, int32_t first, const std::vector<TokenId>& ids,
                                 bool needs_logits, StateInit init) {
  EXPECT_EQ(ahead.seqs[0].seq_id, 1u);
  EXPECT_TRUE(ahead.seqs[0].token_from_device);
  const SeqPlan& row = ahead.seqs[1];
  EXPECT_EQ(row.seq_id, 2u);
  EXPECT_FALSE(row.token_from_device);
  EXPECT_EQ(row.first_position, first);
  EXPECT_EQ(row.n_tokens_scheduled, static_cast<int32_t>(ids.size()));
  EXPECT_EQ(row.token_ids, ids);
  EXPECT_EQ(row.needs_logits, needs_logits);
  EXPECT_EQ(row.state_init, init);
}

// Prompts reach decode, then run together: the plans made ahead carry the device's token.
TEST(SchedulerAhead, ContinuesEveryDecodeWithTheDevicesToken) {
  Harness h(small_sched(/*budget=*/16), small_kv(32));
  h.add(1, tokens_from(1, 6), 20);
  h.add(2, tokens_from(100, 3), 20);
  h.step();  // both prompts and their first tokens
  BatchPlan n = h.sched().schedule();
  ASSERT_EQ(n.seqs.size(), 2u);
  std::vector<SeqOutput> out = h.runner().run(n);
  BatchPlan ahead = h.sched().schedule_ahead(n);
  ASSERT_EQ(ahead.seqs.size(), 2u) << describe(ahead);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(ahead.seqs[i].seq_id, n.seqs[i].seq_id);
    EXPECT_TRUE(ahead.seqs[i].token_from_device);
    EXPECT_EQ(ahead.seqs[i].first_position, n.seqs[i].first_position + 1);
    EXPECT_EQ(ahead.seqs[i].n_tokens_scheduled, 1);
    EXPECT_TRUE(ahead.seqs[i].needs_logits);
    EXPECT_EQ(ahead.seqs[i].state_init, StateInit::kKeep);
  }
  EXPECT_GT(ahead.step_id, n.step_id);
  // Only one plan may be ahead, and only of the oldest plan in flight.
  EXPECT_TRUE(h.sched().schedule_ahead(n).empty());
  EXPECT_TRUE(h.sched().schedule_ahead(ahead).empty());
  // Updates go in order: the plan ahead is not the oldest yet.
  EXPECT_FALSE(h.sched().update(ahead, h.runner().run(ahead)).is_ok());
  ASSERT_TRUE(h.sched().update(n, out).is_ok());
  EXPECT_TRUE(h.sched().check_integrity().is_ok());
}

// Same workload, synchronous and ahead: same tokens, same finishes, everything freed; length
// finishes are foreseen (no plan ahead runs a request past its last token).
TEST(SchedulerAhead, GeneratesWhatTheSynchronousRunGenerates) {
  for (TokenId stop : {TokenId{-1}, testing::model_token(2, 9)}) {
   for (int32_t max_seqs : {8, 2}) {  // 2: a queue waits while the running requests decode ahead
    Harness sync(small_sched(/*budget=*/8, max_seqs), small_kv(24));
    Harness async(small_sched(/*budget=*/8, max_seqs), small_kv(24));
    for (Harness* h : {&sync, &async}) {
      h->runner().stop_token = stop;
      h->add(1, tokens_from(1, 5), 7);
      h->add(2, tokens_from(50, 3), 12);
      h->add(3, tokens_from(80, 9), 4);
      h->add(4, tokens_from(120, 2), 9);
    }
    expect_ahead_generates_the_same(sync, async, "stop token " + std::to_string(stop));
    if (stop >= 0) {
      EXPECT_EQ(async.finished.at(2), FinishReason::kStop);
    }
   }
  }
}

// A request that the step in flight ends (an engine stop) while the plan ahead also holds it is
// released with that step's update, its event and its freed resources together (the device runs
// the plan ahead before anything planned later reuses them); the plan ahead's row for it is ignored,
// and the plan made ahead of that one runs nothing for it.
TEST(SchedulerAhead, EndedRequestIsReleasedAndItsRowAheadIgnored) {
  Harness h(small_sched(/*budget=*/16), small_kv(32));
  h.add(1, tokens_from(1, 4), 30);
  h.add(2, tokens_from(40, 4), 30);
  h.step();
  auto [n, ahead, out, ahead_out] = plan_two(h);
  ASSERT_EQ(ahead.seqs.size(), 2u);
  out[0].finish = FinishReason::kStop;  // the engine saw a stop in request 1's token
  Result<std::vector<SeqEvent>> ev = h.sched().update(n, out);
  ASSERT_TRUE(ev.is_ok()) << ev.status().to_string();
  ASSERT_EQ(ev->size(), 2u);
  EXPECT_EQ((*ev)[0].finish, FinishReason::kStop);
  EXPECT_EQ(h.sched().find(1), nullptr);
  EXPECT_FALSE(h.sched().kv().contains(1));
  EXPECT_TRUE(h.sched().check_integrity().is_ok());
  // The plan ahead of the plan ahead (the engine's next step) runs nothing for request 1, gone
  // now, and reports its end.
  BatchPlan after = h.sched().schedule_ahead(ahead);
  ASSERT_EQ(after.seqs.size(), 1u) << describe(after);
  EXPECT_EQ(after.seqs[0].seq_id, 2u);
  EXPECT_TRUE(after.seqs[0].token_from_device);
  EXPECT_EQ(after.finished_ids, (std::vector<SeqId>{1}));
  std::vector<SeqOutput> after_out = h.runner().run(after);
  // Its row of the plan ahead comes back empty (the engine dropped the sequence), or with a token:
  // ignored either way.
  ev = h.sched().update(ahead, ahead_out);
  ASSERT_TRUE(ev.is_ok()) << ev.status().to_string();
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_EQ((*ev)[0].seq_id, 2u);
  EXPECT_TRUE(h.sched().check_integrity().is_ok());
  ASSERT_TRUE(h.sched().update(after, after_out).is_ok());
  EXPECT_TRUE(h.sched().check_integrity().is_ok());
  EXPECT_EQ(h.sched().find(2)->n_generated(), 4);  // steps: the prompts', n, ahead, after
}

// An abort while two plans hold the request is deferred to the first plan's update, as with one.
TEST(SchedulerAhead, AbortWhileTwoPlansHoldTheRequest) {
  Harness h(small_sched(/*budget=*/16), small_kv(32));
  h.add(1, tokens_from(1, 4), 30);
  h.step();
  auto [n, ahead, out, ahead_out] = plan_two(h);
  ASSERT_EQ(ahead.seqs.size(), 1u);
  ASSERT_TRUE(h.sched().abort(1).is_ok());
  EXPECT_TRUE(h.sched().kv().contains(1));  // step n still runs on its blocks
  ASSERT_TRUE(h.sched().update(n, out).is_ok());
  EXPECT_FALSE(h.sched().kv().contains(1));
  Result<std::vector<SeqEvent>> ev = h.sched().update(ahead, ahead_out);
  ASSERT_TRUE(ev.is_ok()) << ev.status().to_string();
  EXPECT_TRUE(ev->empty());
  EXPECT_EQ(h.sched().schedule().aborted_ids, (std::vector<SeqId>{1}));
  h.expect_all_free();
}

// With every sequence slot taken, a waiting request could not be admitted in step n + 1 anyway:
// the running ones are planned ahead; once one ends, the queue's head is admitted by schedule().
TEST(SchedulerAhead, AFullHousePlansAheadWhileTheQueueWaits) {
  Harness h(small_sched(/*budget=*/16, /*max_seqs=*/1), small_kv(32));
  h.add(1, tokens_from(1, 4), 3);
  h.add(2, tokens_from(40, 4), 3);
  h.step();  // request 1's prompt and first token; request 2 waits
  ASSERT_EQ(h.sched().n_waiting(), 1);
  auto [n, ahead, out, ahead_out] = plan_two(h);
  // Request 1's token of step n is its 2nd of 3: the 3rd is still to come, so it is planned ahead.
  ASSERT_EQ(ahead.seqs.size(), 1u) << describe(ahead);
  EXPECT_EQ(ahead.seqs[0].seq_id, 1u);
  ASSERT_TRUE(h.sched().update(n, out).is_ok());
  EXPECT_TRUE(h.sched().schedule_ahead(ahead).empty());  // its next token is its last
  ASSERT_TRUE(h.sched().update(ahead, ahead_out).is_ok());
  EXPECT_EQ(h.sched().find(1), nullptr);                  // finished by length
  const BatchPlan next = h.sched().schedule();            // admits request 2
  ASSERT_EQ(next.seqs.size(), 1u);
  EXPECT_EQ(next.seqs[0].seq_id, 2u);
  ASSERT_TRUE(h.sched().update(next, h.runner().run(next)).is_ok());
}

// The step after an admission: a prompt's last chunk (here the whole prompt, beside a decode) is
// followed by its first decode step, planned ahead at the position of the token it samples, the
// table grown to cover it.
TEST(SchedulerAhead, APromptsLastChunkIsFollowedByItsFirstDecode) {
  Harness h(small_sched(/*budget=*/16), small_kv(32));
  h.add(1, tokens_from(1, 4), 30);
  h.step();  // request 1 decoding
  h.add(2, tokens_from(40, 7), 30);
  auto [n, ahead, out, ahead_out] = plan_two(h);  // request 1's decode + request 2's whole prompt
  ASSERT_EQ(n.seqs.size(), 2u);
  EXPECT_EQ(n.seqs[1].n_tokens_scheduled, 7);
  EXPECT_TRUE(n.seqs[1].needs_logits);
  ASSERT_EQ(ahead.seqs.size(), 2u) << describe(ahead);
  const SeqPlan& first_decode = ahead.seqs[1];
  EXPECT_EQ(first_decode.seq_id, 2u);
  EXPECT_TRUE(first_decode.token_from_device);
  EXPECT_EQ(first_decode.first_position, 7);
  EXPECT_EQ(first_decode.n_tokens_scheduled, 1);
  EXPECT_EQ(first_decode.state_init, StateInit::kKeep);
  EXPECT_EQ(first_decode.n_blocks, 2);  // positions [0, 8) in blocks of 4
  ASSERT_TRUE(h.sched().update(n, out).is_ok());
  ASSERT_TRUE(h.sched().update(ahead, ahead_out).is_ok());
  EXPECT_EQ(h.sched().find(2)->n_computed, 8);
  EXPECT_EQ(h.sched().find(2)->n_tokens(), 9);
  EXPECT_TRUE(h.sched().check_integrity().is_ok());
}

// A request that arrives while a slot is free is admitted into the plan ahead as schedule() would
// admit it — after the decodes, its prompt from the host, a fresh state — and the plan after
// continues it with its first decode.
TEST(SchedulerAhead, AWaitingRequestIsAdmittedIntoThePlanAhead) {
  Harness h(small_sched(/*budget=*/16), small_kv(32));
  h.add(1, tokens_from(1, 4), 30);
  h.step();
  auto [n, ahead, out, ahead_out] = plan_two(h, [&] { h.add(2, tokens_from(40, 6), 30); });
  ASSERT_EQ(ahead.seqs.size(), 2u) << describe(ahead);
  expect_decode_then_host_row(ahead, /*first=*/0, tokens_from(40, 6), /*needs_logits=*/true, StateInit::kReset);
  EXPECT_TRUE(ahead.seqs[1].block_table_reset);
  EXPECT_EQ(ahead.n_tokens_scheduled, 7);
  EXPECT_EQ(h.sched().n_waiting(), 0);
  ASSERT_TRUE(h.sched().update(n, out).is_ok());
  // The step after: both decode, request 2 at the position of the token the plan ahead samples.
  BatchPlan after = h.sched().schedule_ahead(ahead);
  ASSERT_EQ(after.seqs.size(), 2u) << describe(after);
  EXPECT_EQ(after.seqs[1].seq_id, 2u);
  EXPECT_EQ(after.seqs[1].first_position, 6);
  EXPECT_TRUE(after.seqs[1].token_from_device);
  std::vector<SeqOutput> after_out = h.runner().run(after);  // run as planned: before ahead's update
  ASSERT_TRUE(h.sched().update(ahead, ahead_out).is_ok());
  ASSERT_TRUE(h.sched().update(after, after_out).is_ok());
  EXPECT_EQ(h.sched().find(2)->n_tokens(), 8);
  EXPECT_TRUE(h.sched().check_integrity().is_ok());
}

// Admissions ahead take only what is free while the plan in flight runs: no slot (max_num_seqs)
// or no blocks for the newcomer leave it waiting while the decodes go on ahead; when every request
// of the plan in flight ends by length, a plan ahead of admissions alone runs beside it.
TEST(SchedulerAhead, AdmissionsAheadTakeOnlyWhatIsFree) {
  {  // no free slot: the decode goes ahead alone
    Harness h(small_sched(/*budget=*/16, /*max_seqs=*/1), small_kv(32));
    h.add(1, tokens_from(1, 4), 30);
    h.step();
    auto [n, ahead, out, ahead_out] = plan_two(h, [&] { h.add(2, tokens_from(40, 4), 30); });
    ASSERT_EQ(ahead.seqs.size(), 1u) << describe(ahead);
    EXPECT_EQ(h.sched().n_waiting(), 1);
    ASSERT_TRUE(h.sched().update(n, out).is_ok());
    ASSERT_TRUE(h.sched().update(ahead, ahead_out).is_ok());
  }
  {  // blocks for the decodes but not for the newcomer's prompt
    Harness h(small_sched(/*budget=*/16), small_kv(3));
    h.add(1, tokens_from(1, 4), 30);
    h.step();  // positions [0, 4) in one block, token 4 sampled
    // Step n: position 4, a second block; request 2 needs two, one is left after the decode ahead.
    auto [n, ahead, out, ahead_out] = plan_two(h, [&] { h.add(2, tokens_from(40, 8), 30); });
    ASSERT_EQ(ahead.seqs.size(), 1u) << describe(ahead);
    EXPECT_EQ(ahead.seqs[0].seq_id, 1u);
    EXPECT_EQ(h.sched().n_waiting(), 1);
    ASSERT_TRUE(h.sched().update(n, out).is_ok());
    ASSERT_TRUE(h.sched().update(ahead, ahead_out).is_ok());
    EXPECT_TRUE(h.sched().check_integrity().is_ok());
  }
  {  // the request in flight ends by length: the plan ahead only admits
    Harness h(small_sched(/*budget=*/16), small_kv(32));
    h.add(1, tokens_from(1, 4), 2);
    h.step();  // token 1 of 2; step n samples token 2, the last
    auto [n, ahead, out, ahead_out] = plan_two(h, [&] { h.add(2, tokens_from(40, 4), 30); });
    ASSERT_EQ(ahead.seqs.size(), 1u) << describe(ahead);
    EXPECT_EQ(ahead.seqs[0].seq_id, 2u);
    EXPECT_EQ(ahead.seqs[0].n_tokens_scheduled, 4);
    ASSERT_TRUE(h.sched().update(n, out).is_ok());
    EXPECT_EQ(h.sched().find(1), nullptr);
    ASSERT_TRUE(h.sched().update(ahead, ahead_out).is_ok());
    EXPECT_EQ(h.sched().find(2)->n_tokens(), 5);
    EXPECT_TRUE(h.sched().check_integrity().is_ok());
  }
}

// Requests arriving while the run goes on (each at the same step of both runs): the asynchronous
// run, which admits them into plans made ahead, generates what the synchronous one does.
TEST(SchedulerAhead, ArrivalsDuringTheRunGenerateWhatTheSynchronousRunGenerates) {
  for (int32_t max_seqs : {8, 3}) {
    Harness sync(small_sched(/*budget=*/8, max_seqs), small_kv(32));
    Harness async(small_sched(/*budget=*/8, max_seqs), small_kv(32));
    for (Harness* h : {&sync, &async}) {
      h->add(1, tokens_from(1, 5), 9);
      for (int i = 0; i < 14; ++i) {
        if (i == 2) h->add(2, tokens_from(50, 3), 6);
        if (i == 3) h->add(3, tokens_from(80, 12), 5);  // two chunks at budget 8
        if (i == 5) h->add(4, tokens_from(120, 2), 7);
        if (i == 6) h->add(5, tokens_from(160, 4), 3);
        if (h == &sync) {
          if (h->sched().has_unfinished()) h->step();
        } else {
          h->step_ahead();
        }
      }
    }
    expect_ahead_generates_the_same(sync, async, "max_seqs " + std::to_string(max_seqs));
  }
}

// A long prompt chunked beside a decode: the plan ahead continues the decode with the device's token
// and the prompt with its next chunk from the host (the budget as schedule() spends it: decodes
// first), and after the prompt's last chunk its first decode; every plan of the run but the first
// is made ahead.
TEST(SchedulerAhead, PromptChunksArePlannedAhead) {
  Harness h(small_sched(/*budget=*/5), small_kv(32));
  h.add(1, tokens_from(1, 3), 30);
  h.step();  // request 1 decoding
  h.add(2, tokens_from(40, 13), 30);
  auto [n, ahead, out, ahead_out] = plan_two(h);  // decode + [0, 4) of request 2
  ASSERT_EQ(n.seqs.size(), 2u);
  EXPECT_FALSE(n.seqs[1].needs_logits);
  ASSERT_EQ(ahead.seqs.size(), 2u) << describe(ahead);
  expect_decode_then_host_row(ahead, /*first=*/4, tokens_from(44, 4), /*needs_logits=*/false, StateInit::kKeep);
  EXPECT_FALSE(ahead.seqs[1].block_table_reset);
  EXPECT_EQ(ahead.seqs[1].n_blocks, 2);  // positions [0, 8) in blocks of 4
  ASSERT_TRUE(h.sched().update(n, out).is_ok());
  // [8, 12), then the last chunk [12, 13) with its token, then request 2's first decode: all ahead.
  BatchPlan prev = std::move(ahead);
  std::vector<SeqOutput> prev_out = std::move(ahead_out);
  for (int32_t first : {8, 12, 13}) {
    BatchPlan next = h.sched().schedule_ahead(prev);
    ASSERT_EQ(next.seqs.size(), 2u) << describe(next);
    EXPECT_EQ(next.seqs[1].first_position, first);
    EXPECT_EQ(next.seqs[1].token_from_device, first == 13);
    EXPECT_EQ(next.seqs[1].needs_logits, first >= 12);
    std::vector<SeqOutput> next_out = h.runner().run(next);
    ASSERT_TRUE(h.sched().update(prev, prev_out).is_ok());
    EXPECT_TRUE(h.sched().check_integrity().is_ok());
    prev = std::move(next);
    prev_out = std::move(next_out);
  }
  ASSERT_TRUE(h.sched().update(prev, prev_out).is_ok());
  EXPECT_EQ(h.sched().find(2)->n_tokens(), 15);
  EXPECT_TRUE(h.sched().check_integrity().is_ok());
}

// Prompt chunks end at state snapshot boundaries ahead as schedule() cuts them: the snapshot the plan
// ahead reserves stays pending through the update of the plan before it, is published by its own
// update, and a later request with the same prompt restores it.
TEST(SchedulerAhead, SnapshotsArePlannedAheadAndPublishedByTheirOwnUpdate) {
  Harness h(small_sched(/*budget=*/4), small_kv(32, 8, /*n_snapshots=*/2));
  h.add(1, tokens_from(1, 14), 3);  // a snapshot at 12, the prompt's last block boundary
  h.step();                         // [0, 4)
  BatchPlan n = h.sched().schedule();  // [4, 8)
  std::vector<SeqOutput> out = h.runner().run(n);
  BatchPlan ahead = h.sched().schedule_ahead(n);  // [8, 12), ending at the boundary
  ASSERT_EQ(ahead.seqs.size(), 1u) << describe(ahead);
  EXPECT_EQ(ahead.seqs[0].first_position, 8);
  EXPECT_EQ(ahead.seqs[0].n_tokens_scheduled, 4);
  const kv::SnapshotId snap = ahead.seqs[0].snapshot_take;
  ASSERT_NE(snap, kv::kNoId);
  std::vector<SeqOutput> ahead_out = h.runner().run(ahead);
  ASSERT_TRUE(h.sched().update(n, out).is_ok());
  EXPECT_EQ(h.sched().kv().snapshot_pool().state(snap), kv::SnapshotPool::SlotState::kPending);
  EXPECT_TRUE(h.sched().check_integrity().is_ok());
  // With the snapshot still in flight, the last chunk [12, 14) goes ahead too (it takes none).
  BatchPlan last = h.sched().schedule_ahead(ahead);
  ASSERT_EQ(last.seqs.size(), 1u) << describe(last);
  EXPECT_EQ(last.seqs[0].first_position, 12);
  EXPECT_TRUE(last.seqs[0].needs_logits);
  std::vector<SeqOutput> last_out = h.runner().run(last);
  ASSERT_TRUE(h.sched().update(ahead, ahead_out).is_ok());
  EXPECT_EQ(h.sched().kv().snapshot_pool().state(snap), kv::SnapshotPool::SlotState::kValid);
  ASSERT_TRUE(h.sched().update(last, last_out).is_ok());
  h.run_ahead_to_completion();
  // The same prompt again: restored from the snapshot (the FakeRunner checks the state it holds).
  h.add(2, tokens_from(1, 14), 3);
  h.run_ahead_to_completion();
  EXPECT_EQ(h.sched().stats().n_snapshot_restores, 1);
  h.expect_all_free();
}

// Snapshots at intervals (every block, chunks of a block): every prompt chunk takes one, so the
// chunk planned ahead takes the next while step n's is still pending — each published by its own
// step's update — and the run generates what the synchronous run generates, restoring them after.
TEST(SchedulerAhead, ASecondSnapshotIsPlannedAheadOfThePendingOne) {
  kv::KvConfig kv = small_kv(32, 8, /*n_snapshots=*/8);
  kv.snapshot.interval_tokens = 4;
  {
    Harness h(small_sched(/*budget=*/4), kv);
    h.add(1, tokens_from(1, 14), 30);
    BatchPlan n = h.sched().schedule();  // [0, 4), taking the snapshot at 4
    ASSERT_EQ(n.seqs.size(), 1u);
    const kv::SnapshotId first = n.seqs[0].snapshot_take;
    ASSERT_NE(first, kv::kNoId);
    std::vector<SeqOutput> out = h.runner().run(n);
    BatchPlan ahead = h.sched().schedule_ahead(n);  // [4, 8), taking the one at 8
    ASSERT_EQ(ahead.seqs.size(), 1u) << describe(ahead);
    EXPECT_EQ(ahead.seqs[0].first_position, 4);
    EXPECT_EQ(ahead.seqs[0].n_tokens_scheduled, 4);
    const kv::SnapshotId second = ahead.seqs[0].snapshot_take;
    ASSERT_NE(second, kv::kNoId);
    EXPECT_NE(second, first);
    std::vector<SeqOutput> ahead_out = h.runner().run(ahead);
    ASSERT_TRUE(h.sched().update(n, out).is_ok());
    EXPECT_EQ(h.sched().kv().snapshot_pool().state(first), kv::SnapshotPool::SlotState::kValid);
    EXPECT_EQ(h.sched().kv().snapshot_pool().state(second), kv::SnapshotPool::SlotState::kPending);
    EXPECT_TRUE(h.sched().check_integrity().is_ok());
    ASSERT_TRUE(h.sched().update(ahead, ahead_out).is_ok());
    EXPECT_EQ(h.sched().kv().snapshot_pool().state(second), kv::SnapshotPool::SlotState::kValid);
    EXPECT_TRUE(h.sched().check_integrity().is_ok());
    h.run_ahead_to_completion();
    h.expect_all_free();
  }
  Harness sync(small_sched(/*budget=*/4), kv), async(small_sched(/*budget=*/4), kv);
  for (Harness* h : {&sync, &async}) {
    h->add(1, tokens_from(1, 14), 6);
    h->add(2, tokens_from(50, 11), 5);
  }
  expect_ahead_generates_the_same(sync, async, "snapshot every block");
  // The same prompts again: restored from the deepest snapshot each (the FakeRunner checks the
  // state it holds), in both runs alike.
  for (Harness* h : {&sync, &async}) {
    h->add(3, tokens_from(1, 14), 4);
    h->add(4, tokens_from(50, 11), 4);
  }
  expect_ahead_generates_the_same(sync, async, "restored");
  EXPECT_GE(async.sched().stats().n_snapshot_restores, 2);
  EXPECT_EQ(async.sched().stats().n_snapshot_restores, sync.sched().stats().n_snapshot_restores);
}

// No plan ahead where step n's results decide step n + 1: drafts configured, the pool cannot grow
// every table, the request's next token ends it.
TEST(SchedulerAhead, DeclinesWhereTheStepsResultsDecide) {
  {  // drafts configured
    SchedulerConfig c = small_sched(/*budget=*/16);
    c.max_draft_tokens = 2;
    Harness h(c, small_kv(32));
    h.add(1, tokens_from(1, 4), 30);
    h.step();
    BatchPlan n = h.sched().schedule();
    EXPECT_TRUE(h.sched().schedule_ahead(n).empty());
    ASSERT_TRUE(h.sched().update(n, h.runner().run(n)).is_ok());
  }
  {  // the next position needs a block and none is free
    Harness h(small_sched(/*budget=*/16), small_kv(4));
    h.add(1, tokens_from(1, 6), 30);
    h.add(2, tokens_from(40, 6), 30);
    h.step();  // positions [0, 6) of each in two blocks, tokens 6 sampled: the pool is full
    auto [n, ahead, out, ahead_out] = plan_two(h);  // positions 6
    ASSERT_EQ(n.seqs.size(), 2u);
    // Step n + 1 runs positions 7, still in the second blocks; the step after needs third blocks.
    ASSERT_EQ(ahead.seqs.size(), 2u);
    ASSERT_TRUE(h.sched().update(n, out).is_ok());
    EXPECT_TRUE(h.sched().schedule_ahead(ahead).empty());  // positions 8: no block left
    ASSERT_TRUE(h.sched().update(ahead, ahead_out).is_ok());
    EXPECT_TRUE(h.sched().check_integrity().is_ok());
  }
  {  // the request's next token ends it by length: nothing to plan
    Harness h(small_sched(/*budget=*/16), small_kv(32));
    h.add(1, tokens_from(1, 4), 2);
    h.step();  // token 1 of 2
    BatchPlan n = h.sched().schedule();  // samples token 2: the last
    EXPECT_TRUE(h.sched().schedule_ahead(n).empty());
    ASSERT_TRUE(h.sched().update(n, h.runner().run(n)).is_ok());
    EXPECT_EQ(h.sched().find(1), nullptr);
  }
}

}  // namespace
}  // namespace deepinfer::sched
