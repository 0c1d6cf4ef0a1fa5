// ModelV41's fixed-shape steps (what step graphs replay: emission plans padded to one row per
// token, block tables padded to whole quanta; step_graph.h) compute exactly what its exact-shape
// steps compute. tiny-v41 twice — the loaded model and one on FixedShapeCpuOps, whose graph-shaped
// steps run in fixed shapes — fed the same prefill and then 80 steps of 1 or 3 tokens per sequence
// across window wraps, ratio-2 group completions and block-table growth, in exact prefill and in
// compact prefill (its decoder rows a cut of the full rows). The CUDA replay itself is checked in
// cuda_model_v41_test.cc.
#include <memory>
#include <optional>

#include "fixed_shape_ops.h"
#include "loader/engram_layout.h"
#include "loader/weight_binding.h"
#include "loader/weights_v41.h"
#include "model/v41/model_v41.h"
#include "model_v41_test_util.h"

namespace deepinfer {
namespace {

using testing::SeqChunk;

struct Mode {
  model::Numerics numerics;
  model::PrefillMode prefill;
};

class V41GraphShapesTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    // keep 12: the 20-token prompt's decoder starts at 8, so its decode steps run on a cut.
    lm_ = testing::load_v41(GetParam().numerics, GetParam().prefill, /*keep=*/12);
    ASSERT_NE(lm_, nullptr);
    loader::CheckpointSource source(*lm_->checkpoint);
    auto weights = loader::bind_weights_v41(lm_->config, source);
    ASSERT_TRUE(weights.is_ok()) << weights.status().to_string();
    auto engram = loader::load_engram_sidecar(lm_->config, lm_->dir);
    ASSERT_TRUE(engram.is_ok()) << engram.status().to_string();
    fixed_ = std::make_unique<model::ModelV41>(lm_->config, std::move(weights).value(), std::move(engram).value(),
                                               &fixed_ops_, lm_->model->options());
  }
  std::unique_ptr<engine::LoadedModel> lm_;
  testing::FixedShapeCpuOps fixed_ops_;
  std::unique_ptr<model::ModelV41> fixed_;
};

TEST_P(V41GraphShapesTest, FixedShapeStepsEqualExactShapes) {
  engine::LoadedModel& lm = *lm_;
  model::KvStateOptions so{2, 32, 16, lm.model->act_dtype()};
  model::KvState exact_state(lm.config, so, lm.ops.get()), fixed_state(lm.config, so, &fixed_ops_);
  for (int32_t s = 0; s < 2; ++s) {
    exact_state.reset_slot(s);
    fixed_state.reset_slot(s);
  }
  const auto a = testing::random_ids(300, 21, 512), b = testing::random_ids(300, 22, 512);
  const int32_t na0 = 20, nb0 = 7;  // the prompts
  int32_t pa = 0, pb = 0;
  auto step = [&](int32_t na, int32_t nb) {
    std::vector<SeqChunk> chunks = {
        {0, {a.begin() + pa, a.begin() + pa + na}, pa, testing::iota_blocks(0, (pa + na) / 16 + 1), 0, 0, {na - 1}},
        {1, {b.begin() + pb, b.begin() + pb + nb}, pb, testing::iota_blocks(16, (pb + nb) / 16 + 1), 0, 0, {nb - 1}}};
    model::ForwardBatch batch = testing::make_batch(chunks);
    batch.n_prompt = {na0, nb0};
    auto re = lm.model->forward(batch, exact_state);
    auto rf = fixed_->forward(batch, fixed_state);
    ASSERT_TRUE(re.is_ok()) << re.status().to_string();
    ASSERT_TRUE(rf.is_ok()) << rf.status().to_string();
    EXPECT_EQ(testing::logits_of(*rf), testing::logits_of(*re)) << "positions " << pa << " / " << pb;
    pa += na;
    pb += nb;
  };
  step(na0, nb0);  // 20 tokens of one sequence: not graph-shaped, both run exact shapes
  ASSERT_EQ(fixed_ops_.prepared, 0) << "a 20-token prefill is not graph-shaped";
  for (int i = 0; i < 80 && !HasFailure(); ++i) step(i % 5 == 4 ? 3 : 1, i % 5 == 2 ? 3 : 1);
  EXPECT_EQ(fixed_ops_.prepared, 80);
}

INSTANTIATE_TEST_SUITE_P(Modes, V41GraphShapesTest,
                         ::testing::Values(Mode{model::Numerics::kOfficial, model::PrefillMode::kExact},
                                           Mode{model::Numerics::kPlain, model::PrefillMode::kExact},
                                           Mode{model::Numerics::kOfficial, model::PrefillMode::kCompact}),
                         [](const auto& info) {
                           const Mode m = info.param;
                           return std::string(m.numerics == model::Numerics::kOfficial ? "Official" : "Plain") +
                                  (m.prefill == model::PrefillMode::kCompact ? "Compact" : "Exact");
                         });

}  // namespace
}  // namespace deepinfer
