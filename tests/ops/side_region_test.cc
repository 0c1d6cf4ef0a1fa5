// Ops side regions (ops.h, "concurrency") without a GPU: the call order every backend shares —
// begin, end, join, one region at a time — is checked in the Ops base class, so an unbalanced
// region in a model aborts in the CPU tests too; the hooks a backend overrides run in that order;
// a new step clears a region a failed pass left open.
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
  void on_side_begin() override { log += "b"; }
  void on_side_end() override { log += "e"; }
  void on_side_join() override { log += "j"; }
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
  EXPECT_EQ(ops.log, "bejbej");
}

TEST(SideRegionTest, ANewStepClearsAnAbandonedRegion) {
  HookLog ops;
  ops.side_begin();
  ops.begin_step();
  EXPECT_TRUE(ops.side_idle());
  ops.side_begin();  // allowed again
  EXPECT_EQ(ops.log, "bb");
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
}

}  // namespace
}  // namespace deepinfer::ops
