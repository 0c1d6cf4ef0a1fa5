// Reproducibility contracts of the engine on the micro model: a seeded request yields the same
// tokens whatever else is in the batch, whatever the step budget / chunk size and arrival order;
// a prefix hit (exact replay, or a state snapshot) gives exactly the cold run's tokens; and
// preemption by recompute does not change any output.
#include "engine_test_util.h"

namespace deepinfer {
namespace {

using testing::ids_request;
using testing::prompt_ids;

Request target_request() {
  Request r = ids_request(prompt_ids(53, 77), 8, 4242, 0.9f);
  r.sampling.top_p = 0.95f;
  return r;
}

std::vector<Request> others() {
  std::vector<Request> v;
  for (int i = 0; i < 4; ++i) v.push_back(ids_request(prompt_ids(9 + 11 * i, 500 + i), 3 + i, 31 + i));
  return v;
}

TEST(EngineDeterminismTest, SameSeedSameTokensWhateverTheBatchAndChunking) {
  auto alone_engine = testing::open_micro();
  ASSERT_NE(alone_engine, nullptr);
  const auto alone = testing::generate_tokens(*alone_engine, {target_request()})[0];
  ASSERT_EQ(alone.size(), 8u);

  struct Variant {
    int32_t budget, max_chunk, max_seqs;
    bool reversed;
  };
  std::vector<std::vector<int32_t>> other_tokens;
  for (const Variant v : {Variant{64, 0, 8, false}, Variant{7, 0, 8, false}, Variant{256, 0, 8, true},
                          Variant{32, 5, 3, false}, Variant{64, 0, 1, true}}) {
    EngineOptions o = testing::micro_options();
    o.max_num_batched_tokens = v.budget;
    o.max_prefill_chunk = v.max_chunk;
    o.max_num_seqs = v.max_seqs;
    auto engine = testing::open_micro(o);
    ASSERT_NE(engine, nullptr);
    std::vector<Request> reqs = others();
    reqs.insert(reqs.begin() + 2, target_request());
    if (v.reversed) std::reverse(reqs.begin(), reqs.end());
    auto tokens = testing::generate_tokens(*engine, reqs);
    if (v.reversed) std::reverse(tokens.begin(), tokens.end());
    EXPECT_EQ(tokens[2], alone) << "budget " << v.budget << " chunk " << v.max_chunk << " seqs " << v.max_seqs;
    tokens.erase(tokens.begin() + 2);
    if (other_tokens.empty()) other_tokens = tokens;
    EXPECT_EQ(tokens, other_tokens) << "co-scheduled requests changed with budget " << v.budget;
    testing::expect_all_free(*engine);
  }
}

// 200-token prompt; another request shares its first 176 tokens (11 blocks of 16).
std::vector<int32_t> long_prompt() { return prompt_ids(200, 4040); }
std::vector<int32_t> sharing_prompt() {
  std::vector<int32_t> p = long_prompt();
  p.resize(176);
  const auto tail = prompt_ids(30, 9);
  p.insert(p.end(), tail.begin(), tail.end());
  return p;
}

std::vector<int32_t> cold_run(const std::string& replay_mode) {
  EngineOptions o = testing::micro_options();
  o.replay_mode = replay_mode;
  auto engine = testing::open_micro(o);
  EXPECT_NE(engine, nullptr);
  auto outs = engine->generate({ids_request(long_prompt(), 10, 5)});
  EXPECT_TRUE(outs.is_ok());
  EXPECT_EQ((*outs)[0].n_cached_tokens, 0);
  return (*outs)[0].sequences[0].token_ids;
}

TEST(EngineDeterminismTest, PrefixHitWithExactReplayEqualsTheColdRun) {
  const auto cold = cold_run("exact");
  EngineOptions o = testing::micro_options();
  o.n_snapshot_slots = 0;  // force the replay path
  auto engine = testing::open_micro(o);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->generate({ids_request(sharing_prompt(), 4, 1)}).is_ok());
  auto outs = engine->generate({ids_request(long_prompt(), 10, 5)});
  ASSERT_TRUE(outs.is_ok());
  EXPECT_EQ((*outs)[0].n_cached_tokens, 176);
  EXPECT_EQ((*outs)[0].sequences[0].token_ids, cold);
  const engine::DebugSnapshot d = engine::debug_snapshot(*engine);
  EXPECT_EQ(d.n_tokens_prefix_hit, 176);
  EXPECT_EQ(d.n_tokens_replayed, 7 * (16 - 1) + 4);  // micro: 7 layers, window 16, overlap 4
  EXPECT_EQ(d.n_snapshot_restores, 0);
  testing::expect_all_free(*engine);
}

TEST(EngineDeterminismTest, PrefixHitWithStateSnapshotEqualsTheColdRun) {
  const auto cold = cold_run("bounded");  // the mode does not matter for a cold run
  EngineOptions o = testing::micro_options();
  o.replay_mode = "bounded";  // a snapshot restore is exact in either mode
  auto engine = testing::open_micro(o);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->generate({ids_request(long_prompt(), 3, 99)}).is_ok());  // snapshot at 192
  auto outs = engine->generate({ids_request(long_prompt(), 10, 5)});
  ASSERT_TRUE(outs.is_ok());
  EXPECT_EQ((*outs)[0].n_cached_tokens, 192);
  EXPECT_EQ((*outs)[0].sequences[0].token_ids, cold);
  EXPECT_EQ(engine::debug_snapshot(*engine).n_snapshot_restores, 1);
  testing::expect_all_free(*engine);
}

