// Ops side regions (ops.h, "concurrency") without a GPU: the call order every backend shares —
// begin, end, join, one region at a time — is checked in the Ops base class, so an unbalanced
// region in a model aborts in the CPU tests too; the hooks a backend overrides run in that order;
// a new step clears a region a failed pass left open; two lanes' regions may be unjoined at once.
#include <gtest/gtest.h>

#include <string>

#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops {
namespace {

// CpuOps that logs the side-region hooks it receives.
class HookLog final : public cpu::CpuOps {
 public:
  std::string log;

 protected:
  void on_side_begin(int lane) override { log += "b" + std::to_string(lane); }
  void on_side_end(int lane) override { log += "e" + std::to_string(lane); }
  void on_side_join(int lane) override { log += "j" + std::to_string(lane); }
};

TEST(SideRegionTest, HooksRunInOrderAndTheRegionIsTracked) {
  HookLog ops;
  EXPECT_TRUE(ops.side_idle());
  ops.side_begin();
  EXPECT_FALSE(ops.side_idle());
  ops.side_end();
  EXPECT_FALSE(ops.side_idle());  // ended, not yet joined
  ops.side_join();
  EXPECT_TRUE(ops.side_idle());
  ops.side_begin();
  ops.side_end();
  ops.side_join();
  EXPECT_EQ(ops.log, "b0e0j0b0e0j0");
}

TEST(SideRegionTest, ANewStepClearsAnAbandonedRegion) {
  HookLog ops;
  ops.side_begin();
  ops.begin_step();
  EXPECT_TRUE(ops.side_idle());
  ops.side_begin();  // allowed again
  EXPECT_EQ(ops.log, "b0b0");
}

// Two lanes: a region ended in lane 0 stays unjoined while lane 1's runs; they join in any order,
// and the ops are idle only once both have.
TEST(SideRegionTest, TwoLanesOverlap) {
  HookLog ops;
  ops.side_begin(0);
  ops.side_end(0);
  ops.side_begin(1);
  ops.side_end(1);
  ops.side_join(0);
  EXPECT_FALSE(ops.side_idle());  // lane 1 still ended, not joined
  ops.side_join(1);
  EXPECT_TRUE(ops.side_idle());
  ops.side_begin(1);  // a lane is free again once joined
  ops.side_end(1);
  ops.side_join(1);
  EXPECT_EQ(ops.log, "b0e0b1e1j0j1b1e1j1");
  ops.side_begin(0);
  ops.begin_step();  // clears every lane and the open one
  EXPECT_TRUE(ops.side_idle());
  ops.side_begin(1);
  ops.side_end(1);
  ops.side_join(1);
}

TEST(SideRegionDeathTest, UnbalancedCallsAbortNamingTheProblem) {
  EXPECT_DEATH(
      {
        cpu::CpuOps ops;
        ops.side_end();
      },
      "side_end without side_begin");
  EXPECT_DEATH(
      {
        cpu::CpuOps ops;
        ops.side_join();
      },
      "side_join without a side region ended by side_end");
  EXPECT_DEATH(
      {
        cpu::CpuOps ops;
        ops.side_begin();
        ops.side_begin();
      },
      "already open");
  EXPECT_DEATH(
      {
        cpu::CpuOps ops;
        ops.side_begin();
        ops.workspace_release(ops.workspace_mark());
      },
      "inside a side region");
  EXPECT_DEATH(
      {
        cpu::CpuOps ops;
        ops.side_begin(0);
        ops.side_begin(1);  // lane 0 still issuing
      },
      "lane 0 is still open");
  EXPECT_DEATH(
      {
        cpu::CpuOps ops;
        ops.side_begin(1);
        ops.side_end(0);  // the open region is lane 1's
      },
      "side_end without side_begin");
  EXPECT_DEATH(
      {
        cpu::CpuOps ops;
        ops.side_begin(2);
      },
      "lane 2");
  EXPECT_DEATH(
      {
        cpu::CpuOps ops;  // the shared expert's lane named, but no region ended in it
        ops.moe_experts_out({}, {}, {}, {}, MoeParams{}, {}, {}, /*shared_lane=*/0);
      },
      "side_join without a side region ended by side_end");
  EXPECT_DEATH(
      {
        cpu::CpuOps ops;
        ops.side_begin(0);
        ops.side_end(0);
        ops.side_begin(1);
        ops.side_end(1);
        ops.side_join(1);
        ops.workspace_release(ops.workspace_mark());  // lane 0 not joined
      },
      "inside a side region");
}

}  // namespace
}  // namespace deepinfer::ops
