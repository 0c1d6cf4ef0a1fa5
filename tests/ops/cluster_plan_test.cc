// The cluster size of a decode-sized tensor-core attention launch (kernels/attention/cluster_plan.h)
// and of a decode-sized mHC finalize (kernels/norm/hc_cluster_plan.h): which sizes a shape allows,
// the forced sizes and "never", and the automatic choice — the largest size whose clusters all run
// at once, else the one-CTA kernel.
#include "kernels/attention/cluster_plan.h"
#include "kernels/norm/hc_cluster_plan.h"

#include <gtest/gtest.h>

namespace deepinfer::kernels {
namespace {

// An H200-like device: 16 clusters of 8, 30 of 4, 66 of 2 run at once.
int h200(int c) { return c == 8 ? 16 : c == 4 ? 30 : 66; }

TEST(ClusterPlanTest, SizesEachHeadDimAllows) {
  // P.V splits a row's columns over the C CTAs' 8 warps: d / C >= 64 columns.
  EXPECT_TRUE(cluster_attention_supports(512, 2) && cluster_attention_supports(512, 4) &&
              cluster_attention_supports(512, 8));
  EXPECT_TRUE(cluster_attention_supports(256, 2) && cluster_attention_supports(256, 4));
  EXPECT_FALSE(cluster_attention_supports(256, 8));
  EXPECT_TRUE(cluster_attention_supports(128, 2));
  EXPECT_FALSE(cluster_attention_supports(128, 4));
  EXPECT_FALSE(cluster_attention_supports(64, 2));
  EXPECT_FALSE(cluster_attention_supports(96, 2));   // not a tensor-core head_dim
  EXPECT_FALSE(cluster_attention_supports(512, 3));  // not a cluster size
  EXPECT_FALSE(cluster_attention_supports(512, 16));
}

TEST(ClusterPlanTest, ForcedSizesAndNever) {
  EXPECT_EQ(plan_attention_cluster(512, 1000, 2, h200), 2);  // forced: even when they queue
  EXPECT_EQ(plan_attention_cluster(512, 4, 4, h200), 4);
  EXPECT_EQ(plan_attention_cluster(128, 4, 8, h200), 1);  // not allowed at this head_dim
  EXPECT_EQ(plan_attention_cluster(512, 4, 0, h200), 1);  // never
  EXPECT_EQ(plan_attention_cluster(512, 4, 1, h200), 1);
}

TEST(ClusterPlanTest, AutomaticTakesTheLargestSizeThatRunsAtOnce) {
  // 64 heads = 4 head groups per token.
  EXPECT_EQ(plan_attention_cluster(512, 1 * 4, -1, h200), 8);   // batch 1: 4 clusters of 8
  EXPECT_EQ(plan_attention_cluster(512, 4 * 4, -1, h200), 8);   // batch 4: 16, all at once
  EXPECT_EQ(plan_attention_cluster(512, 5 * 4, -1, h200), 4);   // 20 > 16 of 8, <= 30 of 4
  EXPECT_EQ(plan_attention_cluster(512, 8 * 4, -1, h200), 2);   // 32 > 30 of 4
  EXPECT_EQ(plan_attention_cluster(512, 16 * 4, -1, h200), 2);  // 64 <= 66 of 2
  EXPECT_EQ(plan_attention_cluster(512, 17 * 4, -1, h200), 1);  // the one-CTA kernel fills the GPU
  EXPECT_EQ(plan_attention_cluster(128, 4, -1, h200), 2);       // head_dim 128: 2 at most
  EXPECT_EQ(plan_attention_cluster(64, 1, -1, h200), 1);
  // A device that runs no cluster of a size (occupancy query failed: 0) never gets that size.
  EXPECT_EQ(plan_attention_cluster(512, 4, -1, [](int c) { return c == 2 ? 66 : 0; }), 2);
  EXPECT_EQ(plan_attention_cluster(512, 4, -1, [](int) { return 0; }), 1);
}

TEST(HcClusterPlanTest, SizesEachWidthAllows) {
  // D / C a multiple of 512 (256 threads x column pairs; whole 128-channel blocks), D <= 4096, hc 4.
  EXPECT_TRUE(hc_cluster_supports(4096, 4, 2) && hc_cluster_supports(4096, 4, 4) && hc_cluster_supports(4096, 4, 8));
  EXPECT_TRUE(hc_cluster_supports(2048, 4, 4));
  EXPECT_FALSE(hc_cluster_supports(2048, 4, 8));
  EXPECT_TRUE(hc_cluster_supports(3072, 4, 2));
  EXPECT_FALSE(hc_cluster_supports(3072, 4, 4));
  EXPECT_FALSE(hc_cluster_supports(8192, 4, 8));  // wider than the folded norm's row
  EXPECT_FALSE(hc_cluster_supports(4096, 2, 8));  // only the V4 stream count is instantiated
  EXPECT_FALSE(hc_cluster_supports(4096, 4, 16));
  EXPECT_FALSE(hc_cluster_supports(4096, 4, 3));
}

TEST(HcClusterPlanTest, ForcedAutomaticAndNever) {
  EXPECT_EQ(plan_hc_cluster(1, 4096, 4, true, -1, h200), 8);   // batch 1: 2 clusters of 8
  EXPECT_EQ(plan_hc_cluster(8, 4096, 4, true, -1, h200), 8);   // 16 of 8 run at once
  EXPECT_EQ(plan_hc_cluster(9, 4096, 4, true, -1, h200), 4);   // 18 > 16, <= 30 of 4
  EXPECT_EQ(plan_hc_cluster(16, 4096, 4, true, -1, h200), 2);  // 32 > 30 of 4, <= 66 of 2
  EXPECT_EQ(plan_hc_cluster(34, 4096, 4, true, -1, h200), 1);  // 68 > 66 of 2
  EXPECT_EQ(plan_hc_cluster(8, 2048, 4, true, -1, h200), 4);   // 2048 allows 4 at most
  EXPECT_EQ(plan_hc_cluster(1, 4096, 4, true, 2, h200), 2);    // forced
  EXPECT_EQ(plan_hc_cluster(63, 4096, 4, true, 8, h200), 8);   // forced, even when they queue
  EXPECT_EQ(plan_hc_cluster(1, 3072, 4, true, 8, h200), 1);    // forced but not allowed
  EXPECT_EQ(plan_hc_cluster(1, 4096, 4, true, 0, h200), 1);    // never
  EXPECT_EQ(plan_hc_cluster(1, 4096, 4, true, 1, h200), 1);
  EXPECT_EQ(plan_hc_cluster(64, 4096, 4, true, 8, h200), 1);   // prefill-sized: the one-CTA kernel
  EXPECT_EQ(plan_hc_cluster(1, 4096, 4, false, 8, h200), 1);   // the norm not folded
  EXPECT_EQ(plan_hc_cluster(1, 4096, 4, true, -1, [](int) { return 0; }), 1);
}

}  // namespace
}  // namespace deepinfer::kernels