// Interval snapshots are taken while decoding too: a conversation's next turn (the first turn's
// prompt and answer, then more) restores the snapshot a decode step took, and continues exactly
// as a cold run of the whole prompt does.
TEST(EngineDeterminismTest, SnapshotTakenWhileDecodingRestoresExactly) {
  EngineOptions o = testing::micro_options();
  o.snapshot_interval_tokens = 32;
  o.replay_mode = "bounded";
  auto engine = testing::open_micro(o);
  ASSERT_NE(engine, nullptr);
  auto first = engine->generate({ids_request(prompt_ids(40, 61), 40, 7, 0.0f)});  // decodes past 64
  ASSERT_TRUE(first.is_ok());
  std::vector<int32_t> turn = prompt_ids(40, 61);
  const std::vector<int32_t>& answer = (*first)[0].sequences[0].token_ids;
  turn.insert(turn.end(), answer.begin(), answer.end());
  const std::vector<int32_t> more = prompt_ids(9, 62);
  turn.insert(turn.end(), more.begin(), more.end());  // 89 tokens
  auto next = engine->generate({ids_request(turn, 8, 5, 0.0f)});
  ASSERT_TRUE(next.is_ok());
  // The snapshot at 64 (taken by the decode step that ended there) is the deepest below the
  // prompt's last token (the prompt-end snapshot at 80 belongs to this turn).
  EXPECT_EQ((*next)[0].n_cached_tokens, 64);
  EXPECT_EQ(engine::debug_snapshot(*engine).n_snapshot_restores, 1);
  EXPECT_EQ(engine::debug_snapshot(*engine).n_tokens_replayed, 0);
  testing::expect_all_free(*engine);
  auto cold_engine = testing::open_micro(testing::micro_options());
  ASSERT_NE(cold_engine, nullptr);
  auto cold = cold_engine->generate({ids_request(turn, 8, 5, 0.0f)});
  ASSERT_TRUE(cold.is_ok());
  EXPECT_EQ((*cold)[0].n_cached_tokens, 0);
  EXPECT_EQ((*next)[0].sequences[0].token_ids, (*cold)[0].sequences[0].token_ids);
}

TEST(EngineDeterminismTest, BoundedReplayReplaysOneWindow) {
  EngineOptions o = testing::micro_options();
  o.replay_mode = "bounded";
  o.n_snapshot_slots = 0;
  auto engine = testing::open_micro(o);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->generate({ids_request(sharing_prompt(), 4, 1)}).is_ok());
  auto outs = engine->generate({ids_request(long_prompt(), 10, 5)});
  ASSERT_TRUE(outs.is_ok());
  EXPECT_EQ((*outs)[0].n_cached_tokens, 176);
  EXPECT_EQ((*outs)[0].sequences[0].token_ids.size(), 10u);
  EXPECT_EQ(engine::debug_snapshot(*engine).n_tokens_replayed, 16);
  testing::expect_all_free(*engine);
}

TEST(EngineDeterminismTest, PreemptionDoesNotChangeOutputs) {
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(ids_request(prompt_ids(40 + i, 900 + i), 24, 70 + i));
  auto roomy = testing::open_micro();
  ASSERT_NE(roomy, nullptr);
  const auto expected = testing::generate_tokens(*roomy, reqs);
  EngineOptions o = testing::micro_options();
  o.kv_blocks = 8;  // 3 × 4 blocks needed at the end: someone must be preempted
  auto tight = testing::open_micro(o);
  ASSERT_NE(tight, nullptr);
  EXPECT_EQ(testing::generate_tokens(*tight, reqs), expected);
  EXPECT_GT(tight->stats().n_preemptions, 0);
  testing::expect_all_free(*tight);
}

}  // namespace
}  // namespace deepinfer
