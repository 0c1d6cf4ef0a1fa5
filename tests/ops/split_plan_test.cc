// The pipelined GEMM's split-K plan (src/kernels/gemm/split_plan.h) without a GPU: no split when
// the tiles fill the GPU or K has one sub-range; otherwise the count with the fewest waves x
// sub-ranges per CTA, the fewest splits on ties, every split non-empty.
#include "kernels/gemm/split_plan.h"

#include <gtest/gtest.h>

namespace deepinfer::kernels {
namespace {

TEST(SplitPlanTest, NoSplitWhenTheTilesFillTheGpuOrKIsOneSubRange) {
  EXPECT_EQ(plan_k_splits(8, 132, 132), 1);
  EXPECT_EQ(plan_k_splits(8, 2048, 132), 1);
  EXPECT_EQ(plan_k_splits(1, 4, 132), 1);
  EXPECT_EQ(plan_k_splits(8, 0, 132), 1);
}

TEST(SplitPlanTest, FillsTheGpuWithTheFewestWavesAndSplits) {
  EXPECT_EQ(plan_k_splits(8, 1, 132), 8);    // one tile: every sub-range its own CTA
  EXPECT_EQ(plan_k_splits(8, 32, 132), 4);   // 4 x 32 = 128 CTAs: one wave of 2 sub-ranges
  EXPECT_EQ(plan_k_splits(8, 128, 132), 1);  // two splits would be two waves: no gain
  EXPECT_EQ(plan_k_splits(8, 64, 132), 2);   // 128 CTAs of 4 sub-ranges beats 8 x 64 in 4 waves
  EXPECT_EQ(plan_k_splits(4, 3, 132), 4);
}

TEST(SplitPlanTest, NeverWorseThanNoSplitAndEverySplitHoldsASubRange) {
  for (int P = 1; P <= 8; ++P)
    for (int64_t tiles = 1; tiles < 300; ++tiles) {
      const int splits = plan_k_splits(P, tiles, 132);
      ASSERT_GE(splits, 1);
      ASSERT_LE(splits, P);
      const int spc = (P + splits - 1) / splits;
      EXPECT_EQ((P + spc - 1) / spc, splits) << "P " << P << " tiles " << tiles;  // none empty
      const int64_t cost = (tiles * splits + 131) / 132 * spc;
      EXPECT_LE(cost, (tiles + 131) / 132 * P) << "P " << P << " tiles " << tiles;
    }
}

}  // namespace
}  // namespace deepinfer::kernels
