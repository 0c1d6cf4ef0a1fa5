// KvState::release gives every tensor of a state back to its Ops (Ops::free_persistent): the bench
// builds a state per row, and without it each row's pools stayed until the Ops went (a run of
// large rows then ran out of device memory on an 80 GB GPU). Freeing a tensor the Ops does not
// hold — twice, or one it never allocated — is an error naming the tensor.
#include <gtest/gtest.h>

#include "model/kv_state.h"
#include "model_test_util.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer {
namespace {

TEST(KvStateReleaseTest, EveryTensorGoesBackToTheOps) {
  const auto lm = testing::load("micro", model::Numerics::kPlain);
  ASSERT_NE(lm, nullptr);
  ops::cpu::CpuOps ops;
  model::KvState state(lm->config, {2, 4, 16, tensor::DType::kF32}, &ops);
  ASSERT_GT(state.n_layers(), 0);
  // What the state held, before release forgets it.
  std::vector<tensor::TensorView> held;
  for (int64_t l = 0; l < state.n_layers(); ++l) {
    const model::LayerState& s = state.layer(l);
    for (const tensor::TensorView& t : {s.window, s.comp.kv, s.comp.score, s.idx_comp.kv, s.idx_comp.score,
                                        s.comp_rows, s.idx_keys}) {
      if (!t.empty()) held.push_back(t);
    }
  }
  ASSERT_GT(held.size(), static_cast<size_t>(state.n_layers()));  // windows and compressed layers' pools
  state.release();
  EXPECT_EQ(state.n_layers(), 0);
  state.release();  // nothing left: a no-op
  for (const tensor::TensorView& t : held) {
    EXPECT_DEATH(ops.free_persistent(t), "was not allocated by alloc_persistent") << t.shape_string();
  }
}

TEST(KvStateReleaseTest, FreeingWhatTheOpsDoesNotHoldIsAnError) {
  ops::cpu::CpuOps ops;
  const tensor::TensorView a = ops.alloc_persistent(tensor::DType::kF32, {4, 8});
  const tensor::TensorView b = ops.alloc_persistent(tensor::DType::kF32, {16});
  ops.free_persistent(a);
  EXPECT_DEATH(ops.free_persistent(a), "free_persistent: .4, 8. F32 was not allocated");
  const tensor::TensorView scratch = ops.alloc(tensor::DType::kF32, {4});
  EXPECT_DEATH(ops.free_persistent(scratch), "was not allocated by alloc_persistent");
  ops.free_persistent(b);  // the others stay valid after one is freed
}

}  // namespace
}  // namespace deepinfer
