// FakeRunner: a simulated device for scheduler tests. It applies each plan the way the engine
// will — block-table diffs, state-slot init (keep / reset / restore), snapshot copies, history
// writes at positions ≥ H — and checks the plan against that simulation: tables equal the
// manager's, a kept state continues exactly where it stopped, restored states hold the right
// tokens, shared (hashed) blocks are never written and contain the tokens they claim.
// The "model" samples next_token(seq, position), so a recomputed sequence regenerates the same
// tokens; a draft is accepted iff it equals what the model would sample at its position.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <set>
#include <vector>

#include "sched/scheduler.h"

namespace deepinfer::sched::testing {

inline TokenId model_token(SeqId seq, int32_t position) {
  return static_cast<TokenId>((seq * 131 + position * 17) % 1000 + 1);
}

class FakeRunner {
 public:
  explicit FakeRunner(const Scheduler& s)
      : sched_(s),
        bt_(s.kv().block_tokens()),
        history_(static_cast<size_t>(s.kv().config().n_blocks), std::vector<TokenId>(static_cast<size_t>(bt_), -1)),
        states_(static_cast<size_t>(s.kv().config().n_state_slots)),
        snapshots_(static_cast<size_t>(s.kv().config().n_snapshot_slots)) {}

  // Engine-reported stops: a sampled token equal to stop_token ends the sequence with kStop.
  TokenId stop_token = -1;

  std::vector<SeqOutput> run(const BatchPlan& plan) {
    for (const auto* ids : {&plan.preempted_ids, &plan.finished_ids, &plan.aborted_ids}) {
      for (SeqId id : *ids) tables_.erase(id);
    }
    int32_t n_total = 0;
    bool seen_non_decode = false;
    std::set<SeqId> seqs;
    std::set<kv::SlotId> slots;
    std::vector<SeqOutput> outputs;
    for (const SeqPlan& sp : plan.seqs) {
      EXPECT_TRUE(seqs.insert(sp.seq_id).second) << "seq " << sp.seq_id << " twice in a plan";
      EXPECT_TRUE(slots.insert(sp.state_slot).second) << "state slot " << sp.state_slot << " shared";
      const Request* req = sched_.find(sp.seq_id);
      if (req == nullptr) {
        ADD_FAILURE() << "planned seq " << sp.seq_id << " unknown";
        continue;
      }
      // Planned ahead, a row decoding the token of the step before is a decode already.
      const bool is_decode = req->state == RequestState::kDecode || sp.token_from_device;
      EXPECT_FALSE(is_decode && seen_non_decode) << "decode seq " << sp.seq_id << " after a prefill";
      seen_non_decode |= !is_decode;
      n_total += sp.n_tokens_scheduled;
      outputs.push_back(run_seq(sp, *req));
    }
    EXPECT_EQ(n_total, plan.n_tokens_scheduled);
    EXPECT_LE(n_total, sched_.config().max_num_batched_tokens);
    return outputs;
  }

 private:
  struct SimState {
    int32_t floor = 0;
    std::vector<TokenId> tokens;  // tokens consumed at positions [floor, floor + size)
    int32_t pos() const { return floor + static_cast<int32_t>(tokens.size()); }
  };

  void apply_table_diff(const SeqPlan& sp) {
    std::vector<kv::BlockId>& t = tables_[sp.seq_id];
    if (sp.block_table_reset) {
      t = sp.new_block_ids;
    } else {
      const int32_t n_keep = sp.n_blocks - static_cast<int32_t>(sp.new_block_ids.size());
      EXPECT_LE(n_keep, static_cast<int32_t>(t.size())) << "diff of seq " << sp.seq_id;
      t.resize(static_cast<size_t>(std::max(n_keep, 0)));
      t.insert(t.end(), sp.new_block_ids.begin(), sp.new_block_ids.end());
    }
    const auto truth = sched_.block_table(sp.seq_id);
    EXPECT_EQ(t, std::vector<kv::BlockId>(truth.begin(), truth.end())) << "block table of seq " << sp.seq_id;
  }

