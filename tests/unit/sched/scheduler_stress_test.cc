// Randomized scheduler stress (fixed seeds): random arrivals with shared prefix families,
// prompt/output lengths, drafts, engine stops, aborts between steps and in flight, on a tiny
// pool that forces preemption and eviction. After every step: integrity (Harness) and the
// FakeRunner's device-side checks. At the end: every resource is free, and every request that
// finished normally produced exactly what an uninterrupted run would have.
#include <gtest/gtest.h>

#include <map>

#include "fake_runner.h"

namespace deepinfer::sched {
namespace {

using testing::Harness;
using testing::model_token;
using testing::model_tokens;

// splitmix64: portable, so the workload is identical on every standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int32_t uniform(int32_t lo, int32_t hi) { return lo + static_cast<int32_t>(next() % static_cast<uint64_t>(hi - lo + 1)); }
  bool chance(int32_t percent) { return uniform(0, 99) < percent; }

 private:
  uint64_t s_;
};

struct StressCase {
  const char* name;
  uint64_t seed;
  kv::ReplayMode mode;
  bool prefix_caching;
  int32_t n_snapshots;
};

class SchedulerStress : public ::testing::TestWithParam<StressCase> {};

// The stress configuration: four sequences on a tiny pool that forces preemption and eviction,
// 7-token prefill chunks, a snapshot every 8 tokens.
SchedulerConfig stress_sched(int32_t max_draft_tokens) {
  SchedulerConfig config;
  config.max_num_seqs = 4;
  config.max_num_batched_tokens = 16;
  config.max_prefill_chunk = 7;
  config.max_draft_tokens = max_draft_tokens;
  config.max_model_len = 60;
  return config;
}
kv::KvConfig stress_kv(const StressCase& sc) {
  kv::KvConfig kv_config = testing::small_kv(/*n_blocks=*/20, /*n_slots=*/5, sc.n_snapshots);
  kv_config.enable_prefix_caching = sc.prefix_caching;
  kv_config.replay = kv::ReplayConfig{.mode = sc.mode, .window = 3, .n_layers = 2, .max_overlap = 2};
  kv_config.snapshot.interval_tokens = 8;
  return kv_config;
}

// Random arrivals until step 550, one in about three steps: a prefix of one of three shared
// families (or none) and a random tail, 1-14 tokens to generate.
class Arrivals {
 public:
  explicit Arrivals(Rng* rng) : rng_(rng), families_(3) {
    for (auto& f : families_) {
      for (int i = 0; i < 24; ++i) f.push_back(rng_->uniform(0, 50));
    }
  }
  void maybe_add(int step, Harness& h) {
    if (step >= 550 || !rng_->chance(35)) return;
    std::vector<TokenId> prompt;
    if (rng_->chance(70)) {
      const auto& f = families_[static_cast<size_t>(rng_->uniform(0, 2))];
      prompt.assign(f.begin(), f.begin() + rng_->uniform(1, 24));
    }
    const int32_t n_tail = rng_->uniform(prompt.empty() ? 1 : 0, 12);
    for (int32_t i = 0; i < n_tail; ++i) prompt.push_back(rng_->uniform(0, 50));
    const SeqId id = next_id_++;
    n_prompt[id] = static_cast<int32_t>(prompt.size());
    max_new[id] = rng_->uniform(1, 14);
    h.add(id, std::move(prompt), max_new[id]);
  }
  int32_t n_added() const { return static_cast<int32_t>(next_id_ - 1); }

  std::map<SeqId, int32_t> n_prompt, max_new;

