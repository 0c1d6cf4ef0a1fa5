// The FP8-operand decode GEMM's launch geometry (src/kernels/gemm/fp8_gemv_plan.h) without a GPU:
// the CTAs for V4-Flash's decode projections (a cluster of one CTA per canonical K sub-range per
// 64-column tile), and the launches it must refuse (the kernel's staging and scale reads assume
// them away).
#include "kernels/gemm/fp8_gemv_plan.h"
#include "kernels/gemm/fp8_expert_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace deepinfer::kernels {
namespace {

Fp8GemvDims dense(int64_t rows, int64_t N, int64_t K, int64_t N1 = 0) {
  Fp8GemvDims d;
  d.rows = rows, d.N = N, d.N1 = N1, d.K = K;
  d.block_in = d.block_out = 128;
  return d;
}

TEST(Fp8GemvPlanTest, DecodeProjectionsOfV4Flash) {
  Fp8GemvPlan plan;
  // wo_b (8192 -> 4096): eight sub-ranges of 1,024 inputs (eight promotion blocks each).
  ASSERT_TRUE(plan_fp8_gemv(dense(1, 4096, 8192), plan));
  EXPECT_EQ(plan.shape.R, 1024);
  EXPECT_EQ(plan.shape.P, 8);
  EXPECT_EQ(plan.shape.groups0, 64);  // one tile each
  EXPECT_EQ(plan.grid_x, 64 * 8);
  EXPECT_EQ(plan.shape.out_shift, 7);
  // wq_a + wkv as one pair (4096 -> 1024 and 4096 -> 512): set 1's tiles follow set 0's.
  ASSERT_TRUE(plan_fp8_gemv(dense(8, 1024, 4096, 512), plan));
  EXPECT_EQ(plan.shape.R, 512);
  EXPECT_EQ(plan.shape.P, 8);
  EXPECT_EQ(plan.shape.groups0, 16);
  EXPECT_EQ(plan.grid_x, (16 + 8) * 8);
  // wq_b (1024 -> 32768): two sub-ranges.
  ASSERT_TRUE(plan_fp8_gemv(dense(1, 32768, 1024), plan));
  EXPECT_EQ(plan.shape.P, 2);
  EXPECT_EQ(plan.grid_x, 512 * 2);
  // A ragged last sub-range: K = 7168 is eight of 896 (seven blocks each); a partial column tile.
  ASSERT_TRUE(plan_fp8_gemv(dense(3, 200, 7168), plan));
  EXPECT_EQ(plan.shape.R, 896);
  EXPECT_EQ(plan.shape.P, 8);
  EXPECT_EQ(plan.shape.groups0, 4);
  // One sub-range: a cluster of one.
  ASSERT_TRUE(plan_fp8_gemv(dense(1, 64, 128), plan));
  EXPECT_EQ(plan.shape.P, 1);
  EXPECT_EQ(plan.grid_x, 1);
}

TEST(Fp8GemvPlanTest, TwoTilesPerCtaHalveTheTileGroupsOfEachSet) {
  Fp8GemvPlan plan;
  Fp8GemvDims d = dense(1, 1024, 4096, 576);  // 16 tiles of set 0, 9 of set 1 (the last partial)
  d.tiles = 2;
  ASSERT_TRUE(plan_fp8_gemv(d, plan));
  EXPECT_EQ(plan.shape.tiles, 2);
  EXPECT_EQ(plan.shape.groups0, 8);
  EXPECT_EQ(plan.grid_x, (8 + 5) * 8);  // set 1: 9 tiles in 5 groups, the last of one tile
  d.tiles = 3;
  EXPECT_FALSE(plan_fp8_gemv(d, plan));
  d.tiles = 0;
  EXPECT_FALSE(plan_fp8_gemv(d, plan));
}

// Up to 32 rows: wgmma's N is the rows rounded up to 8, 16 or 32; wider rows take their own tile
// count (wide_tiles), and the shared memory follows.
TEST(Fp8GemvPlanTest, RowsPickTheNarrowestWgmmaN) {
  Fp8GemvPlan plan;
  Fp8GemvDims d = dense(8, 4096, 4096);
  d.tiles = 2;
  ASSERT_TRUE(plan_fp8_gemv(d, plan));
  EXPECT_EQ(plan.shape.nr, 8);
  EXPECT_EQ(plan.shape.tiles, 2);
  for (auto [rows, nr] : std::vector<std::pair<int, int>>{{1, 8}, {9, 16}, {16, 16}, {17, 32}, {32, 32}}) {
    d = dense(rows, 4096, 4096);
    d.tiles = 2;
    ASSERT_TRUE(plan_fp8_gemv(d, plan)) << rows;
    EXPECT_EQ(plan.shape.nr, nr) << rows;
    EXPECT_EQ(plan.shape.tiles, nr == 8 ? 2 : 1) << rows;
    EXPECT_EQ(plan.grid_x, (nr == 8 ? 32 : 64) * 8) << rows;
    d.wide_tiles = 2;  // the wider rows' staging shared by two tiles
    ASSERT_TRUE(plan_fp8_gemv(d, plan)) << rows;
    EXPECT_EQ(plan.shape.tiles, 2) << rows;
    EXPECT_EQ(plan.grid_x, 32 * 8) << rows;
    d.tiles = 1;  // the 8-row count leaves the wider rows alone
    ASSERT_TRUE(plan_fp8_gemv(d, plan)) << rows;
    EXPECT_EQ(plan.shape.tiles, nr == 8 ? 1 : 2) << rows;
  }
  d = dense(32, 4096, 4096);
  d.wide_tiles = 3;
  EXPECT_FALSE(plan_fp8_gemv(d, plan));
  EXPECT_EQ(fp8_gemv_smem_bytes(8, 2), 8 * 4 * 256 + 8 * 8 * 4 + 2 * 8 * 64 * 8 * 4);  // 41,216: rank 0's buffer
  EXPECT_EQ(fp8_gemv_smem_bytes(32, 1), 8 * 4 * 1024 + 32 * 8 * 4 + 64 * 32 * 4);      // 41,984: the CTA's own sums
  EXPECT_EQ(fp8_gemv_smem_bytes(32, 2), 8 * 4 * 1024 + 32 * 8 * 4 + 2 * 64 * 32 * 4);  // 50,176: past 48 KB, opted in
}

TEST(Fp8GemvPlanTest, RefusesWhatTheKernelCannotTake) {
  Fp8GemvPlan plan;
  EXPECT_FALSE(plan_fp8_gemv(dense(33, 4096, 4096), plan));  // more rows than wgmma's N = 32
  EXPECT_FALSE(plan_fp8_gemv(dense(0, 4096, 4096), plan));
  EXPECT_FALSE(plan_fp8_gemv(dense(1, 4096, 4000), plan));   // K not whole promotion blocks
  EXPECT_FALSE(plan_fp8_gemv(dense(1, 0, 4096), plan));
  EXPECT_EQ(plan.grid_x, 0);  // nothing of an earlier plan carries over
  Fp8GemvDims d = dense(1, 4096, 4096);
  d.block_in = 64;  // a scale per 64 inputs: two per promotion block
  EXPECT_FALSE(plan_fp8_gemv(d, plan));
  d = dense(1, 4096, 4096);
  d.block_out = 32;  // a 64-column tile would span two scale rows
  EXPECT_FALSE(plan_fp8_gemv(d, plan));
  d.block_out = 192;  // not a power of two
  EXPECT_FALSE(plan_fp8_gemv(d, plan));
  // Sub-ranges beyond eight blocks (R > 1024) never occur: K = 16384 gives R = 2048.
  EXPECT_FALSE(plan_fp8_gemv(dense(1, 4096, 16384), plan));
}

// The large-M kernel's plan: launches the decode kernel leaves (more than 32 rows), tiles of 64
// columns per consumer warpgroup x 128 tokens over both weight sets, and the staging its
// pre-passes write (code blocks with their scales, then weight blocks).
TEST(Fp8GemvPlanTest, LargeMPlanTakesTheRowsTheDecodeKernelLeaves) {
  Fp8GemmPlan plan;
  EXPECT_FALSE(plan_fp8_gemm(dense(32, 4096, 4096), 2, plan));
  ASSERT_TRUE(plan_fp8_gemm(dense(33, 1024, 4096, 576), 2, plan));
  EXPECT_EQ(plan.tile_cols, 128);
  EXPECT_EQ(plan.tiles0, 8);
  EXPECT_EQ(plan.n_tiles, 8 + 5);  // 576 columns: a last tile of 64
  EXPECT_EQ(plan.m_tiles, 1);
  EXPECT_EQ(plan.kb, 32);
  EXPECT_EQ(plan.codes_bytes, 32 * (128 * 128 + 128 * 4));
  EXPECT_EQ(plan.staging_bytes, plan.codes_bytes + 13 * 32 * 128 * 128);
  ASSERT_TRUE(plan_fp8_gemm(dense(33, 1024, 4096, 576), 3, plan));
  EXPECT_EQ(plan.tile_cols, 192);
  EXPECT_EQ(plan.tiles0, 6);  // 1024 = 5 x 192 + 64
  EXPECT_EQ(plan.n_tiles, 6 + 3);
  EXPECT_EQ(plan.weight_block_bytes, 192 * 128);
  EXPECT_EQ(plan.staging_bytes, plan.codes_bytes + 9 * 32 * 192 * 128);
  ASSERT_TRUE(plan_fp8_gemm(dense(8192, 4096, 8192), 2, plan));
  EXPECT_EQ(plan.m_tiles, 64);
  EXPECT_EQ(plan.n_tiles, 32);
  EXPECT_EQ(plan.codes_bytes, int64_t{64} * 64 * 16896);
  EXPECT_EQ(plan.staging_bytes, int64_t{64} * 64 * 16896 + int64_t{32} * 64 * 16384);
  EXPECT_EQ(plan.codes_bytes % 16, 0);
  EXPECT_FALSE(plan_fp8_gemm(dense(8192, 4096, 8192), 4, plan));  // 2 or 3 consumer warpgroups
  EXPECT_FALSE(plan_fp8_gemm(dense(100, 4096, 4000), 2, plan));  // K not whole promotion blocks
  Fp8GemvDims d = dense(100, 4096, 4096);
  d.block_in = 64;
  EXPECT_FALSE(plan_fp8_gemm(d, 2, plan));
  d.block_in = 128;
  d.block_out = 32;  // a warpgroup's 64 columns would need two weight scales
  EXPECT_FALSE(plan_fp8_gemm(d, 2, plan));
  // The K the decode kernel refuses (sub-ranges of more than eight blocks) the large-M kernel
  // refuses too: otherwise a row's order would depend on how many rows share its launch.
  EXPECT_FALSE(plan_fp8_gemm(dense(100, 4096, 16384), 3, plan));
  EXPECT_TRUE(fp8_order_k_ok(8192));
  EXPECT_FALSE(fp8_order_k_ok(8320));  // 65 blocks: sub-ranges of 9
}

// The split form: launches of fewer tiles than split_below (the launcher's SM count) take a
// cluster of one CTA per K sub-range per tile; wider ones, and every launch at split_below = 0, one
// CTA per tile.
TEST(Fp8GemvPlanTest, LargeMSplitsKWhenTilesAreFewerThanSms) {
  Fp8GemmPlan plan;
  Fp8GemvDims d = dense(33, 1024, 4096, 576);  // 6 + 3 tiles of 192 columns
  ASSERT_TRUE(plan_fp8_gemm(d, 3, plan));
  EXPECT_EQ(plan.split, 1);  // split_below = 0: never
  d.split_below = 132;
  ASSERT_TRUE(plan_fp8_gemm(d, 3, plan));
  EXPECT_EQ(plan.split, 8);  // K = 4096: eight sub-ranges of 512
  d = dense(64, 4096, 2048);  // 22 tiles, K = 2048: four sub-ranges
  d.split_below = 132;
  ASSERT_TRUE(plan_fp8_gemm(d, 3, plan));
  EXPECT_EQ(plan.split, gemm_n_subranges(2048));
  EXPECT_EQ(plan.split, 4);
  d = dense(8192, 4096, 8192);  // 64 x 22 tiles: enough for every SM
  d.split_below = 132;
  ASSERT_TRUE(plan_fp8_gemm(d, 3, plan));
  EXPECT_EQ(plan.split, 1);
  d = dense(40, 256, 128);  // one sub-range: nothing to split
  d.split_below = 132;
  ASSERT_TRUE(plan_fp8_gemm(d, 3, plan));
  EXPECT_EQ(plan.split, 1);
}

// Small token tiles (small_token_tiles, three consumer warpgroups): a launch takes the least of
// 32, 64 and 128 tokens that holds its rows, and its code blocks shrink with the tile; off, or with
// two consumer warpgroups, every launch keeps 128-token tiles.
TEST(Fp8GemvPlanTest, LargeMTakesTheSmallestTokenTileThatHoldsTheRows) {
  const std::vector<std::pair<int64_t, int>> rows_tile = {{17, 32}, {32, 32}, {33, 64}, {64, 64},
                                                          {65, 128}, {128, 128}, {129, 128}, {8192, 128}};
  for (const auto& [rows, tm] : rows_tile) {
    Fp8GemvDims d = dense(rows, 1024, 4096);
    d.decode_rows = 16;  // the launcher's default: 17 rows and up are the large-M kernel's
    d.small_token_tiles = true;
    Fp8GemmPlan plan;
    ASSERT_TRUE(plan_fp8_gemm(d, 3, plan)) << rows;
    EXPECT_EQ(plan.token_tile, tm) << rows;
    EXPECT_EQ(plan.m_tiles, (rows + tm - 1) / tm) << rows;
    EXPECT_EQ(plan.codes_bytes, plan.m_tiles * 32 * (int64_t{tm} * 128 + tm * 4)) << rows;
    EXPECT_EQ(plan.codes_bytes % 16, 0) << rows;  // the weight blocks after them stay aligned
    EXPECT_EQ(plan.staging_bytes, plan.codes_bytes + 6 * 32 * 192 * 128) << rows;
    ASSERT_TRUE(plan_fp8_gemm(d, 2, plan)) << rows;
    EXPECT_EQ(plan.token_tile, 128) << rows;
    d.small_token_tiles = false;
    ASSERT_TRUE(plan_fp8_gemm(d, 3, plan)) << rows;
    EXPECT_EQ(plan.token_tile, 128) << rows;
    EXPECT_EQ(plan.m_tiles, (rows + 127) / 128) << rows;
  }
}

// A lower bound on the decode kernel's rows (decode_rows) hands the rest to the large-M kernel:
// every row count goes to exactly one of them, and bounds other than 8, 16 or 32 are refused.
TEST(Fp8GemvPlanTest, DecodeRowsSplitTheLaunchesBetweenTheKernels) {
  for (int bound : {8, 16, 32}) {
    for (int rows = 1; rows <= 64; ++rows) {
      Fp8GemvDims d = dense(rows, 4096, 4096);
      d.decode_rows = bound;
      Fp8GemvPlan gemv;
      Fp8GemmPlan gemm;
      const bool decode = plan_fp8_gemv(d, gemv), large = plan_fp8_gemm(d, 3, gemm);
      EXPECT_EQ(decode, rows <= bound) << bound << " " << rows;
      EXPECT_EQ(large, rows > bound) << bound << " " << rows;
      if (large) {
        EXPECT_EQ(gemm.m_tiles, 1);
      }
    }
  }
  Fp8GemvDims d = dense(4, 4096, 4096);
  d.decode_rows = 4;
  Fp8GemvPlan gemv;
  Fp8GemmPlan gemm;
  EXPECT_FALSE(plan_fp8_gemv(d, gemv));
  EXPECT_FALSE(plan_fp8_gemm(d, 3, gemm));
}

// The FP8-order expert launches (fp8_expert_plan.h): V4-Flash's gate/up at an 8K prefill (49,152
// pairs over 256 experts), its down projection at a batch-1 step (6 pairs) and the tile size's
// bound; whole 128-input blocks only.
// A code block's pair scales: every pair its own slot inside the block; lane c's float4 j holds
// pairs 16 j + 2 c + {0, 1} and 16 j + 8 + 2 c + {0, 1} (its accumulators' pairs, in order); the
// four lanes' rows start 4 banks apart (no conflict among the four 16-byte reads).
TEST(Fp8ExpertPlanTest, PairScalesLieWhereEachLaneReadsThemAsFloat4s) {
  for (int nt : {32, 128}) {
    const int stride = fp8_expert_scale_stride(nt);
    std::vector<int> seen(static_cast<size_t>(4 * stride), -1);
    for (int pair = 0; pair < nt; ++pair) {
      const int slot = fp8_expert_scale_slot(nt, pair);
      ASSERT_GE(slot, 0);
      ASSERT_LT(slot, 4 * stride);
      EXPECT_EQ(seen[static_cast<size_t>(slot)], -1) << "nt " << nt << " pair " << pair;
      seen[static_cast<size_t>(slot)] = pair;
    }
    EXPECT_EQ(nt * 128 + 4 * 4 * stride, fp8_expert_codes_block_bytes(nt));
    std::vector<int> bank_owner(32, -1);  // the 4 banks of each lane's 16-byte read at the same j
    for (int c = 0; c < 4; ++c) {
      EXPECT_EQ(c * stride % 4, 0) << "16-byte aligned rows";
      for (int b = 0; b < 4; ++b) {
        int& owner = bank_owner[static_cast<size_t>((c * stride + b) % 32)];
        EXPECT_EQ(owner, -1) << "nt " << nt << ": lanes " << owner << " and " << c << " share a bank";
        owner = c;
      }
      for (int j = 0; j < nt / 16; ++j) {
        const int at = c * stride + 4 * j;
        EXPECT_EQ(seen[static_cast<size_t>(at)], 16 * j + 2 * c);
        EXPECT_EQ(seen[static_cast<size_t>(at + 1)], 16 * j + 2 * c + 1);
        EXPECT_EQ(seen[static_cast<size_t>(at + 2)], 16 * j + 8 + 2 * c);
        EXPECT_EQ(seen[static_cast<size_t>(at + 3)], 16 * j + 8 + 2 * c + 1);
      }
    }
  }
}

TEST(Fp8ExpertPlanTest, TilesBoundTheRoutedPairsAndStagingHoldsTheirCodes) {
  Fp8ExpertPlan plan;
  ASSERT_TRUE(plan_fp8_experts(49152, 256, 2048, 4096, 264, plan));
  EXPECT_EQ(plan.nt, 128);
  EXPECT_EQ(plan.y_tiles, 384 + 256);  // ceil(M / 128) full tiles + one ragged tile per expert at most
  EXPECT_EQ(plan.n_tiles, 16);
  EXPECT_EQ(plan.kb, 32);
  EXPECT_EQ(plan.split, 1);  // 128-pair tiles never split
  EXPECT_EQ(plan.table_bytes, (3 * 640 * 4 + 255) / 256 * 256);
  EXPECT_EQ(plan.codes_bytes, 640 * 32 * (128 * 128 + 4 * 36 * 4));  // scales: 4 rows of 32 + 4 floats
  EXPECT_EQ(plan.staging_bytes(), plan.table_bytes + plan.codes_bytes);
  ASSERT_TRUE(plan_fp8_experts(6, 256, 4096, 2048, 0, plan));
  EXPECT_EQ(plan.nt, 32);
  EXPECT_EQ(plan.split, 1);  // split_below 0: never
  EXPECT_EQ(plan.y_tiles, 1 + 6);
  EXPECT_EQ(plan.n_tiles, 32);
  EXPECT_EQ(plan.codes_bytes, 7 * 16 * (32 * 128 + 4 * 12 * 4));
  // The split form below two tiles per SM (132 SMs): batch 1's gate/up (7 x 16 tiles, K = 4,096 in
  // 8 sub-ranges) and down (7 x 32, K = 2,048 in 4); batch 8's gate/up (2 + 48 tiles of pairs x 16
  // = 800) streams whole K.
  ASSERT_TRUE(plan_fp8_experts(6, 256, 4096, 2048, 264, plan));
  EXPECT_EQ(plan.split, 4);
  ASSERT_TRUE(plan_fp8_experts(6, 256, 2048, 4096, 264, plan));
  EXPECT_EQ(plan.split, 8);
  ASSERT_TRUE(plan_fp8_experts(48, 256, 2048, 4096, 264, plan));
  EXPECT_EQ(plan.split, 1);
  ASSERT_TRUE(plan_fp8_experts(6, 256, 4096, 512, 264, plan));
  EXPECT_EQ(plan.split, 1);  // K of one sub-range
  // 128-pair tiles from an average of 64 pairs per expert: batch 2,730 of V4-Flash (k = 6) is the
  // last on 32-pair tiles.
  ASSERT_TRUE(plan_fp8_experts(64 * 256, 256, 2048, 4096, 0, plan));
  EXPECT_EQ(plan.nt, 128);
  ASSERT_TRUE(plan_fp8_experts(2730 * 6, 256, 2048, 4096, 0, plan));
  EXPECT_EQ(plan.nt, 32);
  EXPECT_FALSE(plan_fp8_experts(6, 256, 4096, 2000, 0, plan));  // K not whole blocks
  EXPECT_FALSE(plan_fp8_experts(6, 2048, 4096, 2048, 0, plan));  // E past one block's scan
  EXPECT_FALSE(plan_fp8_experts(0, 256, 4096, 2048, 0, plan));
}

// The lean form (fp8_expert_gemv.cuh) takes launches of at most lean_pairs pairs over K <= 8,192:
// 64-column groups of a set, a grid slot per expert the pairs can reach, no staging.
TEST(Fp8ExpertPlanTest, DecodeLaunchesTakeTheLeanFormUpToItsPairs) {
  Fp8ExpertPlan plan;
  ASSERT_TRUE(plan_fp8_experts(6, 256, 2048, 4096, 264, plan, 512));  // batch 1's gate/up
  EXPECT_TRUE(plan.lean);
  EXPECT_EQ(plan.lean_groups, 32);
  EXPECT_EQ(plan.lean_z, 6);
  EXPECT_EQ(plan.kb, 32);
  EXPECT_EQ(plan.split, 1);  // (the split form is the tiled kernel's)
  EXPECT_EQ(plan.staging_bytes(), 0);
  ASSERT_TRUE(plan_fp8_experts(512, 256, 4100, 2048, 0, plan, 512));
  EXPECT_TRUE(plan.lean);
  EXPECT_EQ(plan.lean_groups, 65);  // the last group partly past N
  EXPECT_EQ(plan.lean_z, 256);
  ASSERT_TRUE(plan_fp8_experts(513, 256, 4096, 2048, 0, plan, 512));
  EXPECT_FALSE(plan.lean);
  EXPECT_GT(plan.staging_bytes(), 0);
  ASSERT_TRUE(plan_fp8_experts(6, 256, 4096, 8192 + 128, 0, plan, 512));  // K past its staging
  EXPECT_FALSE(plan.lean);
  ASSERT_TRUE(plan_fp8_experts(6, 256, 4096, 2048, 0, plan, 0));  // 0: never
  EXPECT_FALSE(plan.lean);
  EXPECT_FALSE(plan_fp8_experts(6, 256, 4096, 2000, 0, plan, 512));  // K not whole blocks
  // Its shared memory: codes 1 KB per 128-input block, 8 scales per block, 64 rows' scale words
  // at an odd stride (the eight rows a warp's lanes read in one step, eight banks apart).
  EXPECT_EQ(fp8_expert_gemv_word_stride(32), 33);
  EXPECT_EQ(fp8_expert_gemv_word_stride(33), 33);
  EXPECT_EQ(fp8_expert_gemv_smem_bytes(32), 32 * 1024 + 32 * 8 * 4 + 64 * 33 * 4);
  for (int64_t kb = 1; kb <= kFp8ExpertLeanMaxK / 128; ++kb) {
    const int stride = fp8_expert_gemv_word_stride(kb);
    std::vector<int> banks;
    for (int g = 0; g < 8; ++g) banks.push_back((g * stride) % 32);
    std::sort(banks.begin(), banks.end());
    EXPECT_EQ(std::unique(banks.begin(), banks.end()), banks.end()) << kb;
  }
  EXPECT_LE(fp8_expert_gemv_smem_bytes(kFp8ExpertLeanMaxK / 128), 227 * 1024);
  EXPECT_LE(4 * fp8_expert_gemv_smem_bytes(4096 / 128), 227 * 1024);  // four CTAs per SM at V4-Flash's K
}

// Two 64-row groups per lean CTA (DEEPINFER_GEMM_FP8_EXPERTS_LEAN_GROUPS=2) where a set has two or
// more: half the CTAs per set (the last taking one group when the count is odd), the scale words of
// both staged, and still four CTAs per SM at V4-Flash's K (with the kernel's 5 KB of static shared
// memory — tables, pair rows, both groups' references — and the 1 KB each CTA reserves).
TEST(Fp8ExpertPlanTest, LeanCtasTakeTwoGroupsWhenAsked) {
  Fp8ExpertPlan plan;
  ASSERT_TRUE(plan_fp8_experts(48, 256, 2048, 4096, 264, plan, 512, 2));  // batch 8's gate/up
  EXPECT_TRUE(plan.lean);
  EXPECT_EQ(plan.lean_per_cta, 2);
  EXPECT_EQ(plan.lean_groups, 32);
  EXPECT_EQ(plan.lean_ctas(), 16);
  ASSERT_TRUE(plan_fp8_experts(48, 256, 4100, 2048, 264, plan, 512, 2));
  EXPECT_EQ(plan.lean_groups, 65);
  EXPECT_EQ(plan.lean_ctas(), 33);  // the last CTA's second group is past N
  ASSERT_TRUE(plan_fp8_experts(48, 256, 64, 2048, 264, plan, 512, 2));
  EXPECT_EQ(plan.lean_per_cta, 1);  // one group: nothing to pair
  EXPECT_EQ(plan.lean_ctas(), 1);
  ASSERT_TRUE(plan_fp8_experts(48, 256, 2048, 4096, 264, plan, 512));
  EXPECT_EQ(plan.lean_per_cta, 1);  // the default
  EXPECT_EQ(plan.lean_ctas(), 32);
  EXPECT_EQ(fp8_expert_gemv_smem_bytes(32, 2), fp8_expert_gemv_smem_bytes(32) + 64 * 33 * 4);
  EXPECT_LE(4 * (fp8_expert_gemv_smem_bytes(4096 / 128, 2) + 5 * 1024 + 1024), 228 * 1024);
  EXPECT_LE(fp8_expert_gemv_smem_bytes(kFp8ExpertLeanMaxK / 128, 2), 227 * 1024);
}

}  // namespace
}  // namespace deepinfer::kernels