  void init_state(const SeqPlan& sp, const Request& req) {
    SimState& st = states_[static_cast<size_t>(sp.state_slot)];
    if (sp.state_init == StateInit::kReset) {
      EXPECT_EQ(sp.window_floor, sp.first_position) << "cold/replay start of seq " << sp.seq_id;
      st = SimState{sp.first_position, {}};
    } else if (sp.state_init == StateInit::kRestoreSnapshot) {
      st = snapshots_[static_cast<size_t>(sp.snapshot_restore)];
    }
    EXPECT_EQ(st.pos(), sp.first_position) << "state of seq " << sp.seq_id << " does not continue";
    EXPECT_EQ(st.floor, sp.window_floor) << "window floor of seq " << sp.seq_id;
    if (st.floor < 0 || st.pos() > req.n_tokens()) {
      ADD_FAILURE() << "state of seq " << sp.seq_id << " covers [" << st.floor << ", " << st.pos() << ")";
      return;
    }
    const std::vector<TokenId> expect(req.tokens.begin() + st.floor, req.tokens.begin() + st.pos());
    EXPECT_EQ(st.tokens, expect) << "state content of seq " << sp.seq_id;
  }

  void touch_history(const SeqPlan& sp, int32_t pos, TokenId token) {
    const std::vector<kv::BlockId>& t = tables_[sp.seq_id];
    ASSERT_LT(pos / bt_, static_cast<int32_t>(t.size())) << "seq " << sp.seq_id << " pos " << pos;
    const kv::BlockId b = t[static_cast<size_t>(pos / bt_)];
    TokenId& row = history_[static_cast<size_t>(b)][static_cast<size_t>(pos % bt_)];
    if (pos < sp.n_history_cached) {
      EXPECT_EQ(row, token) << "cached block " << b << " holds the wrong token at " << pos;
      return;
    }
    EXPECT_FALSE(sched_.kv().block_pool().hash(b).has_value()) << "write into committed block " << b;
    EXPECT_EQ(sched_.kv().block_pool().ref_count(b), 1) << "write into shared block " << b;
    row = token;
  }

  SeqOutput run_seq(const SeqPlan& sp, const Request& req) {
    apply_table_diff(sp);
    init_state(sp, req);
    const int32_t n_real = sp.n_tokens_scheduled - sp.n_draft_tokens;
    // Planned ahead (schedule_ahead): the input is the token the device sampled for the sequence in
    // the step before, which the scheduler has not taken in yet.
    std::vector<TokenId> ids = sp.token_ids;
    int32_t n_known = req.n_tokens();
    if (sp.token_from_device) {
      EXPECT_EQ(sp.n_tokens_scheduled, 1) << "seq " << sp.seq_id;
      EXPECT_EQ(sp.first_position, req.n_tokens()) << "seq " << sp.seq_id << " planned ahead";
      auto it = last_sampled_.find(sp.seq_id);
      if (it == last_sampled_.end()) {
        ADD_FAILURE() << "seq " << sp.seq_id << " planned ahead of a step that sampled nothing for it";
      } else {
        ids[0] = it->second;
      }
      n_known += 1;
    }
    EXPECT_EQ(sp.needs_logits, sp.first_position + n_real == n_known) << "seq " << sp.seq_id;
    EXPECT_EQ(sp.n_history_cached, req.n_tokens_cached);
    for (int32_t i = 0; i < n_real && !sp.token_from_device; ++i) {
      EXPECT_EQ(sp.token_ids[static_cast<size_t>(i)], req.tokens[static_cast<size_t>(sp.first_position + i)]);
    }
    for (int32_t i = 0; i < sp.n_tokens_scheduled; ++i) {
      touch_history(sp, sp.first_position + i, ids[static_cast<size_t>(i)]);
    }
    SeqOutput out{sp.seq_id, {}, FinishReason::kNone};
    int32_t n_accepted = 0;
    if (sp.needs_logits) {
      const int32_t base = sp.first_position + n_real;
      while (n_accepted < sp.n_draft_tokens &&
             sp.token_ids[static_cast<size_t>(n_real + n_accepted)] == model_token(sp.seq_id, base + n_accepted)) {
        out.tokens.push_back(sp.token_ids[static_cast<size_t>(n_real + n_accepted)]);
        ++n_accepted;
      }
      out.tokens.push_back(model_token(sp.seq_id, base + n_accepted));
      if (out.tokens.back() == stop_token) out.finish = FinishReason::kStop;
      last_sampled_[sp.seq_id] = out.tokens.back();
    }
    SimState& st = states_[static_cast<size_t>(sp.state_slot)];
    for (int32_t i = 0; i < n_real + n_accepted; ++i) st.tokens.push_back(ids[static_cast<size_t>(i)]);
    if (sp.snapshot_take != kv::kNoId) {
      EXPECT_EQ(st.pos() % bt_, 0) << "snapshot of seq " << sp.seq_id << " off a block boundary";
      snapshots_[static_cast<size_t>(sp.snapshot_take)] = st;
    }
    return out;
  }

