// DSpark draft module of ModelV41 (model_v41_flash.md §7.2). transformers' V4.1 port has no DSpark,
// so this checks shapes and self-consistency: greedy Markov chain = argmax of each returned row,
// drafts are deterministic and leave the target state untouched, batching and chunked ring
// seeding never change a draft, the block is bidirectional and the ring carries the context.
#include <cmath>

#include "model/v41/model_v41.h"
#include "model_v41_test_util.h"

namespace deepinfer {
namespace {

constexpr int32_t kNoise = 500;

// A draft's results on the host (a ForwardResult's logits live only until the next call).
struct Draft {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> tokens;
  std::vector<float> confidence;
};

Draft host_copy(const model::ForwardResult& r) { return {testing::logits_of(r), r.draft_tokens, r.confidence}; }

// Prefill `ids` (one shot or in chunks) into `slot`, then draft the block [next, noise x 4].
Draft draft(engine::LoadedModel& lm, model::KvState& state, const std::vector<int32_t>& ids, int64_t chunk,
            int32_t next, int32_t slot = 0, int32_t last_noise = kNoise) {
  testing::run_v41(lm, state, ids, chunk, {}, slot, slot * 4);
  const int32_t p = static_cast<int32_t>(ids.size());
  auto b = testing::make_batch({{slot, {next, kNoise, kNoise, kNoise, last_noise}, p, {}, 0, 0, {}}});
  auto r = lm.model->mtp_forward(b, tensor::TensorView{}, state);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? host_copy(*r) : Draft{};
}

TEST(DsparkDraftTest, ShapesAndTheGreedyMarkovChain) {
  auto lm = testing::load_v41(model::Numerics::kOfficial);
  ASSERT_NE(lm, nullptr);
  auto state = testing::make_v41_state(*lm, 1, 4);
  const auto r = draft(*lm, state, testing::random_ids(40, 31, 512), 40, 77);
  ASSERT_EQ(r.logits.size(), 5u);
  ASSERT_EQ(r.logits[0].size(), 512u);
  ASSERT_EQ(r.tokens.size(), 5u);
  ASSERT_EQ(r.confidence.size(), 5u);
  const auto& rows = r.logits;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.tokens[i], testing::argmax(rows[i])) << i;
    EXPECT_TRUE(std::isfinite(r.confidence[i]));
    for (float v : rows[i]) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(DsparkDraftTest, DeterministicAndLeavesTheTargetStateUntouched) {
  auto lm = testing::load_v41(model::Numerics::kPlain);
  ASSERT_NE(lm, nullptr);
  const auto ids = testing::random_ids(33, 32, 512);
  auto s1 = testing::make_v41_state(*lm, 1, 4);
  const auto a = draft(*lm, s1, ids, 33, 9);
  auto b2 = testing::make_batch({{0, {9, kNoise, kNoise, kNoise, kNoise}, 33, {}, 0, 0, {}}});
  const auto again = lm->model->mtp_forward(b2, tensor::TensorView{}, s1);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(testing::logits_of(*again), a.logits);
  EXPECT_EQ(again->draft_tokens, a.tokens);
  EXPECT_EQ(again->confidence, a.confidence);
  // The target's next step is the same with or without the drafts in between.
  auto step = testing::make_batch({{0, {9}, 33, testing::iota_blocks(0, 4), 0, 0, {0}}});
  const auto after_draft = testing::logits_of(*lm->model->forward(step, s1));
  auto s2 = testing::make_v41_state(*lm, 1, 4);
  testing::run_v41(*lm, s2, ids, 33, {});
  EXPECT_EQ(testing::logits_of(*lm->model->forward(step, s2)), after_draft);
}

TEST(DsparkDraftTest, BatchingAndChunkedRingSeedingNeverChangeADraft) {
  auto lm = testing::load_v41(model::Numerics::kOfficial);
  ASSERT_NE(lm, nullptr);
  const auto x = testing::random_ids(45, 33, 512), y = testing::random_ids(21, 34, 512);
  auto alone = testing::make_v41_state(*lm, 2, 8);
  const auto dx = draft(*lm, alone, x, 45, 5, 0);
  const auto dy = draft(*lm, alone, y, 21, 6, 1);
  auto chunked = testing::make_v41_state(*lm, 2, 8);
  testing::run_v41(*lm, chunked, x, 7, {}, 0, 0);  // ring entries written 7 rows at a time
  testing::run_v41(*lm, chunked, y, 1, {}, 1, 4);  // ... and one at a time
  auto b = testing::make_batch({{1, {6, kNoise, kNoise, kNoise, kNoise}, 21, {}, 0, 0, {}},
                                {0, {5, kNoise, kNoise, kNoise, kNoise}, 45, {}, 0, 0, {}}});
  const auto both = lm->model->mtp_forward(b, tensor::TensorView{}, chunked);
  ASSERT_TRUE(both.is_ok()) << both.status().to_string();
  const auto rows = testing::logits_of(*both);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(rows[i], dy.logits[i]) << i;
    EXPECT_EQ(rows[5 + i], dx.logits[i]) << i;
    EXPECT_EQ(both->draft_tokens[i], dy.tokens[i]);
    EXPECT_EQ(both->draft_tokens[5 + i], dx.tokens[i]);
    EXPECT_EQ(both->confidence[5 + i], dx.confidence[i]);
  }
}

TEST(DsparkDraftTest, BlockIsBidirectionalAndTheRingCarriesTheContext) {
  auto lm = testing::load_v41(model::Numerics::kPlain);
  ASSERT_NE(lm, nullptr);
  const auto ids = testing::random_ids(30, 35, 512);
  auto s = testing::make_v41_state(*lm, 1, 4);
  const auto base = draft(*lm, s, ids, 30, 11).logits;
  auto s2 = testing::make_v41_state(*lm, 1, 4);
  const auto later_changed = draft(*lm, s2, ids, 30, 11, 0, 123).logits;
  EXPECT_NE(later_changed[0], base[0]);  // row 0 sees the block's last row
  auto other = ids;
  other.back() = (other.back() + 1) % 512;
  auto s3 = testing::make_v41_state(*lm, 1, 4);
  EXPECT_NE(draft(*lm, s3, other, 30, 11).logits[0], base[0]);  // the ring holds target states
}

}  // namespace
}  // namespace deepinfer
