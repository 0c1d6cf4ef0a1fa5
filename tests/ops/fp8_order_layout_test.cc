// The FP8 order's k grouping (src/kernels/gemm/fp8_order_layout.h) without a GPU: the map from a
// physical input to its (k32 step, position) is a bijection per 64-input window; the decode
// kernel's register words are the a0 / a2 operands the map says; and every operand the two
// FP8-order kernels place — the decode staging and the large-M kernel's tiles of weights and
// activation codes, one layout (fp8_tile_offset) — puts each input at the step and position the map gives, each
// byte of a stage written once. A product meets its partner only if both agree, and the kernels'
// bitwise equality (the probe: the tensor core's step sums depend on which inputs share a step)
// rests on it.
#include "kernels/gemm/fp8_order_layout.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

namespace deepinfer::kernels {
namespace {

TEST(Fp8OrderLayoutTest, EachWindowFillsItsTwoStepsOnce) {
  for (int64_t w = 0; w < 16; ++w) {
    std::set<std::pair<int64_t, int>> seen;
    for (int64_t k = 64 * w; k < 64 * w + 64; ++k) {
      const Fp8StepPos sp = fp8_step_pos(k);
      EXPECT_TRUE(sp.step == 2 * w || sp.step == 2 * w + 1) << k;
      EXPECT_GE(sp.pos, 0);
      EXPECT_LT(sp.pos, 32);
      EXPECT_TRUE(seen.insert({sp.step, sp.pos}).second) << "k " << k << " shares a slot";
    }
    EXPECT_EQ(seen.size(), 64u);
  }
}

// Lane c's 16 bytes of window w: word i is a0 (i even) or a2 (i odd) of step 2 w + i / 2, whose
// four codes wgmma takes at positions 4 c .. 4 c + 3 (a0) and 16 + 4 c .. (a2) of the step.
TEST(Fp8OrderLayoutTest, DecodeRegisterWordsAreTheStepsOperands) {
  for (int64_t w = 0; w < 4; ++w)
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const Fp8StepPos sp = fp8_step_pos(64 * w + 16 * c + 4 * i + j);
          EXPECT_EQ(sp.step, 2 * w + i / 2);
          EXPECT_EQ(sp.pos, 16 * (i % 2) + 4 * c + j);
        }
}

// The decode kernel's staging (rows = its wgmma N: 8, 16 or 32; k over a sub-range of up to eight
// blocks): each input at its step and position in the core matrix of its row, each byte once.
TEST(Fp8OrderLayoutTest, StagedActivationsFollowTheMap) {
  for (int rows : {8, 16, 32}) {
    std::vector<int> stage_hits(32 * rows * 32, 0);  // eight blocks = 32 steps
    for (int n = 0; n < rows; ++n)
      for (int k = 0; k < 1024; ++k) {
        const Fp8StepPos sp = fp8_step_pos(k);
        const int o = fp8_tile_offset(n, k, rows);
        EXPECT_EQ(o / (rows * 32), sp.step);
        EXPECT_EQ((o % (rows * 32)) / 256, n / 8);
        EXPECT_EQ((o % 256) / 128, sp.pos / 16);
        EXPECT_EQ((o % 128) / 16, n % 8);
        EXPECT_EQ(o % 16, sp.pos % 16);
        ++stage_hits[o];
      }
    for (size_t i = 0; i < stage_hits.size(); ++i) EXPECT_EQ(stage_hits[i], 1) << rows << " rows: staged byte " << i;
  }
}

// The large-M tiles (code blocks of 128 tokens, weight blocks of 128 or 192 rows): every (row,
// input) of a block at its step and position, in the core matrix wgmma reads for that row, each
// byte once; and the pre-passes' 4-byte stores (inputs 4 i .. 4 i + 3 stay adjacent) land on
// contiguous bytes.
TEST(Fp8OrderLayoutTest, LargeMTilesFollowTheMapAndFillTheBlockOnce) {
  for (int rows : {128, 192}) {
    const int step_bytes = rows * 32;
    std::vector<int> hits(4 * step_bytes, 0);
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < 128; ++k) {
        const int o = fp8_tile_offset(r, k, rows);
        const Fp8StepPos sp = fp8_step_pos(k);
        // Step o / (rows x 32), row group r / 8 at 256, core matrix pos / 16 at 128, row r % 8 at 16.
        EXPECT_EQ(o / step_bytes, sp.step);
        EXPECT_EQ((o % step_bytes) / 256, r / 8);
        EXPECT_EQ((o % 256) / 128, sp.pos / 16);
        EXPECT_EQ((o % 128) / 16, r % 8);
        EXPECT_EQ(o % 16, sp.pos % 16);
        if (k % 4 != 0) {
          EXPECT_EQ(o, fp8_tile_offset(r, k - 1, rows) + 1);
        }
        ++hits[o];
      }
    for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i], 1) << rows << " rows: block byte " << i;
    // Warpgroup w's 64 rows: its A descriptor starts 2048 w bytes into each step.
    EXPECT_EQ(fp8_tile_offset(64, 0, rows) - fp8_tile_offset(0, 0, rows), 2048);
    EXPECT_EQ(fp8_tile_offset(0, 64, rows) - fp8_tile_offset(0, 0, rows), 2 * step_bytes);  // input 64: step 2
  }
}

}  // namespace
}  // namespace deepinfer::kernels