  const Scheduler& sched_;
  int32_t bt_;
  std::map<SeqId, std::vector<kv::BlockId>> tables_;
  std::vector<std::vector<TokenId>> history_;  // [block][offset] token written there
  std::vector<SimState> states_;
  std::vector<SimState> snapshots_;
  std::map<SeqId, TokenId> last_sampled_;  // each sequence's last sampled token ("on the device")
};

// Scheduler + FakeRunner; step() runs one engine step and checks integrity before and after.
class Harness {
 public:
  Harness(SchedulerConfig config, kv::KvConfig kv_config) {
    Result<Scheduler> s = Scheduler::create(config, std::move(kv_config));
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    sched_.emplace(std::move(s).value());
    runner_.emplace(*sched_);
  }
  Scheduler& sched() { return *sched_; }
  FakeRunner& runner() { return *runner_; }

  void add(SeqId id, std::vector<TokenId> prompt, int32_t max_new_tokens) {
    const Status s = sched_->add_request(RequestParams{id, std::move(prompt), max_new_tokens, 0});
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  // `in_flight` runs between the forward and update() (e.g. an abort racing the step).
  BatchPlan step(const std::function<void()>& in_flight = {}) {
    BatchPlan plan = sched_->schedule();
    const Status before = sched_->check_integrity();
    EXPECT_TRUE(before.is_ok()) << before.to_string() << "\n" << describe(plan);
    const std::vector<SeqOutput> outputs = runner_->run(plan);
    if (in_flight) in_flight();
    take_events(sched_->update(plan, outputs));
    const Status after = sched_->check_integrity();
    EXPECT_TRUE(after.is_ok()) << after.to_string() << "\n" << describe(plan);
    log += describe(plan);
    return plan;
  }
  // One step the way asynchronous scheduling runs it: the plan in flight (scheduled now if there
  // is none) has run on the "device"; the next plan is made with schedule_ahead before the first
  // is updated, and runs — the device's order — before that update. Returns the plan updated.
  BatchPlan step_ahead() {
    if (!in_flight_) {
      BatchPlan plan = sched_->schedule();
      const Status before = sched_->check_integrity();
      EXPECT_TRUE(before.is_ok()) << before.to_string() << "\n" << describe(plan);
      std::vector<SeqOutput> outputs = runner_->run(plan);
      in_flight_.emplace(std::move(plan), std::move(outputs));
    }
    BatchPlan ahead = sched_->schedule_ahead(in_flight_->first);
    std::vector<SeqOutput> ahead_outputs;
    if (!ahead.empty()) {
      ++n_ahead;
      const std::vector<SeqPlan>& rows = in_flight_->first.seqs;
      if (std::any_of(rows.begin(), rows.end(), [](const SeqPlan& sp) { return !sp.needs_logits; })) ++n_ahead_of_chunk;
      ahead_outputs = runner_->run(ahead);
    }
    BatchPlan plan = std::move(in_flight_->first);
    take_events(sched_->update(plan, in_flight_->second));
    const Status after = sched_->check_integrity();
    EXPECT_TRUE(after.is_ok()) << after.to_string() << "\n" << describe(plan);
    log += describe(plan);
    in_flight_.reset();
    if (!ahead.empty()) in_flight_.emplace(std::move(ahead), std::move(ahead_outputs));
    return plan;
  }
  int run_ahead_to_completion(int max_steps = 10000) {
    int n = 0;
    while ((sched_->has_unfinished() || in_flight_) && n < max_steps) {
      step_ahead();
      ++n;
    }
    EXPECT_FALSE(sched_->has_unfinished()) << "not drained after " << max_steps << " steps";
    return n;
  }
  int n_ahead = 0;           // plans made by schedule_ahead
  int n_ahead_of_chunk = 0;  // of them, ahead of a plan with a prompt chunk that is not the last

  // Steps until nothing is left (bounded); returns the number of steps.
  int run_to_completion(int max_steps = 10000) {
    int n = 0;
    while (sched_->has_unfinished() && n < max_steps) {
      step();
      ++n;
    }
    EXPECT_FALSE(sched_->has_unfinished()) << "not drained after " << max_steps << " steps";
    return n;
  }
  void expect_all_free() {
    const kv::Manager& kv = sched_->kv();
    EXPECT_EQ(kv.n_seqs(), 0);
    EXPECT_EQ(kv.n_free_blocks(), kv.config().n_blocks);
    EXPECT_EQ(kv.n_free_state_slots(), kv.config().n_state_slots);
    for (kv::SnapshotId i = 0; i < kv.snapshot_pool().n_slots(); ++i) {
      EXPECT_EQ(kv.snapshot_pool().n_pins(i), 0);
      EXPECT_NE(kv.snapshot_pool().state(i), kv::SnapshotPool::SlotState::kPending);
    }
  }

  std::map<SeqId, std::vector<TokenId>> generated;
  std::map<SeqId, FinishReason> finished;
  std::vector<SeqEvent> last_events;
  std::string log;

 private:
  void take_events(Result<std::vector<SeqEvent>> events) {
    EXPECT_TRUE(events.is_ok()) << events.status().to_string();
    if (!events.is_ok()) return;
    for (const SeqEvent& e : *events) {
      std::vector<TokenId>& g = generated[e.seq_id];
      g.insert(g.end(), e.tokens.begin(), e.tokens.end());
      if (e.finish != FinishReason::kNone) finished[e.seq_id] = e.finish;
    }
    last_events = std::move(events).value();
  }
  std::optional<Scheduler> sched_;
  std::optional<FakeRunner> runner_;
  std::optional<std::pair<BatchPlan, std::vector<SeqOutput>>> in_flight_;
};

inline kv::KvConfig small_kv(int32_t n_blocks, int32_t n_slots = 8, int32_t n_snapshots = 0) {
  kv::KvConfig c;
  c.block_tokens = 4;
  c.n_blocks = n_blocks;
  c.n_state_slots = n_slots;
  c.n_snapshot_slots = n_snapshots;
  c.replay = kv::ReplayConfig{.mode = kv::ReplayMode::kBounded, .window = 2};
  return c;
}

inline SchedulerConfig small_sched(int32_t budget, int32_t max_seqs = 8) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  return c;
}

inline std::vector<TokenId> tokens_from(TokenId start, int32_t n) {
  std::vector<TokenId> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(start + i);
  return t;
}

// What an uninterrupted run of `seq` samples for positions [from, to).
inline std::vector<TokenId> model_tokens(SeqId seq, int32_t from, int32_t to) {
  std::vector<TokenId> t;
  for (int32_t p = from; p < to; ++p) t.push_back(model_token(seq, p));
  return t;
}

}  // namespace deepinfer::sched::testing