 private:
  Rng* rng_;
  std::vector<std::vector<TokenId>> families_;
  SeqId next_id_ = 1;
};

// Every request that finished (none of them aborted) produced exactly what an uninterrupted run
// would have, and ended by length at its limit or on the engine's stop token. Returns how many.
int check_finished(Harness& h, const Arrivals& arrivals, const std::set<SeqId>& aborted) {
  int n_checked = 0;
  for (const auto& [id, reason] : h.finished) {
    EXPECT_FALSE(aborted.contains(id)) << "request " << id;
    const std::vector<TokenId>& g = h.generated.at(id);
    const int32_t n_prompt = arrivals.n_prompt.at(id);
    EXPECT_EQ(g, model_tokens(id, n_prompt, n_prompt + static_cast<int32_t>(g.size()))) << "request " << id;
    if (reason == FinishReason::kLength) {
      EXPECT_TRUE(static_cast<int32_t>(g.size()) == arrivals.max_new.at(id) ||
                  n_prompt + static_cast<int32_t>(g.size()) == h.sched().max_seq_tokens()) << "request " << id;
    } else {
      EXPECT_EQ(reason, FinishReason::kStop);
      EXPECT_EQ(g.back(), h.runner().stop_token);
    }
    ++n_checked;
  }
  return n_checked;
}

TEST_P(SchedulerStress, RandomWorkloadKeepsInvariantsAndFreesEverything) {
  const StressCase& sc = GetParam();
  Harness h(stress_sched(/*max_draft_tokens=*/3), stress_kv(sc));
  h.runner().stop_token = model_token(3, 20);  // an occasional engine-reported stop
  Rng rng(sc.seed);
  Arrivals arrivals(&rng);
  std::set<SeqId> aborted;
  int n_in_flight_aborts = 0;

  for (int step = 0; step < 700; ++step) {
    arrivals.maybe_add(step, h);
    const std::vector<SeqId> live = [&] {
      std::vector<SeqId> v(h.sched().running().begin(), h.sched().running().end());
      v.insert(v.end(), h.sched().waiting().begin(), h.sched().waiting().end());
      return v;
    }();
    if (!live.empty() && rng.chance(4)) {
      const SeqId victim = live[static_cast<size_t>(rng.uniform(0, static_cast<int32_t>(live.size()) - 1))];
      ASSERT_TRUE(h.sched().abort(victim).is_ok());
      aborted.insert(victim);
    }
    for (SeqId id : h.sched().running()) {
      const Request* r = h.sched().find(id);
      if (r->state != RequestState::kDecode || !rng.chance(40)) continue;
      // Drafts: a correct prefix of random length, then a wrong token.
      std::vector<TokenId> drafts = model_tokens(id, r->n_tokens(), r->n_tokens() + rng.uniform(0, 3));
      drafts.push_back(5000);
      ASSERT_TRUE(h.sched().set_draft_tokens(id, drafts).is_ok());
    }
    const bool abort_in_flight = !h.sched().running().empty() && rng.chance(3);
    const SeqId in_flight_victim = abort_in_flight ? h.sched().running().front() : 0;
    h.step([&] {
      if (!abort_in_flight) return;
      ASSERT_TRUE(h.sched().abort(in_flight_victim).is_ok());
      aborted.insert(in_flight_victim);
      ++n_in_flight_aborts;
    });
    if (::testing::Test::HasFailure()) FAIL() << "at step " << step << "\n" << h.log.substr(h.log.size() > 4000 ? h.log.size() - 4000 : 0);
  }
  h.run_to_completion();
  h.expect_all_free();

  const int n_checked = check_finished(h, arrivals, aborted);
  EXPECT_EQ(n_checked + static_cast<int>(aborted.size()), arrivals.n_added());
  const SchedulerStats& st = h.sched().stats();
  // The workload must exercise what it claims to (preemption, aborts in flight, prefix hits).
  EXPECT_GT(st.n_preemptions, 0);
  EXPECT_GT(n_in_flight_aborts, 0);
  EXPECT_GT(n_checked, 100);
  if (sc.prefix_caching) {
    EXPECT_GT(st.n_tokens_prefix_hit, 0);
  }
  if (sc.prefix_caching && sc.n_snapshots > 0) {
    EXPECT_GT(st.n_snapshot_restores, 0);
  }
  ::testing::Test::RecordProperty("preemptions", static_cast<int>(st.n_preemptions));
}

// The same kind of workload run the way asynchronous scheduling runs it (Harness::step_ahead: each
// plan made ahead of its predecessor's update wherever schedule_ahead allows, else by schedule()
// after it), without drafts (they are never planned ahead): aborts land while one or two plans hold
// the request; preemption happens in the plans schedule() makes. Every request that finished
// produced exactly what an uninterrupted run would have, everything is freed, and plans were made
// ahead of decodes and of prompt chunks alike.
TEST_P(SchedulerStress, AsyncRandomWorkloadGeneratesWhatAnUninterruptedRunDoes) {
  const StressCase& sc = GetParam();
  Harness h(stress_sched(/*max_draft_tokens=*/0), stress_kv(sc));
  h.runner().stop_token = model_token(3, 20);
  Rng rng(sc.seed + 100);
  Arrivals arrivals(&rng);
  std::set<SeqId> aborted;
  for (int step = 0; step < 700; ++step) {
    arrivals.maybe_add(step, h);
    std::vector<SeqId> live(h.sched().running().begin(), h.sched().running().end());
    live.insert(live.end(), h.sched().waiting().begin(), h.sched().waiting().end());
    if (!live.empty() && rng.chance(4)) {
      const SeqId victim = live[static_cast<size_t>(rng.uniform(0, static_cast<int32_t>(live.size()) - 1))];
      ASSERT_TRUE(h.sched().abort(victim).is_ok());
      aborted.insert(victim);
    }
    h.step_ahead();
    if (::testing::Test::HasFailure()) FAIL() << "at step " << step << "\n" << h.log.substr(h.log.size() > 4000 ? h.log.size() - 4000 : 0);
  }
  h.run_ahead_to_completion();
  h.expect_all_free();

  const int n_checked = check_finished(h, arrivals, aborted);
  EXPECT_GT(n_checked, 100);
  // Most plans are made ahead (~300-470 here), of chunks too (~150-240), snapshots included.
  EXPECT_GT(h.n_ahead, 200);
  EXPECT_GT(h.n_ahead_of_chunk, 100);
  EXPECT_GT(h.sched().stats().n_preemptions, 0);
  if (sc.prefix_caching && sc.n_snapshots > 0) {
    EXPECT_GT(h.sched().stats().n_snapshot_restores, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Seeds, SchedulerStress,
    ::testing::Values(StressCase{"bounded", 1, kv::ReplayMode::kBounded, true, 3},
                      StressCase{"exact", 2, kv::ReplayMode::kExact, true, 3},
                      StressCase{"no_snapshots", 3, kv::ReplayMode::kBounded, true, 0},
                      StressCase{"no_prefix_cache", 4, kv::ReplayMode::kExact, false, 2}),
    [](const ::testing::TestParamInfo<StressCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace deepinfer::sched
