// ModelV41 consistency on the CPU reference (tiny-v41, exact prefill): chunked prefill with chunk
// boundaries inside ratio-2 groups and token-by-token decode equal one forward over the prompt,
// bit for bit; batching never changes a sequence; a reset slot forgets its sequence (compressor
// groups, Engram look-back); an exact-length replay after a prefix hit (with the Engram look-back
// supplied) reproduces the cold run. 70 tokens cross window wrap (W 8), group completion, the
// candidate pool (3 blocks x 2 < visible) and top-k (4) selection.
#include <cmath>

#include "model_v41_test_util.h"

namespace deepinfer {
namespace {

using testing::SeqChunk;

class V41ConsistencyTest : public ::testing::TestWithParam<model::Numerics> {};

TEST_P(V41ConsistencyTest, ChunkedPrefillAndDecodeEqualOneShot) {
  auto lm = testing::load_v41(GetParam());
  ASSERT_NE(lm, nullptr);
  const auto ids = testing::random_ids(70, 11, 512);
  std::vector<int32_t> wanted(70);
  std::iota(wanted.begin(), wanted.end(), 0);
  auto s1 = testing::make_v41_state(*lm, 1, 6);
  const auto one = testing::run_v41(*lm, s1, ids, 70, wanted);
  ASSERT_EQ(one.size(), 70u);
  for (int64_t chunk : {1, 7, 33}) {
    auto s = testing::make_v41_state(*lm, 1, 6);
    const auto chunked = testing::run_v41(*lm, s, ids, chunk, wanted);
    ASSERT_EQ(chunked.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(chunked[i], one[i]) << "chunk " << chunk << " position " << i;
  }
  for (const auto& row : one)
    for (float v : row) ASSERT_TRUE(std::isfinite(v));
}

TEST_P(V41ConsistencyTest, BatchingNeverChangesASequence) {
  auto lm = testing::load_v41(GetParam());
  ASSERT_NE(lm, nullptr);
  const auto a = testing::random_ids(41, 1, 512), b = testing::random_ids(29, 2, 512);
  auto alone = testing::make_v41_state(*lm, 2, 8);
  const auto la = testing::run_v41(*lm, alone, a, 41, {40}, 0, 0);
  const auto lb = testing::run_v41(*lm, alone, b, 29, {28}, 1, 4);
  auto together = testing::make_v41_state(*lm, 2, 8);
  model::ForwardBatch batch = testing::make_batch(
      {{1, b, 0, testing::iota_blocks(4, 2), 0, 0, {28}}, {0, a, 0, testing::iota_blocks(0, 3), 0, 0, {40}}});
  batch.n_prompt = {29, 41};
  auto r = lm->model->forward(batch, together);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto l = testing::logits_of(*r);
  EXPECT_EQ(l[0], lb[0]);
  EXPECT_EQ(l[1], la[0]);
}

TEST_P(V41ConsistencyTest, ResetSlotForgetsThePreviousSequence) {
  auto lm = testing::load_v41(GetParam());
  ASSERT_NE(lm, nullptr);
  const auto a = testing::random_ids(37, 4, 512), b = testing::random_ids(23, 5, 512);
  auto fresh = testing::make_v41_state(*lm, 1, 4);
  const auto b_alone = testing::run_v41(*lm, fresh, b, 23, {22});
  auto reused = testing::make_v41_state(*lm, 1, 4);
  testing::run_v41(*lm, reused, a, 37, {36});  // odd length: a half group stays in the compressor
  reused.reset_slot(0);
  EXPECT_EQ(testing::run_v41(*lm, reused, b, 23, {22}), b_alone);
}

TEST_P(V41ConsistencyTest, ExactReplayAfterPrefixHitReproducesTheColdRun) {
  auto lm = testing::load_v41(GetParam());
  ASSERT_NE(lm, nullptr);
  const auto ids = testing::random_ids(200, 6, 512);
  const int32_t H = 192;  // cached history: 12 blocks of 16 positions
  const int32_t W = static_cast<int32_t>(lm->config.sliding_window);
  // The receptive field of 12 stacked windows, rounded down to a ratio-2 group boundary.
  const int32_t R = (H - static_cast<int32_t>(lm->config.num_hidden_layers) * (W - 1)) / 2 * 2;
  auto state = testing::make_v41_state(*lm, 2, 13);
  auto cold_batch = testing::make_batch({{0, ids, 0, testing::iota_blocks(0, 13), 0, 0, {192, 199}}});
  cold_batch.n_prompt = {200};
  const auto cold = testing::logits_of(*lm->model->forward(cold_batch, state));
  // Slot 1 shares blocks 0..11 read-only, owns block 12, replays [R, H) with no window below R
  // and receives the Engram look-back (the three tokens before R) from the batch.
  std::vector<int32_t> table = testing::iota_blocks(0, 12);
  table.push_back(12);
  auto warm_batch = testing::make_batch({{1, {ids.begin() + R, ids.end()}, R, table, H, R, {H - R, 199 - R}}});
  warm_batch.n_prompt = {200};
  warm_batch.engram_lookback = {ids[R - 3], ids[R - 2], ids[R - 1]};
  EXPECT_EQ(testing::logits_of(*lm->model->forward(warm_batch, state)), cold);
  // A short (bounded) replay: without the look-back its first n-grams are truncated, which reaches
  // the last positions through the stacked windows (Engram at layer 1: 11 more windows of 7).
  const int32_t Rb = H - 40;
  std::vector<std::vector<float>> bounded[2];
  for (int with : {0, 1}) {
    state.reset_slot(1);
    auto b = testing::make_batch({{1, {ids.begin() + Rb, ids.end()}, Rb, table, H, Rb, {199 - Rb}}});
    b.n_prompt = {200};
    if (with) b.engram_lookback = {ids[Rb - 3], ids[Rb - 2], ids[Rb - 1]};
    bounded[with] = testing::logits_of(*lm->model->forward(b, state));
  }
  EXPECT_NE(bounded[0], bounded[1]);
  EXPECT_NE(bounded[1][0], cold[1]);  // the window floor still makes it an approximation
}

INSTANTIATE_TEST_SUITE_P(Numerics, V41ConsistencyTest,
                         ::testing::Values(model::Numerics::kOfficial, model::Numerics::kPlain),
                         [](const auto& info) { return info.param == model::Numerics::kOfficial ? "Official" : "Plain"; });

TEST(V41ForwardTest, MalformedBatchesAreErrors) {
  auto lm = testing::load_v41(model::Numerics::kPlain);
  ASSERT_NE(lm, nullptr);
  auto state = testing::make_v41_state(*lm, 1, 2);
  auto b = testing::make_batch({{0, {5, 6, 7}, 0, {0, 1}, 0, 0, {2}}});
  b.n_prompt = {3, 4};
  EXPECT_EQ(lm->model->forward(b, state).status().code(), StatusCode::kInvalidArgument);
  b.n_prompt = {3};
  b.engram_lookback = {1};
  EXPECT_EQ(lm->model->forward(b, state).status().code(), StatusCode::kInvalidArgument);
  b.engram_lookback.clear();
  b.token_ids[1] = 512;
  EXPECT_EQ(lm->model->forward(b, state).status().code(), StatusCode::kInvalidArgument);
  auto nb = testing::make_batch({{0, {5, 6, 7}, 0, {}, 0, 0, {2}}});
  EXPECT_EQ(lm->model->forward(nb, state).status().code(), StatusCode::kInvalidArgument);  // no history blocks
}

}  // namespace
}  // namespace deepinfer
