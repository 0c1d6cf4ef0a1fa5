// Forward-pass consistency on the CPU reference: chunked prefill and token-by-token decode equal
// one forward over the whole sequence (bit for bit), batching never changes a sequence's logits,
// slots are independent after reset, exact-mode replay after a prefix hit reproduces the cold run,
// and the two numerics contracts differ by a measured amount.
#include <cmath>

#include "model_test_util.h"

namespace deepinfer {
namespace {

using testing::SeqChunk;

model::KvState make_state(const engine::LoadedModel& lm, int32_t n_slots, int32_t n_blocks, int32_t block_tokens) {
  model::KvStateOptions so{n_slots, n_blocks, block_tokens, lm.model->act_dtype()};
  model::KvState state(lm.config, so, lm.ops.get());
  for (int32_t s = 0; s < n_slots; ++s) state.reset_slot(s);
  return state;
}

// Logits at `wanted` positions of `ids` processed in chunks of `chunk` tokens.
std::vector<std::vector<float>> run_chunked(engine::LoadedModel& lm, const std::vector<int32_t>& ids, int64_t chunk,
                                            const std::vector<int32_t>& wanted, int32_t block_tokens) {
  const int32_t n = static_cast<int32_t>(ids.size());
  const int32_t n_blocks = n / block_tokens + 1;
  auto state = make_state(lm, 1, n_blocks, block_tokens);
  std::vector<std::vector<float>> out;
  for (int32_t begin = 0; begin < n; begin += static_cast<int32_t>(chunk)) {
    const int32_t end = std::min<int32_t>(n, begin + static_cast<int32_t>(chunk));
    SeqChunk c{0, std::vector<int32_t>(ids.begin() + begin, ids.begin() + end), begin, testing::iota_blocks(0, n_blocks)};
    for (int32_t p : wanted)
      if (p >= begin && p < end) c.logit_offsets.push_back(p - begin);
    auto r = lm.model->forward(testing::make_batch({c}), state);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    for (auto& row : testing::logits_of(*r)) out.push_back(std::move(row));
  }
  return out;
}

class ConsistencyTest : public ::testing::TestWithParam<model::Numerics> {};

TEST_P(ConsistencyTest, ChunkedPrefillEqualsOneShotOnTinyV4f) {
  auto lm = testing::load("tiny-v4f", GetParam());
  ASSERT_NE(lm, nullptr);
  const auto ids = testing::random_ids(300, 5, 128000);
  const std::vector<int32_t> wanted = {0, 3, 66, 67, 68, 127, 128, 129, 254, 255, 256, 299};
  const auto one = run_chunked(*lm, ids, 300, wanted, 256);
  for (int64_t chunk : {37, 133}) {
    const auto chunked = run_chunked(*lm, ids, chunk, wanted, 256);
    ASSERT_EQ(chunked.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(chunked[i], one[i]) << "chunk " << chunk << " position " << wanted[i];
  }
}

TEST_P(ConsistencyTest, TokenByTokenDecodeEqualsOneShot) {
  // micro has the tiny-short geometry: window 16, ratios 4/16, index_topk 4, so 100 tokens cross
  // window eviction, CSA selection onset (p >= 19) and several HCA rows.
  auto lm = testing::load("micro", GetParam());
  ASSERT_NE(lm, nullptr);
  const auto ids = testing::random_ids(100, 9, 512);
  std::vector<int32_t> wanted(100);
  std::iota(wanted.begin(), wanted.end(), 0);
  const auto one = run_chunked(*lm, ids, 100, wanted, 16);
  const auto steps = run_chunked(*lm, ids, 1, wanted, 16);
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(steps[i], one[i]) << "position " << i;
}

TEST_P(ConsistencyTest, BatchingNeverChangesASequence) {
  auto lm = testing::load("micro", GetParam());
  ASSERT_NE(lm, nullptr);
  const auto a = testing::random_ids(70, 1, 512), b = testing::random_ids(45, 2, 512);
  // Alone: a in two chunks (50 + 20), b in one.
  auto alone = make_state(*lm, 3, 16, 16);
  auto ra1 = lm->model->forward(testing::make_batch({{0, {a.begin(), a.begin() + 50}, 0, testing::iota_blocks(0, 5), 0, 0, {49}}}), alone);
  ASSERT_TRUE(ra1.is_ok());
  const auto a50 = testing::logits_of(*ra1);
  auto ra2 = lm->model->forward(testing::make_batch({{0, {a.begin() + 50, a.end()}, 50, testing::iota_blocks(0, 5), 0, 0, {19}}}), alone);
  const auto a70 = testing::logits_of(*ra2);
  auto rb = lm->model->forward(testing::make_batch({{1, b, 0, testing::iota_blocks(5, 3), 0, 0, {44}}}), alone);
  const auto b45 = testing::logits_of(*rb);
  // Together: b's prefill batched with a's first chunk, then a's second chunk with a fresh c.
  auto together = make_state(*lm, 3, 16, 16);
  auto r1 = lm->model->forward(testing::make_batch({{2, b, 0, testing::iota_blocks(8, 3), 0, 0, {44}},
                                                    {0, {a.begin(), a.begin() + 50}, 0, testing::iota_blocks(0, 5), 0, 0, {49}}}),
                               together);
  ASSERT_TRUE(r1.is_ok()) << r1.status().to_string();
  const auto l1 = testing::logits_of(*r1);
  EXPECT_EQ(l1[0], b45[0]);
  EXPECT_EQ(l1[1], a50[0]);
  const auto c = testing::random_ids(33, 3, 512);
  auto r2 = lm->model->forward(testing::make_batch({{0, {a.begin() + 50, a.end()}, 50, testing::iota_blocks(0, 5), 0, 0, {19}},
                                                    {1, c, 0, testing::iota_blocks(11, 3), 0, 0, {32}}}),
                               together);
  ASSERT_TRUE(r2.is_ok());
  EXPECT_EQ(testing::logits_of(*r2)[0], a70[0]);
}

TEST_P(ConsistencyTest, ResetSlotForgetsThePreviousSequence) {
  auto lm = testing::load("micro", GetParam());
  ASSERT_NE(lm, nullptr);
  const auto a = testing::random_ids(40, 4, 512), b = testing::random_ids(37, 5, 512);
  auto fresh = make_state(*lm, 1, 4, 16);
  const auto b_alone = testing::logits_of(*lm->model->forward(testing::make_batch({{0, b, 0, {0, 1, 2}, 0, 0, {36}}}), fresh));
  auto reused = make_state(*lm, 1, 4, 16);
  ASSERT_TRUE(lm->model->forward(testing::make_batch({{0, a, 0, {0, 1, 2}, 0, 0, {39}}}), reused).is_ok());
  reused.reset_slot(0);
  const auto b_after = testing::logits_of(*lm->model->forward(testing::make_batch({{0, b, 0, {0, 1, 2}, 0, 0, {36}}}), reused));
  EXPECT_EQ(b_after, b_alone);
}

TEST_P(ConsistencyTest, ExactReplayAfterPrefixHitReproducesTheColdRun) {
  auto lm = testing::load("micro", GetParam());
  ASSERT_NE(lm, nullptr);
  const auto ids = testing::random_ids(200, 6, 512);
  const int32_t H = 192;  // cached history (12 blocks of 16)
  const int64_t W = lm->config.sliding_window;
  const int32_t R = H - static_cast<int32_t>(lm->config.num_hidden_layers * (W - 1) + 4);  // exact receptive field
  auto state = make_state(*lm, 2, 13, 16);
  const auto cold = testing::logits_of(*lm->model->forward(
      testing::make_batch({{0, ids, 0, testing::iota_blocks(0, 13), 0, 0, {192, 199}}}), state));
  // Slot 1 shares blocks 0..11 (read-only), owns block 12, and replays [R, H) with no window below R.
  std::vector<int32_t> table = testing::iota_blocks(0, 12);
  table.push_back(12);
  state.reset_slot(1);
  const auto warm = testing::logits_of(*lm->model->forward(
      testing::make_batch({{1, {ids.begin() + R, ids.end()}, R, table, H, R, {H - R, 199 - R}}}), state));
  EXPECT_EQ(warm, cold);
  // Bounded replay (only the last W tokens) is an approximation: it must differ, a little.
  state.reset_slot(1);
  const int32_t Rb = H - static_cast<int32_t>(W);
  const auto bounded = testing::logits_of(*lm->model->forward(
      testing::make_batch({{1, {ids.begin() + Rb, ids.end()}, Rb, table, H, Rb, {199 - Rb}}}), state));
  float drift = 0.0f;
  for (size_t v = 0; v < bounded[0].size(); ++v) drift = std::max(drift, std::fabs(bounded[0][v] - cold[1][v]));
  std::printf("bounded replay (W=%lld) max |logit drift| at the last position: %.4g\n", static_cast<long long>(W), drift);
  EXPECT_GT(drift, 0.0f);
}

// Speculative decoding's rewind: each step runs a few real rows and then up to `spare` rows it
// gives up (rejected drafts: the next step starts at the first of them again). With that many
// spare ring positions (window rings, compressor states) the logits are the one-shot run's, bit
// for bit — window eviction, CSA and HCA emissions inside the given-up rows included; without
// them the given-up rows overwrite rows the next positions read.
std::vector<std::vector<float>> run_giving_up_rows(engine::LoadedModel& lm, const std::vector<int32_t>& ids,
                                                   int32_t spare, int32_t given_up_token) {
  model::KvStateOptions so{1, 8, 16, lm.model->act_dtype()};
  so.spare_positions = spare;
  model::KvState state(lm.config, so, lm.ops.get());
  state.reset_slot(0);
  std::vector<std::vector<float>> out;
  const auto n = static_cast<int32_t>(ids.size());
  for (int32_t p = 0, step = 0; p < n; ++step) {
    const int32_t real = std::min(n - p, 1 + step % 5), given_up = step % 5;  // 0..4 rows given up
    testing::SeqChunk c{0, std::vector<int32_t>(ids.begin() + p, ids.begin() + p + real), p, testing::iota_blocks(0, 8)};
    c.ids.insert(c.ids.end(), static_cast<size_t>(given_up), given_up_token);
    for (int32_t i = 0; i < real; ++i) c.logit_offsets.push_back(i);
    auto r = lm.model->forward(testing::make_batch({c}), state);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (!r.is_ok()) break;
    for (auto& row : testing::logits_of(*r)) out.push_back(std::move(row));
    p += real;
  }
  return out;
}

TEST_P(ConsistencyTest, RowsGivenUpPastTheEndLeaveNoTraceWithSparePositions) {
  auto lm = testing::load("micro", GetParam());  // window 16, ratios 4 (overlapped) and 16
  ASSERT_NE(lm, nullptr);
  const auto ids = testing::random_ids(100, 11, 512);
  std::vector<int32_t> wanted(100);
  std::iota(wanted.begin(), wanted.end(), 0);
  const auto one = run_chunked(*lm, ids, 100, wanted, 16);
  const auto spare = run_giving_up_rows(*lm, ids, 4, 7);
  ASSERT_EQ(spare.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(spare[i], one[i]) << "position " << i;
  const auto none = run_giving_up_rows(*lm, ids, 0, 7);
  ASSERT_EQ(none.size(), one.size());
  size_t differ = 0;
  for (size_t i = 0; i < one.size(); ++i) differ += none[i] != one[i] ? 1 : 0;
  EXPECT_GT(differ, 10u) << "the given-up rows should matter without spare positions";
}

INSTANTIATE_TEST_SUITE_P(Numerics, ConsistencyTest,
                         ::testing::Values(model::Numerics::kOfficial, model::Numerics::kPlain),
                         [](const auto& info) { return info.param == model::Numerics::kOfficial ? "Official" : "Plain"; });

TEST(NumericsContractTest, OfficialAndPlainDifferByAMeasuredAmount) {
  auto official = testing::load("tiny-v4f", model::Numerics::kOfficial);
  auto plain = testing::load("tiny-v4f", model::Numerics::kPlain);
  ASSERT_TRUE(official && plain);
  const auto ids = testing::random_ids(300, 1234, 128000);
  std::vector<int32_t> wanted;
  for (int32_t p = 0; p < 300; p += 13) wanted.push_back(p);
  const auto lo = run_chunked(*official, ids, 300, wanted, 256);
  const auto lp = run_chunked(*plain, ids, 300, wanted, 256);
  float worst = 0.0f;
  int agree = 0;
  for (size_t i = 0; i < lo.size(); ++i) {
    for (size_t v = 0; v < lo[i].size(); ++v) worst = std::max(worst, std::fabs(lo[i][v] - lp[i][v]));
    agree += std::max_element(lo[i].begin(), lo[i].end()) - lo[i].begin() ==
             std::max_element(lp[i].begin(), lp[i].end()) - lp[i].begin();
  }
  std::printf("official vs plain numerics: max |logit diff| %.4g, top-1 agreement %d/%zu\n", worst, agree, lo.size());
  EXPECT_GT(worst, 0.0f);  // the contract really changes the math
  EXPECT_LT(worst, 2.0f);  // but stays a small perturbation
  EXPECT_GE(agree, static_cast<int>(lo.size()) * 7 / 10);
}

}  // namespace
}  // namespace deepinfer
