// The streamed FP4 expert kernel's launch geometry (src/kernels/gemm/expert_stream_plan.h)
// without a GPU: which launches it takes, its plan for V4-Flash's decode expert launches, and the
// invariants every accepted plan keeps (a warp per canonical K sub-range, enough stages loading
// while every team holds one, the ring within shared memory beside the static part).
#include "kernels/gemm/expert_stream_plan.h"

#include <gtest/gtest.h>

namespace deepinfer::kernels {
namespace {

ExpertStreamDims experts(int64_t tokens, int64_t N, int64_t N1, int64_t K, int64_t max_active) {
  ExpertStreamDims d;
  d.tokens = tokens, d.N = N, d.N1 = N1, d.K = K, d.max_active = max_active;
  return d;
}

TEST(ExpertStreamPlanTest, DecodeExpertLaunchesOfV4Flash) {
  ExpertStreamPlan plan;
  // Batch 1's gate / up (4096 -> 2 x 2048, 6 experts): eight 512-element sub-ranges, so two teams
  // of eight warps; 36 KB stages, five of them.
  ASSERT_TRUE(plan_expert_stream(experts(1, 2048, 2048, 4096, 6), ExpertStreamKnobs{}, plan));
  EXPECT_EQ(plan.R, 512);
  EXPECT_EQ(plan.P, 8);
  EXPECT_EQ(plan.teams, 2);
  EXPECT_EQ(plan.w_stride, 2048 + kStreamRowPad);
  EXPECT_EQ(plan.s_stride, 128 + kStreamScalePad);
  EXPECT_EQ(plan.stage_bytes, 16 * (2112 + 144));
  EXPECT_EQ(plan.stages, 5);
  EXPECT_EQ(plan.tiles0, 128);
  EXPECT_EQ(plan.tiles1, 128);
  EXPECT_EQ(plan.grid, 132);
  EXPECT_EQ(plan.threads, 17 * 32);
  EXPECT_EQ(expert_stream_copy_bytes(4096), 16 * (2048 + 128));
  // The down projection (2048 -> 4096): four sub-ranges, four teams, stages half the size.
  ASSERT_TRUE(plan_expert_stream(experts(1, 4096, 0, 2048, 6), ExpertStreamKnobs{}, plan));
  EXPECT_EQ(plan.P, 4);
  EXPECT_EQ(plan.teams, 4);
  EXPECT_EQ(plan.tiles0, 256);
  EXPECT_EQ(plan.tiles1, 0);
  EXPECT_GE(plan.stages, 7);
  // Batch 8: up to 48 active experts, up to 8 rows each.
  EXPECT_TRUE(plan_expert_stream(experts(8, 2048, 2048, 4096, 48), ExpertStreamKnobs{}, plan));
}

TEST(ExpertStreamPlanTest, DeclinesWhatItCannotRun) {
  ExpertStreamPlan plan;
  const ExpertStreamKnobs knobs;
  EXPECT_FALSE(plan_expert_stream(experts(9, 2048, 2048, 4096, 54), knobs, plan));  // > 8 rows per expert
  EXPECT_FALSE(plan_expert_stream(experts(0, 2048, 2048, 4096, 6), knobs, plan));
  EXPECT_FALSE(plan_expert_stream(experts(1, 2040, 2040, 4096, 6), knobs, plan));  // partial items
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 2040, 4096, 6), knobs, plan));
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 0, 4000, 6), knobs, plan));     // scale rows of 125
  EXPECT_FALSE(plan_expert_stream(experts(1, 128, 0, 256, 6), knobs, plan));       // K < 512
  // K = 4608: 640-element sub-ranges, more windows than a lane's activation ring covers.
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 0, 4608, 6), knobs, plan));
  // K = 512: one sub-range, so 16 teams, which 16 stages cannot keep loading.
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 0, 512, 6), knobs, plan));
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 0, 4096, 65), knobs, plan));    // slots
  ExpertStreamKnobs off = knobs;
  off.max_tokens = 0;
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 2048, 4096, 6), off, plan));
  ExpertStreamKnobs small = knobs;
  small.max_smem = 64 << 10;  // too few 36 KB stages
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 2048, 4096, 6), small, plan));
}

