// The packed GEMM's operand layout and launch plan (src/kernels/gemm/packed_plan.h) without a GPU:
// every element of a 128 x 128 tile lands in its own slot of the 32 KB block, where wgmma reads
// exactly the logical k the canonical order (gemm_common.cuh) gives that step and lane; and which
// launches take the path, with how much staging.
#include "kernels/gemm/packed_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer::kernels {
namespace {

TEST(PackedPlanTest, LayoutIsTheCanonicalStepOrderForEveryFormat) {
  for (int L : {8, 16, 32}) {  // BF16, FP8, FP4 runs
    std::vector<int> seen(kPackBlockBytes / 2, 0);
    for (int r = 0; r < kPackRows; ++r) {
      for (int k = 0; k < kGemmBK; ++k) {
        const int off = packed_offset(r, k, L);
        ASSERT_EQ(off % 2, 0);
        ASSERT_GE(off, 0);
        ASSERT_LT(off, kPackBlockBytes);
        ++seen[off / 2];
      }
    }
    for (int n : seen) ASSERT_EQ(n, 1) << "L " << L;  // a bijection onto the block
    // What the pack kernels rely on: an even k and k + 1 are adjacent (A moves pairs), and the
    // quads of a 16-byte run are a step apart, their second pair 128 bytes on (W decodes runs).
    for (int r = 0; r < kPackRows; ++r) {
      for (int k = 0; k < kGemmBK; k += 2) ASSERT_EQ(packed_offset(r, k + 1, L), packed_offset(r, k, L) + 2);
      for (int u = 0; u < kGemmBK / L; ++u) {
        for (int q = 0; q < L / 4; ++q) {
          ASSERT_EQ(packed_offset(r, u * L + 4 * q, L), packed_offset(r, u * L, L) + q * kPackStepBytes);
          ASSERT_EQ(packed_offset(r, u * L + 4 * q + 2, L), packed_offset(r, u * L, L) + q * kPackStepBytes + 128);
        }
      }
    }
    // The canonical order, stated as the mma fragment sees it: step j of the window at kw, lane
    // (g, c) holds physical k kw + c L + 4 j + {0, 1} as logical 2c, 2c + 1 (first core matrix)
    // and + {2, 3} as logical 2c + 8, 2c + 9 (second core matrix, 128 bytes on); a core matrix
    // row is 8 logical k's of one row, 16 bytes.
    const int spw = L / 4;
    for (int kw = 0; kw < kGemmBK; kw += 4 * L) {
      for (int j = 0; j < spw; ++j) {
        const int step = kw / (4 * L) * spw + j;
        for (int r : {0, 7, 8, 77, 127}) {
          for (int c = 0; c < 4; ++c) {
            for (int e = 0; e < 4; ++e) {
              const int logical = 2 * c + (e & 1) + 8 * (e >> 1);
              const int want = step * kPackStepBytes + (r / 8) * 256 + (logical / 8) * 128 + (r % 8) * 16 + (logical % 8) * 2;
              EXPECT_EQ(packed_offset(r, kw + c * L + 4 * j + e, L), want) << "L " << L << " k " << kw + c * L + 4 * j + e;
            }
          }
        }
      }
    }
  }
}

TEST(PackedPlanTest, PrefillProjectionsTakeThePath) {
  PackedGemmDims d;  // V4-Flash wo_b at an 8K prefill chunk: 8192 x 4096, K = 8192
  d.M = 8192, d.N = 4096, d.K = 8192;
  PackedGemmPlan plan;
  ASSERT_TRUE(plan_packed_gemm(d, 512, 132, plan));
  EXPECT_EQ(plan.m_tiles, 64);
  EXPECT_EQ(plan.n_tiles, 32);
  EXPECT_EQ(plan.k_tiles, 64);
  EXPECT_EQ(plan.a_bytes, int64_t{8192} * 8192 * 2);  // exactly the BF16 activations
  EXPECT_EQ(plan.b_bytes, int64_t{4096} * 8192 * 2);
  EXPECT_EQ(plan.b1_bytes, 0);
  EXPECT_EQ(plan.staging_bytes(), plan.a_bytes + plan.b_bytes);
  // A pair (two weight sets over one A) stages both weights; ragged rows and columns round up.
  d.M = 1000, d.N = 1000, d.N1 = 300, d.K = 4096;
  ASSERT_TRUE(plan_packed_gemm(d, 512, 1, plan));
  EXPECT_EQ(plan.m_tiles, 8);
  EXPECT_EQ(plan.n_tiles, 8);
  EXPECT_EQ(plan.n1_tiles, 3);
  EXPECT_EQ(plan.b1_bytes, int64_t{3} * 32 * kPackBlockBytes);
  // Block-diagonal groups stage per group.
  PackedGemmDims grouped;
  grouped.M = 4096, grouped.N = 1024, grouped.K = 512, grouped.groups = 8;
  ASSERT_TRUE(plan_packed_gemm(grouped, 512, 132, plan));
  EXPECT_EQ(plan.a_bytes, int64_t{8} * 32 * 4 * kPackBlockBytes);
  // A weight packed once (the LM head at a 512-row decode batch) is not staged again; the other set
  // of a pair still is, and grouped launches ignore the packed copy (it holds one group).
  PackedGemmDims head;
  head.M = 512, head.N = 129280, head.K = 4096, head.w_packed = true;
  ASSERT_TRUE(plan_packed_gemm(head, 512, 132, plan));
  EXPECT_EQ(plan.n_tiles, 1010);
  EXPECT_EQ(plan.b_bytes, 0);
  EXPECT_EQ(plan.staging_bytes(), plan.a_bytes);
  d.w1_packed = true;
  ASSERT_TRUE(plan_packed_gemm(d, 512, 1, plan));
  EXPECT_EQ(plan.b_bytes, int64_t{8} * 32 * kPackBlockBytes);
  EXPECT_EQ(plan.b1_bytes, 0);
  grouped.w_packed = true;
  ASSERT_TRUE(plan_packed_gemm(grouped, 512, 132, plan));
  EXPECT_EQ(plan.b_bytes, int64_t{8} * 8 * 4 * kPackBlockBytes);
}

TEST(PackedPlanTest, OtherLaunchesKeepTheDequantisingKernel) {
  PackedGemmPlan plan;
  PackedGemmDims d;
  d.M = 8192, d.N = 4096, d.K = 8192;
  EXPECT_FALSE(plan_packed_gemm(d, 0, 132, plan));  // switched off
  d.M = 511;
  EXPECT_FALSE(plan_packed_gemm(d, 512, 132, plan));  // too few rows
  d.M = 8192, d.K = 8200;
  EXPECT_FALSE(plan_packed_gemm(d, 512, 132, plan));  // not whole K tiles
  d.K = 8192, d.experts = true;
  EXPECT_FALSE(plan_packed_gemm(d, 512, 132, plan));  // expert launches
  PackedGemmDims small;  // 4 x 8 output tiles: under a wave, the split-K kernel does better
  small.M = 512, small.N = 1024, small.K = 4096;
  EXPECT_FALSE(plan_packed_gemm(small, 512, 132, plan));
  EXPECT_TRUE(plan_packed_gemm(small, 512, 32, plan));
  small.N1 = 128;  // the smaller set decides
  EXPECT_FALSE(plan_packed_gemm(small, 512, 32, plan));
}

TEST(PackedPlanTest, ExpertLaunchesStageTheTableAndTheActivations) {
  PackedExpertPlan plan;
  // An 8K prefill chunk's gate/up launch: 49,152 (token, slot) pairs over 256 experts of 2048
  // columns, K = 4096. At most ceil(M / 128) + E tiles hold rows: every expert's last tile may be
  // partial.
  ASSERT_TRUE(plan_packed_experts(8192, 49152, 256, 2048, 4096, 1, plan));
  EXPECT_EQ(plan.y_tiles, 384 + 256);
  EXPECT_EQ(plan.n_tiles, 16);
  EXPECT_EQ(plan.k_tiles, 32);
  EXPECT_EQ(plan.table_bytes, 7680);  // 3 x 640 int32
  EXPECT_EQ(plan.a_bytes, int64_t{640} * 32 * kPackBlockBytes);
  EXPECT_EQ(plan.staging_bytes(), plan.table_bytes + plan.a_bytes);
  // Fewer pairs than experts: at most one tile per pair.
  ASSERT_TRUE(plan_packed_experts(600, 10, 256, 2048, 4096, 1, plan));
  EXPECT_EQ(plan.y_tiles, 1 + 10);
  EXPECT_EQ(plan.table_bytes, 256);
  EXPECT_FALSE(plan_packed_experts(8192, 49152, 256, 2048, 4096, 0, plan));     // switched off
  EXPECT_FALSE(plan_packed_experts(600, 3600, 256, 2048, 4096, 1024, plan));    // under the threshold
  EXPECT_FALSE(plan_packed_experts(8192, 49152, 256, 2048, 4000, 1, plan));     // not whole K tiles
  // A batch-512 decode step's gate/up launch in 32-pair tiles (the swapped kernel's small form):
  // 3,072 pairs, at most 96 + 256 tiles of 8 KB per K tile.
  ASSERT_TRUE(plan_packed_experts(512, 3072, 256, 2048, 4096, 1, plan, 32));
  EXPECT_EQ(plan.tile_rows, 32);
  EXPECT_EQ(plan.y_tiles, 96 + 256);
  EXPECT_EQ(plan.n_tiles, 16);
  EXPECT_EQ(plan.block_bytes(), 8192);
  EXPECT_EQ(plan.a_bytes, int64_t{352} * 32 * 8192);
  EXPECT_FALSE(plan_packed_experts(512, 3072, 256, 2048, 4096, 1, plan, 64));  // 128 or 32 only
  EXPECT_FALSE(plan_packed_experts(512, 3072, 2048, 2048, 4096, 1, plan, 32));  // > 1024 experts
  EXPECT_TRUE(plan_packed_experts(512, 3072, 1024, 2048, 4096, 1, plan, 32));
}

// Blocks of 32 rows (the small token tiles): the same layout with 1 KB steps, a bijection onto
// the 8 KB block, each step's core matrices where the wgmma descriptor (LBO 128, SBO 256) reads.
TEST(PackedPlanTest, SmallBlocksKeepTheLayoutWithShorterSteps) {
  constexpr int rows = 32;
  std::vector<int> seen(rows * kGemmBK, 0);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < kGemmBK; ++k) {
      const int off = packed_offset(r, k, 32, rows);
      ASSERT_GE(off, 0);
      ASSERT_LT(off, rows * kGemmBK * 2);
      ++seen[off / 2];
      // Step, row group and core matrix as in a 128-row block, with steps rows x 32 bytes apart.
      const int full = packed_offset(r, k, 32);
      ASSERT_EQ(off % (rows * 32), full % kPackStepBytes) << r << " " << k;
      ASSERT_EQ(off / (rows * 32), full / kPackStepBytes) << r << " " << k;
    }
  }
  for (int n : seen) ASSERT_EQ(n, 1);
}

// The expert kernel's producers store a tile row's four FP4 runs per step as two 16-byte core-
// matrix rows (packed_expert_gemm.cuh): for run r, quad q, element e the packed place must be
// step q, row group r / 8 (256 bytes each), core matrix e / 2 (128 bytes on), row r % 8 (16 bytes
// each), bytes 4 r + 2 (e % 2) of that row.
TEST(PackedPlanTest, Fp4RunsOfOneRowFillWholeCoreMatrixRows) {
  for (int row = 0; row < kPackRows; ++row)
    for (int run = 0; run < 4; ++run)
      for (int q = 0; q < 8; ++q)
        for (int e = 0; e < 4; ++e) {
          const int want = q * kPackStepBytes + (row / 8) * 256 + (row % 8) * 16 + (e / 2) * 128 + 4 * run + 2 * (e % 2);
          ASSERT_EQ(packed_offset(row, 32 * run + 4 * q + e, 32), want) << row << " " << run << " " << q << " " << e;
        }
}

}  // namespace
}  // namespace deepinfer::kernels
