// The engine running tiny-v41 (16-token blocks so prefix hits happen on short prompts): seeded
// generation is reproducible, a prefix hit replayed exactly (Engram look-back sent by the
// scheduler) and a state-snapshot restore under compact CED prefill both give the cold run's
// tokens, and every KV resource is returned.
#include <gtest/gtest.h>

#include <random>

#include "deepinfer/engine.h"
#include "engine/engine_debug.h"
#include "test_models.h"

namespace deepinfer {
namespace {

EngineOptions v41_options(const std::string& prefill_mode) {
  EngineOptions o;
  o.model = testing::synthetic_model_dir("tiny-v41");
  o.block_tokens = 16;
  o.kv_blocks = 96;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 64;
  o.n_snapshot_slots = 8;
  o.replay_mode = "exact";
  o.yoco_prefill_mode = prefill_mode;
  o.yoco_keep_tokens = 20;  // window 8 + 12 rewind: truncation happens on these prompts
  return o;
}

std::unique_ptr<Engine> open(const EngineOptions& o) {
  engine::DebugOptions debug;
  debug.check_integrity_every_step = true;
  auto e = engine::open_engine(o, debug);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

std::vector<int32_t> ids(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& id : v) id = static_cast<int32_t>(3 + rng() % 509);
  return v;
}

Request request(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t seed) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.sampling.max_tokens = max_tokens;
  r.sampling.seed = seed;
  r.sampling.temperature = 0.9f;
  r.sampling.ignore_eos = true;
  return r;
}

std::vector<int32_t> long_prompt() { return ids(200, 4040); }
std::vector<int32_t> sharing_prompt() {  // shares the first 176 tokens (11 blocks)
  std::vector<int32_t> p = long_prompt();
  p.resize(176);
  const auto tail = ids(30, 9);
  p.insert(p.end(), tail.begin(), tail.end());
  return p;
}

std::vector<int32_t> cold(const std::string& mode) {
  auto e = open(v41_options(mode));
  auto outs = e->generate({request(long_prompt(), 10, 5)});
  EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
  return outs.is_ok() ? (*outs)[0].sequences[0].token_ids : std::vector<int32_t>{};
}

void expect_all_free(const Engine& e) {
  const engine::DebugSnapshot d = engine::debug_snapshot(e);
  EXPECT_TRUE(d.integrity.is_ok()) << d.integrity.to_string();
  EXPECT_EQ(d.n_free_blocks, d.n_blocks);
  EXPECT_EQ(d.n_free_state_slots, d.n_state_slots);
}

TEST(V41EngineTest, PrefixHitWithExactReplayEqualsTheColdRun) {
  const auto want = cold("none");
  ASSERT_EQ(want.size(), 10u);
  EngineOptions o = v41_options("none");
  o.n_snapshot_slots = 0;  // force the replay path
  auto e = open(o);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->generate({request(sharing_prompt(), 4, 1)}).is_ok());
  auto outs = e->generate({request(long_prompt(), 10, 5)});
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  EXPECT_EQ((*outs)[0].n_cached_tokens, 176);
  EXPECT_EQ((*outs)[0].sequences[0].token_ids, want);
  // 12 layers x (window 8 - 1) + the 12 rewind tokens of keep 20, rounded to a ratio-2 group.
  EXPECT_EQ(engine::debug_snapshot(*e).n_tokens_replayed, 96);
  expect_all_free(*e);
}

TEST(V41EngineTest, SnapshotRestoreUnderCompactPrefillEqualsTheColdRun) {
  const auto want = cold("compact");
  EXPECT_NE(want, cold("none"));  // truncation really happens on this prompt (an approximation)
  auto e = open(v41_options("compact"));
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->generate({request(long_prompt(), 3, 99)}).is_ok());  // snapshot at 192
  auto outs = e->generate({request(long_prompt(), 10, 5)});
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  EXPECT_EQ((*outs)[0].n_cached_tokens, 192);
  EXPECT_EQ((*outs)[0].sequences[0].token_ids, want);
  EXPECT_EQ(engine::debug_snapshot(*e).n_snapshot_restores, 1);
  expect_all_free(*e);
}

}  // namespace
}  // namespace deepinfer
