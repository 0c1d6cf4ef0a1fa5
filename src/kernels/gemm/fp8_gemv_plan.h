// Launch geometry of the FP8-operand decode GEMM (fp8_gemv.cuh), as plain C++ (tested on the CPU).
// One CTA = one warpgroup = `tiles` column tiles of 64 output columns of one weight set (streamed in
// turn) x one canonical K sub-range; the P CTAs of a tile group form a cluster (consecutive x), whose
// rank 0 folds the sub-range sums.
// The launcher (launch_gemm.cu) checks what this cannot see (formats, alignment, the knob) and
// asks here whether the shape fits.
#pragma once

#include <cstdint>

#include "kernels/gemm/canonical_k.h"

namespace deepinfer::kernels {

inline constexpr int kFp8GemvCols = 64;       // output columns per CTA (wgmma's M)
inline constexpr int kFp8GemvMaxRows = 32;    // activation rows (wgmma's N: 8, 16 or 32)
inline constexpr int kFp8GemvMaxBlocks = 8;   // 128-input blocks per sub-range (R <= 1024)
inline constexpr int kFp8GemvBlock = 128;     // the promotion block: weights' and activations' scale block
inline constexpr int kFp8GemvMaxTiles = 2;    // column tiles per CTA

// The weights' scale blocks both FP8-order kernels take: block_in 128 (one scale per promotion
// block), block_out a power of two >= 64 (a 64-column tile or warpgroup in one scale row; V4's
// 128 x 128).
inline bool fp8_order_scale_blocks_ok(int block_in, int block_out) {
  return block_in == kFp8GemvBlock && block_out >= kFp8GemvCols && (block_out & (block_out - 1)) == 0;
}

// The K both FP8-order kernels take: whole promotion blocks, each canonical sub-range at most
// kFp8GemvMaxBlocks of them (K <= 8192; the decode kernel stages one sub-range per CTA). One rule
// for both, so a launch's row count never decides whether a row takes the FP8 order (the CPU
// reference's FP8 order asks the same: cpu_linear.cc).
inline bool fp8_order_k_ok(int64_t K) {
  return K >= kFp8GemvBlock && K % kFp8GemvBlock == 0 && gemm_subrange(K) / kFp8GemvBlock <= kFp8GemvMaxBlocks &&
         gemm_n_subranges(K) <= 8;  // 8: the portable cluster size
}

struct Fp8GemvShape {
  int R = 0, P = 0;    // gemm_subrange(K), gemm_n_subranges(K): one CTA each, P = cluster size
  int tiles = 1;       // column tiles each CTA streams in turn (1 or 2)
  int groups0 = 0;     // tile groups (CTAs along the tiles) of weight set 0 (set 1's follow)
  int out_shift = 0;   // log2 of the weights' scale block of outputs (>= 64 rows)
  int nr = 8;          // wgmma's N: the rows rounded up to 8, 16 or 32 (the staging's rows)
};

// How the decode kernel's cluster folds its sub-range sums: at 8 rows every CTA pushes them into
// rank 0's buffer ([tiles][8 sub-ranges][64 columns][8] F32); wider, each CTA keeps its own
// ([tiles][64 columns][nr]) and rank 0 reads them after a cluster barrier — the push buffer would be
// 64 KB at 32 rows, and the pull's second barrier cost batch 1 ~2.5% (session 46).
DI_HOST_DEVICE constexpr bool fp8_gemv_pushes(int nr) { return nr == 8; }

// Dynamic shared memory of the decode kernel: the staged codes ([8 blocks][4 steps][nr x 32]), the
// rows' scales ([nr][8]) and the fold's sums (above).
inline int64_t fp8_gemv_smem_bytes(int nr, int tiles) {
  return int64_t{kFp8GemvMaxBlocks} * 4 * nr * 32 + int64_t{nr} * kFp8GemvMaxBlocks * 4 +
         int64_t{tiles} * (fp8_gemv_pushes(nr) ? 8 : 1) * kFp8GemvCols * nr * 4;
}

struct Fp8GemvDims {
  int64_t rows = 0;         // M
  int64_t N = 0, N1 = 0;    // columns of weight set 0 and 1 (N1 = 0: one set)
  int64_t K = 0;
  int block_in = 0, block_out = 0;  // the weights' scale blocks (both sets)
  int tiles = 1;                    // column tiles per CTA asked for at 8 rows (1 or 2)
  int wide_tiles = 1;               // ... and at 9-32 rows (1 or 2)
  int decode_rows = kFp8GemvMaxRows;  // the most rows the decode kernel takes (8, 16 or 32); the
                                      // large-M kernel takes more (both give a row the same bits)
  int split_below = 0;  // the large-M kernel splits K over a cluster when it has fewer tiles (0: never)
  bool small_token_tiles = false;  // the large-M kernel's 32- and 64-token tiles (fp8_gemm_token_tile)
};

inline bool fp8_decode_rows_ok(int r) { return r == 8 || r == 16 || r == kFp8GemvMaxRows; }

struct Fp8GemvPlan {
  Fp8GemvShape shape;
  int64_t grid_x = 0;  // tile groups x P
};

inline bool plan_fp8_gemv(const Fp8GemvDims& d, Fp8GemvPlan& plan) {
  plan = Fp8GemvPlan{};
  if (!fp8_decode_rows_ok(d.decode_rows) || d.rows < 1 || d.rows > d.decode_rows || d.N < 1 || d.N1 < 0) return false;
  if (!fp8_order_k_ok(d.K) || !fp8_order_scale_blocks_ok(d.block_in, d.block_out)) return false;
  Fp8GemvShape& sh = plan.shape;
  sh.R = static_cast<int>(gemm_subrange(d.K));
  sh.P = gemm_n_subranges(d.K);
  const int64_t tiles0 = (d.N + kFp8GemvCols - 1) / kFp8GemvCols;
  const int64_t tiles1 = (d.N1 + kFp8GemvCols - 1) / kFp8GemvCols;
  sh.out_shift = __builtin_ctz(static_cast<unsigned>(d.block_out));
  if (d.tiles < 1 || d.tiles > kFp8GemvMaxTiles || d.wide_tiles < 1 || d.wide_tiles > kFp8GemvMaxTiles) return false;
  sh.nr = d.rows <= 8 ? 8 : (d.rows <= 16 ? 16 : 32);
  // Past 8 rows the staging (M x R activations quantised per CTA) weighs as much as the tile's
  // weights at 32 rows; two tiles per CTA share it (wide_tiles = 2, session 47's A/B).
  sh.tiles = sh.nr == 8 ? d.tiles : d.wide_tiles;
  sh.groups0 = static_cast<int>((tiles0 + sh.tiles - 1) / sh.tiles);
  plan.grid_x = (sh.groups0 + (tiles1 + sh.tiles - 1) / sh.tiles) * sh.P;
  return true;
}

// The large-M kernel of the same order (fp8_gemm.cuh): output tiles of 64 x `consumers` columns
// (a consumer warpgroup's 64 each; 2 or 3) x 128 tokens (32 or 64: fp8_gemm_token_tile),
// persistent CTAs; two pre-passes write its operands into the staging workspace as blocks of one
// 128-input block each, in the shared-memory image the kernel's bulk copies move whole: the
// activations' E4M3 codes with their scales, then the weights.
inline constexpr int kFp8GemmTile = 128;  // tokens per tile (the most; 32 or 64 for launches of fewer rows)
// A code block of `tm` tokens: tm x 128 codes, then the tokens' F32 scales.
DI_HOST_DEVICE constexpr int64_t fp8_gemm_operand_bytes(int tm) { return int64_t{tm} * kFp8GemvBlock; }
DI_HOST_DEVICE constexpr int64_t fp8_gemm_codes_block_bytes(int tm) { return fp8_gemm_operand_bytes(tm) + int64_t{tm} * 4; }

struct Fp8GemmPlan {
  int consumers = 2;         // consumer warpgroups: 64 columns each
  int64_t tile_cols = 0;     // 64 x consumers
  int64_t tiles0 = 0;        // column tiles of weight set 0 (set 1's follow)
  int64_t n_tiles = 0;       // column tiles of both sets
  int64_t m_tiles = 0;       // token tiles
  int64_t kb = 0;            // 128-input blocks (K / 128)
  int out_shift = 0;         // log2 of the weights' block_out
  int64_t codes_bytes = 0;   // m_tiles x kb code blocks (16-byte multiples: the weights follow aligned)
  int64_t weight_block_bytes = 0;  // tile_cols x 128
  int64_t staging_bytes = 0; // codes + n_tiles x kb weight blocks
  int split = 1;             // CTAs per tile: gemm_n_subranges(K) when the tiles are fewer than
                             // split_below (the split form: one K sub-range each), else 1
  int token_tile = kFp8GemmTile;  // tokens per tile: 32 or 64 where the rows fit (small_token_tiles), else 128
};

// Tokens per tile of a launch of `rows` rows: with small tiles the least of 32, 64 and 128 that
// holds them — a 9-64-row decode step on 128-token tiles spends 2-14x the MMAs, the code bytes
// and the promotion's FMAs of its rows on zeros (wgmma's N is the tokens: m64n32 / m64n64).
// Small tiles are for 3 consumer warpgroups (the default) only: two instantiations fewer.
inline int fp8_gemm_token_tile(int64_t rows, bool small_token_tiles, int consumers) {
  if (!small_token_tiles || consumers != 3) return kFp8GemmTile;
  return rows <= 32 ? 32 : (rows <= 64 ? 64 : kFp8GemmTile);
}

// Bytes of an N x K weight as the large-M kernel's blocks ([column tiles][K / 128] blocks of
// 64 C columns x 128 codes, rows past N zero): a set's share of the staging, or its prepared copy.
inline int64_t fp8_gemm_weight_bytes(int64_t N, int64_t K, int consumers) {
  const int64_t cols = int64_t{kFp8GemvCols} * consumers;
  return (N + cols - 1) / cols * (K / kFp8GemvBlock) * cols * kFp8GemvBlock;
}

// Rows beyond the decode kernel's (> decode_rows), whole promotion blocks, 128 x (power of two >= 64) scales
// (a warpgroup's 64 columns share one weight scale per block).
inline bool plan_fp8_gemm(const Fp8GemvDims& d, int consumers, Fp8GemmPlan& plan) {
  plan = Fp8GemmPlan{};
  if (consumers != 2 && consumers != 3) return false;
  if (!fp8_decode_rows_ok(d.decode_rows) || d.rows <= d.decode_rows || d.N < 1 || d.N1 < 0) return false;
  if (!fp8_order_k_ok(d.K) || !fp8_order_scale_blocks_ok(d.block_in, d.block_out)) return false;
  plan.consumers = consumers;
  plan.tile_cols = int64_t{kFp8GemvCols} * consumers;
  plan.tiles0 = (d.N + plan.tile_cols - 1) / plan.tile_cols;
  plan.n_tiles = plan.tiles0 + (d.N1 + plan.tile_cols - 1) / plan.tile_cols;
  plan.token_tile = fp8_gemm_token_tile(d.rows, d.small_token_tiles, consumers);
  plan.m_tiles = (d.rows + plan.token_tile - 1) / plan.token_tile;
  plan.kb = d.K / kFp8GemvBlock;
  plan.out_shift = __builtin_ctz(static_cast<unsigned>(d.block_out));
  plan.codes_bytes = plan.m_tiles * plan.kb * fp8_gemm_codes_block_bytes(plan.token_tile);
  plan.weight_block_bytes = plan.tile_cols * kFp8GemvBlock;
  plan.staging_bytes = plan.codes_bytes + fp8_gemm_weight_bytes(d.N, d.K, consumers) +
                       (d.N1 > 0 ? fp8_gemm_weight_bytes(d.N1, d.K, consumers) : 0);
  // Fewer tiles than SMs (decode steps of 17-127 rows: 9 tiles for wq_a + wkv) leave most SMs idle
  // with one CTA per tile; a cluster per tile, one sub-range per CTA, folds them in order instead.
  if (plan.n_tiles * plan.m_tiles < d.split_below) plan.split = gemm_n_subranges(d.K);
  return true;
}

}  // namespace deepinfer::kernels
