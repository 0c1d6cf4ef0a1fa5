// The lean decode GEMM's launch geometry (src/kernels/gemm/lean_plan.h) without a GPU: which
// launches it takes, the CTA shape for V4-Flash's decode projections, and the invariants every
// accepted plan must keep (every column covered once, the staged rows within shared memory, a
// warp per canonical K sub-range, at most 32 FP8 windows per warp).
#include "kernels/gemm/lean_plan.h"

#include <gtest/gtest.h>

namespace deepinfer::kernels {
namespace {

LeanGemmDims dense(int64_t rows, int64_t N, int64_t K, bool fp8 = true) {
  LeanGemmDims d;
  d.rows = rows, d.N = N, d.K = K;
  d.run_elems = fp8 ? 16 : 8;
  d.fp8 = fp8;
  d.block_in = d.block_out = fp8 ? 128 : 0;
  return d;
}

TEST(LeanPlanTest, DecodeProjectionsOfV4Flash) {
  LeanLaunchPlan plan;
  // wo_b (8192 -> 4096, FP8): eight 1,024-element sub-ranges, a warp each, 16 columns per CTA.
  ASSERT_TRUE(plan_lean_gemv(dense(1, 4096, 8192), LeanKnobs{}, plan));
  EXPECT_EQ(plan.shape.R, 1024);
  EXPECT_EQ(plan.shape.P, 8);
  EXPECT_EQ(plan.shape.groups, 1);
  EXPECT_EQ(plan.threads, 256);
  EXPECT_EQ(plan.grid_x, 256);
  EXPECT_EQ(plan.grid_z, 1);
  EXPECT_EQ(plan.smem, size_t{8200 * 2});
  EXPECT_EQ(plan.shape.in_shift, 7);
  EXPECT_EQ(plan.shape.out_shift, 7);
  // wq_b (1024 -> 32768): two sub-ranges, so four column groups side by side per CTA.
  ASSERT_TRUE(plan_lean_gemv(dense(1, 32768, 1024), LeanKnobs{}, plan));
  EXPECT_EQ(plan.shape.P, 2);
  EXPECT_EQ(plan.shape.groups, 4);
  EXPECT_EQ(plan.threads, 256);
  EXPECT_EQ(plan.grid_x, 512);
  // The BF16 LM head: four tiles per warp by default (`auto`: 8,080 one-tile CTAs would remain),
  // one when asked.
  ASSERT_TRUE(plan_lean_gemv(dense(1, 129280, 4096, false), LeanKnobs{}, plan));
  EXPECT_EQ(plan.shape.tiles, 4);
  EXPECT_EQ(plan.grid_x, 2020);
  LeanKnobs one;
  one.tiles = 1;
  ASSERT_TRUE(plan_lean_gemv(dense(1, 129280, 4096, false), one, plan));
  EXPECT_EQ(plan.shape.tiles, 1);
  EXPECT_EQ(plan.grid_x, 8080);
  LeanKnobs autot;
  autot.tiles = 0;
  // ... but not for wo_b's 256 CTAs.
  ASSERT_TRUE(plan_lean_gemv(dense(1, 4096, 8192), autot, plan));
  EXPECT_EQ(plan.shape.tiles, 1);
}

TEST(LeanPlanTest, ExpertLaunchesByTokenCount) {
  LeanGemmDims d;  // FP4 gate/up of 6 routed experts (two weight sets)
  d.experts = true, d.N = d.N1 = 2048, d.K = 4096, d.outer = 6, d.run_elems = 32;
  d.rows = 1;
  LeanLaunchPlan plan;
  // Six tiles per warp at batch 1 (two eight-warp CTAs resident per SM): 22 + 22 CTAs along x per
  // expert slot, 264 in all — one round on 132 SMs, where four tiles would take 384 (two rounds).
  ASSERT_TRUE(plan_lean_gemv(d, LeanKnobs{}, plan));
  EXPECT_EQ(plan.shape.tiles, 6);
  EXPECT_EQ(plan.shape.groups, 1);
  EXPECT_EQ(plan.shape.x_ctas0, 22);
  EXPECT_EQ(plan.grid_x, 44);
  EXPECT_EQ(plan.grid_z, 6);
  EXPECT_EQ(plan.shape.a_rows, 1);
  // Four (1,536 one-tile CTAs would remain, under the dense launches' four-wave rule) where six
  // are off (resident_warps 0), or where three eight-warp CTAs fit an SM (396 a round: 384 fit).
  LeanKnobs narrow;
  narrow.resident_warps = 0;
  ASSERT_TRUE(plan_lean_gemv(d, narrow, plan));
  EXPECT_EQ(plan.shape.tiles, 4);
  EXPECT_EQ(plan.shape.x_ctas0, 32);
  EXPECT_EQ(plan.grid_x, 64);
  narrow.resident_warps = 24;
  ASSERT_TRUE(plan_lean_gemv(d, narrow, plan));
  EXPECT_EQ(plan.shape.tiles, 4);
  // Batch 8 (48 expert slots): 3,072 four-tile CTAs in 12 rounds, 2,112 six-tile ones in 8 — a tie
  // (48 tile-rounds each) keeps four.
  d.outer = 48;
  ASSERT_TRUE(plan_lean_gemv(d, LeanKnobs{}, plan));
  EXPECT_EQ(plan.shape.tiles, 4);
  d.outer = 6;
  // Asked for six: FP4 expert launches take them, the others four.
  LeanKnobs six;
  six.tiles = 6;
  ASSERT_TRUE(plan_lean_gemv(d, six, plan));
  EXPECT_EQ(plan.shape.tiles, 6);
  ASSERT_TRUE(plan_lean_gemv(dense(1, 129280, 4096, false), six, plan));
  EXPECT_EQ(plan.shape.tiles, 4);
  LeanGemmDims fp8_experts = d;
  fp8_experts.run_elems = 16, fp8_experts.fp8 = true, fp8_experts.block_in = fp8_experts.block_out = 128;
  ASSERT_TRUE(plan_lean_gemv(fp8_experts, six, plan));
  EXPECT_EQ(plan.shape.tiles, 4);
  ASSERT_TRUE(plan_lean_gemv(fp8_experts, LeanKnobs{}, plan));
  EXPECT_EQ(plan.shape.tiles, 4);
  LeanKnobs one_tile;
  one_tile.tiles = 1;
  ASSERT_TRUE(plan_lean_gemv(d, one_tile, plan));
  EXPECT_EQ(plan.shape.x_ctas0, 128);
  EXPECT_EQ(plan.grid_x, 256);
  // The down projection (6 experts x 4,096 columns, K = 2,048: four sub-ranges, so two column
  // groups per CTA) at batch 1: 192 eight-warp CTAs would put 2 on 60 SMs and 1 on 72 (16 warps on
  // the busiest), 384 four-warp CTAs put 3 (12): one group, still four tiles per warp (four-warp
  // CTAs fit 4 to an SM: one round; six tiles would be 132 eight-warp CTAs, one round of 6).
  LeanGemmDims down;
  down.experts = true, down.N = 4096, down.K = 2048, down.outer = 6, down.run_elems = 32, down.rows = 1;
  ASSERT_TRUE(plan_lean_gemv(down, LeanKnobs{}, plan));
  EXPECT_EQ(plan.shape.P, 4);
  EXPECT_EQ(plan.shape.groups, 1);
  EXPECT_EQ(plan.shape.tiles, 4);
  EXPECT_EQ(plan.threads, 128);
  EXPECT_EQ(plan.grid_x, 64);
  EXPECT_EQ(plan.grid_z, 6);
  down.outer = 48;  // batch 8: 1,536 eight-warp CTAs are even enough
  ASSERT_TRUE(plan_lean_gemv(down, LeanKnobs{}, plan));
  EXPECT_EQ(plan.shape.groups, 2);
  LeanKnobs four;
  four.tiles = 4;  // a fixed tile count keeps the widest CTAs
  down.outer = 6;
  ASSERT_TRUE(plan_lean_gemv(down, four, plan));
  EXPECT_EQ(plan.shape.groups, 2);
  EXPECT_EQ(plan.grid_x, 32);
  d.rows = 257;  // batch 257 and above: the general kernel by default
  EXPECT_FALSE(plan_lean_gemv(d, LeanKnobs{}, plan));
  d.rows = 100, d.outer = 256;  // rows per expert in chunks of 8: eight staged
  LeanKnobs one;
  one.tiles = 1;
  ASSERT_TRUE(plan_lean_gemv(d, one, plan));
  EXPECT_EQ(plan.shape.a_rows, 8);
  EXPECT_EQ(plan.smem, size_t{8 * 4104 * 2});
  EXPECT_EQ(plan.grid_x, 256);
  ASSERT_TRUE(plan_lean_gemv(d, LeanKnobs{}, plan));  // 256 x 256 CTAs: four tiles per warp
  EXPECT_EQ(plan.shape.tiles, 4);
  EXPECT_EQ(plan.grid_x, 64);
  LeanKnobs none;
  none.max_expert_tokens = 0;
  EXPECT_FALSE(plan_lean_gemv(d, none, plan));
}

TEST(LeanPlanTest, RejectsWhatTheKernelCannotTake) {
  LeanLaunchPlan plan;
  EXPECT_FALSE(plan_lean_gemv(dense(9, 4096, 4096), LeanKnobs{}, plan));   // > 8 dense rows
  EXPECT_FALSE(plan_lean_gemv(dense(1, 4096, 4100), LeanKnobs{}, plan));   // K not whole 128 tiles
  EXPECT_FALSE(plan_lean_gemv(dense(8, 4096, 8192), LeanKnobs{}, plan));   // 8 x 16 KB staged rows
  EXPECT_FALSE(plan_lean_gemv(dense(1, 4096, 16384, false), LeanKnobs{}, plan));  // 64 BF16 windows per warp
  LeanGemmDims d = dense(1, 4096, 4096);
  d.block_in = 32;  // a window spans two scale blocks
  EXPECT_FALSE(plan_lean_gemv(d, LeanKnobs{}, plan));
  d = dense(1, 4096, 4096);
  d.block_out = 8;  // a warp's columns span two
  EXPECT_FALSE(plan_lean_gemv(d, LeanKnobs{}, plan));
  d = dense(1, 200, 256);
  d.grouped = true, d.outer = 2;  // group 1's rows would start mid column group
  EXPECT_FALSE(plan_lean_gemv(d, LeanKnobs{}, plan));
  LeanKnobs off;
  off.max_rows = 0;
  EXPECT_FALSE(plan_lean_gemv(dense(1, 4096, 4096), off, plan));
  off.tiles = 2;  // not a kernel instantiation
  off.max_rows = 8;
  EXPECT_FALSE(plan_lean_gemv(dense(1, 4096, 4096), off, plan));
  // FP8 with four tiles needs <= 32 windows per warp: K = 4224 (10 per sub-range) keeps one.
  LeanKnobs four;
  four.tiles = 4;
  ASSERT_TRUE(plan_lean_gemv(dense(1, 4096, 4096), four, plan));
  EXPECT_EQ(plan.shape.tiles, 4);
  ASSERT_TRUE(plan_lean_gemv(dense(1, 4096, 4224), four, plan));
  EXPECT_EQ(plan.shape.tiles, 1);
}

TEST(LeanPlanTest, ExpertGroupsEvenOutTheBusiestSm) {
  // ctas_at(g): the launch's CTAs at g column groups per CTA.
  auto at = [](int64_t one_group_ctas) { return [=](int g) { return (one_group_ctas + g - 1) / g; }; };
  EXPECT_EQ(lean_expert_groups(at(400), 4, 10), 4);  // 100 CTAs: 10 per SM (40 groups) at any width
  EXPECT_EQ(lean_expert_groups(at(384), 2, 132), 1);  // batch 1's down: 2 x 2 = 4 on the busiest vs 3 x 1
  EXPECT_EQ(lean_expert_groups(at(384), 1, 132), 1);  // one group: nothing to split
  EXPECT_EQ(lean_expert_groups(at(204), 2, 10), 2);   // 11 x 2 = 22 vs 21 x 1: within the 10% margin
  EXPECT_EQ(lean_expert_groups(at(8), 8, 10), 1);     // 1 CTA of 8 groups vs 8 CTAs of 1 on 8 SMs
}

TEST(LeanPlanTest, EveryAcceptedPlanCoversItsColumnsAndFits) {
  for (int run : {8, 16, 32})
    for (int tiles : {0, 1, 4, 6})
      for (int64_t K = 128; K <= 20480; K += 128)
        for (int64_t N : {16, 200, 4096, 129280})
          for (int64_t N1 : {0, 264})
            for (int64_t rows : {1, 5, 8})
              for (int64_t outer : {0, 1, 6}) {  // 0: dense, else expert slots
                LeanGemmDims d;
                d.experts = outer > 0;
                d.outer = std::max<int64_t>(outer, 1);
                d.rows = rows, d.N = N, d.N1 = N1, d.K = K, d.run_elems = run;
                d.fp8 = run == 16;
                d.block_in = d.block_out = d.fp8 ? 128 : 0;
                LeanKnobs knobs;
                knobs.tiles = tiles;
                LeanLaunchPlan plan;
                if (!plan_lean_gemv(d, knobs, plan)) continue;
                const LeanGemvShape& sh = plan.shape;
                const int64_t cols = static_cast<int64_t>(sh.tiles) * sh.groups * kLeanCols;
                ASSERT_EQ(static_cast<int64_t>(sh.R) * (sh.P - 1) < K && static_cast<int64_t>(sh.R) * sh.P >= K, true);
                ASSERT_LE(sh.groups * sh.P, kLeanMaxWarps);
                ASSERT_EQ(plan.threads, sh.groups * sh.P * 32);
                ASSERT_LE(sh.R / (4 * run), kLeanMaxWindows);
                if (d.fp8) {
                  ASSERT_LE(sh.tiles * (sh.R / (4 * run)), kLeanMaxWindows);
                }
                ASSERT_TRUE(sh.tiles == 1 || sh.tiles == kLeanMaxTiles ||
                            (sh.tiles == kLeanWideTiles && d.experts && run == 32));
                ASSERT_EQ(sh.a_rows, rows);
                ASSERT_EQ(plan.smem, static_cast<size_t>(rows) * (K + kLeanStagePad) * 2);
                ASSERT_LE(plan.smem, knobs.max_smem);
                // Set 0's CTAs cover its columns with none wholly past them; set 1's likewise.
                ASSERT_GE(sh.x_ctas0 * cols, N);
                ASSERT_LT((sh.x_ctas0 - 1) * cols, N);
                const int64_t x1 = plan.grid_x - sh.x_ctas0;
                if (N1 == 0) {
                  ASSERT_EQ(x1, 0);
                } else {
                  ASSERT_GE(x1 * cols, N1);
                  ASSERT_LT((x1 - 1) * cols, N1);
                }
              }
}

}  // namespace
}  // namespace deepinfer::kernels
