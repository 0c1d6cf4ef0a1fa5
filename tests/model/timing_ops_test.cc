// TimingOps (the bench's per-op breakdown) must time the launches the model itself runs: a Model
// built over the decorator, from the weights another Model holds, keeps their backend-prepared
// copies (Model::weights(), TimingOps::prepare_linear forwarded) and reaches the backend's fused
// routing + experts call (moe_route_experts_out forwarded, not the base class's two calls), with
// the same logits as the undecorated model.
#include <memory>
#include <optional>

#include "loader/weight_binding.h"
#include "model/model.h"
#include "model_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/timing_ops.h"

namespace deepinfer {
namespace {

// A CPU backend that "prepares" every linear weight it is offered (a view of the same values, which
// the CPU linear ignores) and counts what reaches it.
class PreparingCpuOps final : public ops::cpu::CpuOps {
 public:
  bool prepare_linear(tensor::LinearWeight& w) override {
    ++prepare_calls;
    if (!w.prepared.empty()) ++already_prepared;
    w.prepared = w.weight;
    return true;
  }
  void moe_route_experts_out(const ops::MoeRouting& r, const tensor::TensorView& x,
                             std::span<const ops::ExpertWeights> experts, const ops::MoeParams& params,
                             const tensor::TensorView& shared, const tensor::TensorView& out, int shared_lane) override {
    ++fused_moe_calls;
    CpuOps::moe_route_experts_out(r, x, experts, params, shared, out, shared_lane);
  }
  int prepare_calls = 0, already_prepared = 0, fused_moe_calls = 0;
};

TEST(TimingOpsTest, TimesTheLaunchesOfTheModelItWraps) {
  auto lm = testing::load("micro", model::Numerics::kOfficial);
  ASSERT_NE(lm, nullptr);
  loader::CheckpointSource source(*lm->checkpoint);
  auto weights = loader::bind_weights(lm->config, source);
  ASSERT_TRUE(weights.is_ok()) << weights.status().to_string();
  PreparingCpuOps backend;
  const model::ModelOptions options{model::Numerics::kOfficial};
  model::Model plain(lm->config, std::move(weights).value(), &backend, options);
  // The LM head, then the dense FP8 projections (model/prepare_projections.h).
  const int offered = backend.prepare_calls;
  EXPECT_GT(offered, 1);
  EXPECT_FALSE(plain.weights().head.prepared.empty());
  ASSERT_EQ(plain.weights().layers[0].attn.wq_a.format, tensor::WeightFormat::kFp8Block);
  EXPECT_FALSE(plain.weights().layers[0].attn.wq_a.prepared.empty());

  ops::TimingOps timing(&backend);
  model::Model timed(plain.config(), plain.weights(), &timing, options);
  EXPECT_EQ(backend.prepare_calls, 2 * offered) << "TimingOps did not forward prepare_linear";
  EXPECT_EQ(backend.already_prepared, offered) << "the second model's weights lost the first one's prepared copies";

  const auto ids = testing::random_ids(12, 5, 512);
  const model::ForwardBatch batch =
      testing::make_batch({{0, {ids.begin(), ids.end()}, 0, testing::iota_blocks(0, 1), 0, 0, {11}}});
  std::optional<model::KvState> s_plain, s_timed;
  for (auto* s : {&s_plain, &s_timed}) {
    s->emplace(lm->config, model::KvStateOptions{1, 4, 16, plain.act_dtype()}, &backend);
    (*s)->reset_slot(0);
  }
  auto rp = plain.forward(batch, *s_plain);
  ASSERT_TRUE(rp.is_ok());
  // (The result's logits live in the backend's step workspace, which the next forward reuses.)
  const auto plain_logits = testing::logits_of(*rp);
  const int fused_plain = backend.fused_moe_calls;
  auto rt = timed.forward(batch, *s_timed);
  ASSERT_TRUE(rt.is_ok());
  EXPECT_EQ(testing::logits_of(*rt), plain_logits);
  ASSERT_GT(fused_plain, 0);
  EXPECT_EQ(backend.fused_moe_calls, 2 * fused_plain) << "the timed model's MoE layers took the base class's calls";
  EXPECT_EQ(timing.totals().count("moe_route"), 0u);
  ASSERT_EQ(timing.totals().count("moe_experts"), 1u);
  EXPECT_EQ(timing.totals().at("moe_experts").first, fused_plain);
  EXPECT_EQ(timing.totals().at("embed").first, 1);
}

}  // namespace
}  // namespace deepinfer
