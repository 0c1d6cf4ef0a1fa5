// The fixed-shape step that graph replay needs (Model::make_step with fixed = true: emission plans
// padded to one row per token, block tables padded to whole quanta) must compute exactly what the
// exact-shape step computes. On the CPU a derived CpuOps reports graph support and treats the
// prepare pass as the real one, so every decode step below runs in fixed shapes; its logits are
// compared bit for bit with the ordinary model's, across emission boundaries of both compressor
// ratios, window eviction and block-table growth. (The CUDA replay itself is tested in
// cuda_model_test.)
#include <cstring>
#include <memory>
#include <optional>

#include "fixed_shape_ops.h"
#include "loader/weight_binding.h"
#include "model/model.h"
#include "model_test_util.h"
#include "ops/batch.h"

namespace deepinfer {
namespace {

using testing::FixedShapeCpuOps;

model::KvState make_state(const engine::LoadedModel& lm, ops::Ops* ops) {
  model::KvStateOptions so{2, 24, 16, lm.model->act_dtype()};
  model::KvState state(lm.config, so, ops);
  for (int32_t s = 0; s < 2; ++s) state.reset_slot(s);
  return state;
}

// The micro checkpoint (window 16, ratios 4/16, block_tokens 16, an MTP block) twice: the ordinary
// model, and one on FixedShapeCpuOps whose graph-shaped steps run in fixed shapes; each its state.
class GraphShapesTest : public ::testing::TestWithParam<model::Numerics> {
 protected:
  void SetUp() override {
    lm_ = testing::load("micro", GetParam());
    ASSERT_NE(lm_, nullptr);
    loader::CheckpointSource source(*lm_->checkpoint);
    auto weights = loader::bind_weights(lm_->config, source);
    ASSERT_TRUE(weights.is_ok()) << weights.status().to_string();
    fixed_ = std::make_unique<model::Model>(lm_->config, std::move(weights).value(), &fixed_ops_,
                                            model::ModelOptions{GetParam()});
    exact_state_.emplace(make_state(*lm_, lm_->ops.get()));
    fixed_state_.emplace(make_state(*lm_, &fixed_ops_));
  }
  std::unique_ptr<engine::LoadedModel> lm_;
  FixedShapeCpuOps fixed_ops_;
  std::unique_ptr<model::Model> fixed_;
  std::optional<model::KvState> exact_state_, fixed_state_;
};

TEST_P(GraphShapesTest, FixedShapeDecodeEqualsExactShapes) {
  engine::LoadedModel* lm = lm_.get();
  model::Model& fixed = *fixed_;
  FixedShapeCpuOps& fixed_ops = fixed_ops_;
  model::KvState& exact_state = *exact_state_;
  model::KvState& fixed_state = *fixed_state_;
  const auto a = testing::random_ids(200, 11, 512), b = testing::random_ids(200, 12, 512);
  // Prefill 20 and 7 tokens (too long for a graph: both models run exact shapes), then steps of
  // 1 token per sequence, every fifth step 3 tokens (a verification-sized step); every other step
  // keeps every row's hidden state (the MTP drafter's steps), which must be the exact step's too.
  int32_t pa = 20, pb = 7;
  auto step = [&](int32_t na, int32_t nb, bool keep_all) {
    std::vector<testing::SeqChunk> chunks = {
        {0, {a.begin() + pa, a.begin() + pa + na}, pa, testing::iota_blocks(0, (pa + na) / 16 + 1), 0, 0, {na - 1}},
        {1, {b.begin() + pb, b.begin() + pb + nb}, pb, testing::iota_blocks(12, (pb + nb) / 16 + 1), 0, 0, {nb - 1}}};
    model::ForwardBatch batch = testing::make_batch(chunks);
    batch.keep_hidden_all = keep_all;
    auto re = lm->model->forward(batch, exact_state);
    auto rf = fixed.forward(batch, fixed_state);
    EXPECT_TRUE(re.is_ok() && rf.is_ok());
    EXPECT_EQ(testing::logits_of(*rf), testing::logits_of(*re)) << "positions " << pa << " / " << pb;
    if (keep_all && re.is_ok() && rf.is_ok()) {
      const tensor::TensorView& he = re->hidden;
      const tensor::TensorView& hf = rf->hidden;
      ASSERT_EQ(hf.shape_string(), he.shape_string());
      const auto bytes = static_cast<size_t>(he.numel()) * tensor::dtype_size(he.dtype);
      EXPECT_EQ(std::memcmp(hf.data, he.data, bytes), 0) << "hidden states at " << pa << " / " << pb;
    }
    pa += na;
    pb += nb;
  };
  {
    std::vector<testing::SeqChunk> prefill = {{0, {a.begin(), a.begin() + pa}, 0, testing::iota_blocks(0, 2), 0, 0, {pa - 1}},
                                              {1, {b.begin(), b.begin() + pb}, 0, testing::iota_blocks(12, 1), 0, 0, {pb - 1}}};
    const model::ForwardBatch batch = testing::make_batch(prefill);
    ASSERT_TRUE(lm->model->forward(batch, exact_state).is_ok());
    ASSERT_TRUE(fixed.forward(batch, fixed_state).is_ok());
  }
  ASSERT_EQ(fixed_ops.prepared, 0) << "a 20-token prefill is not graph-shaped";
  for (int i = 0; i < 100 && !HasFailure(); ++i) step(i % 5 == 4 ? 3 : 1, i % 5 == 2 ? 3 : 1, i % 2 == 1);
  EXPECT_EQ(fixed_ops.prepared, 100);
}

// The MTP block's steps (the drafter's) replay graphs too: in fixed shapes they compute what the
// exact-shape step does, over a sequence whose target rows run one by one, each step's MTP row
// reading the target's hidden state at its position.
TEST_P(GraphShapesTest, FixedShapeMtpStepsEqualExactShapes) {
  engine::LoadedModel* lm = lm_.get();
  ASSERT_GT(lm->config.n_mtp_layers, 0);
  model::Model& fixed = *fixed_;
  model::KvState& exact_state = *exact_state_;
  model::KvState& fixed_state = *fixed_state_;
  const auto a = testing::random_ids(60, 13, 512);
  const int64_t hc = lm->config.hc_mult, D = lm->config.hidden_size;
  std::vector<uint8_t> hidden;  // the target row's hidden state, kept past the step's workspace
  for (int32_t p = 0; p + 1 < 60 && !HasFailure(); ++p) {
    // The target row at p (one by one: every step graph-shaped), its hidden state kept.
    model::ForwardBatch target = testing::make_batch({{0, {a[p]}, p, testing::iota_blocks(0, p / 16 + 1), 0, 0, {0}}});
    target.keep_hidden_all = true;
    auto te = lm->model->forward(target, exact_state);
    auto tf = fixed.forward(target, fixed_state);
    ASSERT_TRUE(te.is_ok() && tf.is_ok());
    hidden.resize(static_cast<size_t>(te->hidden.numel()) * tensor::dtype_size(te->hidden.dtype));
    std::memcpy(hidden.data(), te->hidden.data, hidden.size());
    const tensor::TensorView h = tensor::TensorView::contiguous(hidden.data(), te->hidden.dtype, {1, hc, D});
    // The MTP row at p: the target's state at p with the token at p + 1.
    model::ForwardBatch mtp = testing::make_batch({{0, {a[p + 1]}, p, testing::iota_blocks(0, p / 16 + 1), 0, 0, {0}}});
    mtp.keep_hidden = true;
    auto me = lm->model->mtp_forward(mtp, h, exact_state);
    auto mf = fixed.mtp_forward(mtp, h, fixed_state);
    ASSERT_TRUE(me.is_ok() && mf.is_ok()) << me.status().to_string() << mf.status().to_string();
    EXPECT_EQ(testing::logits_of(*mf), testing::logits_of(*me)) << "position " << p;
  }
  EXPECT_EQ(fixed_ops_.prepared, 2 * 59) << "every target and MTP step graph-shaped";
}

INSTANTIATE_TEST_SUITE_P(Numerics, GraphShapesTest,
                         ::testing::Values(model::Numerics::kOfficial, model::Numerics::kPlain),
                         [](const auto& info) { return info.param == model::Numerics::kOfficial ? "Official" : "Plain"; });

TEST(PadEmissionsTest, PadsWithRowsThatEmitNothing) {
  ops::EmitPlan plan;
  plan.h_token = {0, 3};
  plan.h_group = {5, 9};
  plan.h_dst = {17, -1};
  plan.n_emit = 2;
  ops::pad_emissions(4, &plan);
  EXPECT_EQ(plan.n_emit, 4);
  EXPECT_EQ(plan.h_token, (std::vector<int32_t>{0, 3, 4, 4}));
  EXPECT_EQ(plan.h_group, (std::vector<int32_t>{5, 9, 0, 0}));
  EXPECT_EQ(plan.h_dst, (std::vector<int32_t>{17, -1, -1, -1}));
}

}  // namespace
}  // namespace deepinfer