// Room for the side lane: 8 consumer warps, two CTAs per SM (each CTA's ring and static shared
// memory within half the SM's 228 KB, less the 1 KB the hardware reserves per CTA: the plan
// derives that from the CTA count).
TEST(ExpertStreamPlanTest, HalfSmCtasKeepOneStageLoadingPerTeam) {
  ExpertStreamKnobs knobs;
  knobs.consumer_warps = 8;
  knobs.ctas_per_sm = 2;
  knobs.min_loading = 1;
  ExpertStreamPlan plan;
  ASSERT_TRUE(plan_expert_stream(experts(1, 2048, 2048, 4096, 6), knobs, plan));
  EXPECT_EQ(plan.P, 8);
  EXPECT_EQ(plan.teams, 1);
  EXPECT_EQ(plan.stages, 2);  // 36 KB stages in the 89 KB left beside 24 KB of static memory
  EXPECT_EQ(plan.threads, 9 * 32);
  EXPECT_EQ(plan.grid, 2 * 132);
  EXPECT_LE(2 * (plan.smem + knobs.static_smem + 1024), size_t{228} << 10);
  // K = 2048: 4 warps a team, so 2 teams, and 4 stages of ~18 KB.
  ASSERT_TRUE(plan_expert_stream(experts(1, 2048, 0, 2048, 6), knobs, plan));
  EXPECT_EQ(plan.teams, 2);
  EXPECT_EQ(plan.stages, 4);
  // 8 warps do not split into teams of 3 (K = 1536), nor do 4 into teams of 8 (K = 4096).
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 0, 1536, 6), knobs, plan));
  knobs.consumer_warps = 4;
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 0, 4096, 6), knobs, plan));
  knobs.consumer_warps = 17;  // more than the kernel's fold buffer holds
  EXPECT_FALSE(plan_expert_stream(experts(1, 2048, 0, 2048, 6), knobs, plan));
}

TEST(ExpertStreamPlanTest, AcceptedPlansKeepTheirInvariants) {
  const ExpertStreamKnobs knobs;
  int accepted = 0;
  for (int64_t K : {512, 1024, 1536, 2048, 3072, 4096, 7168, 8192, 16384}) {
    for (int64_t tokens : {1, 3, 8}) {
      ExpertStreamPlan plan;
      if (!plan_expert_stream(experts(tokens, 256, 256, K, 24), knobs, plan)) continue;
      ++accepted;
      EXPECT_EQ(plan.P, gemm_n_subranges(K)) << K;
      EXPECT_EQ(static_cast<int64_t>(plan.P) * plan.R >= K, true) << K;
      EXPECT_EQ(plan.teams * plan.P, kStreamConsumerWarps) << K;
      EXPECT_EQ(plan.consumer_warps, kStreamConsumerWarps) << K;
      EXPECT_GE(plan.stages, plan.teams + knobs.min_loading) << K;
      EXPECT_LE(plan.stages, kStreamMaxStages) << K;
      EXPECT_LE(plan.smem + knobs.static_smem, knobs.max_smem) << K;
      EXPECT_EQ(plan.stage_bytes % 16, 0) << K;  // stages, rows and scale rows 16-byte aligned
      EXPECT_EQ(plan.w_stride % 16, 0) << K;
      EXPECT_EQ(plan.s_stride % 16, 0) << K;
      EXPECT_GE(plan.stage_bytes, expert_stream_copy_bytes(K)) << K;
      // A lane quad's rows g and g + 8 (and g, g + 1) in different 16-byte bank groups of a
      // 128-byte line: the padding's purpose.
      EXPECT_NE(plan.w_stride % 128, 0) << K;
    }
  }
  // K = 1024, 2048 and 4096 at every row count; K = 1536 and 3072 have 3 and 6 sub-ranges (teams
  // of those do not divide 16 warps), K >= 7168 stages of 62 KB or more (too few fit).
  EXPECT_EQ(accepted, 9);
}

}  // namespace
}  // namespace deepinfer::kernels
