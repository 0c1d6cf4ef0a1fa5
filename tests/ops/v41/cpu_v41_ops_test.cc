// The V4.1 ops of the CPU reference (ops/cpu/cpu_v41_*.cc) against independent scalar references
// written here: grid search for the quantizers, double precision for mHC / Engram / attention,
// brute force with integer-valued (exact) scores for the indexer's top-k and candidate blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "ops/cpu/cpu_ops.h"
#include "tensor/number_formats.h"

namespace deepinfer::ops {
namespace {

using tensor::DType;
using tensor::TensorView;

TensorView f32(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(v.data(), DType::kF32, shape);
}

std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// ---- quantizer references: nearest grid value by exhaustive search, ties to the even code ----
double nearest_on_grid(double x, const std::vector<double>& grid) {  // grid: ascending, by code order
  size_t best = 0;
  for (size_t i = 1; i < grid.size(); ++i) {
    const double d = std::fabs(x - grid[i]), db = std::fabs(x - grid[best]);
    if (d < db || (d == db && i % 2 == 0 && best % 2 == 1)) best = i;
  }
  return grid[best];
}
std::vector<double> e4m3_grid() {  // non-negative codes 0x00..0x7E in code order
  std::vector<double> g;
  for (int c = 0; c <= 0x7e; ++c) g.push_back(tensor::e4m3_to_f32(static_cast<uint8_t>(c)));
  return g;
}
const std::vector<double> kE2m1 = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
double quant(double x, const std::vector<double>& grid, double max) {
  const double a = std::min(std::fabs(x), max);
  return std::copysign(nearest_on_grid(a, grid), x);
}
double pow2_ceil_ref(double t) { return std::exp2(std::ceil(std::log2(t))); }

std::vector<float> ref_kv_quant(std::vector<float> v, KvQuantFormat f) {
  const int block = f == KvQuantFormat::kFp4E4m3x16 ? 16 : 32;
  for (size_t b = 0; b < v.size(); b += block) {
    double amax = 0;
    for (int i = 0; i < block; ++i) amax = std::max(amax, static_cast<double>(std::fabs(v[b + i])));
    double s;
    if (f == KvQuantFormat::kFp8Pow2x32) s = pow2_ceil_ref(static_cast<float>(std::max(amax, 1e-4) * (1.0f / 448.0f)));
    else if (f == KvQuantFormat::kFp4Pow2x32) s = pow2_ceil_ref(static_cast<float>(std::max(amax, 6.0 * std::ldexp(1.0, -126)) * (1.0f / 6.0f)));
    else s = quant(static_cast<float>(std::max(amax, 6.0 * std::ldexp(1.0, -9)) / 6.0), e4m3_grid(), 448);
    for (int i = 0; i < block; ++i) {
      const double q = static_cast<float>(v[b + i] / s);
      v[b + i] = static_cast<float>(f == KvQuantFormat::kFp8Pow2x32 ? quant(q, e4m3_grid(), 448) * s : quant(q, kE2m1, 6) * s);
    }
  }
  return v;
}

TEST(KvFakeQuantTest, MatchesGridSearchOnRandomRows) {
  cpu::CpuOps ops;
  for (KvQuantFormat f : {KvQuantFormat::kFp8Pow2x32, KvQuantFormat::kFp4E4m3x16, KvQuantFormat::kFp4Pow2x32}) {
    std::vector<float> v = randn(8 * 64, 7 + static_cast<int>(f), 0.7f);
    v[3] = 0.0f;
    for (int i = 64; i < 96; ++i) v[i] = 1e-6f * static_cast<float>(i % 5);  // tiny block: amax floors
    const std::vector<float> want = ref_kv_quant(v, f);
    ops.kv_fake_quant(f32(v, {8, 64}), f);
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], want[i]) << "format " << static_cast<int>(f) << " at " << i;
  }
}

TEST(KvFakeQuantTest, ExactScalesAtPowersOfTwoAndTies) {
  cpu::CpuOps ops;
  // FP8: amax exactly 448 -> scale 1 (not 2): 448 stays, 1.0625 is a tie between 1 and 1.125 -> 1.
  std::vector<float> a(32, 0.0f);
  a[0] = 448.0f, a[1] = 1.0625f, a[2] = -3.0f;
  ops.kv_fake_quant(f32(a, {1, 32}), KvQuantFormat::kFp8Pow2x32);
  EXPECT_EQ(a[0], 448.0f);
  EXPECT_EQ(a[1], 1.0f);
  EXPECT_EQ(a[2], -3.0f);
  // FP4 per 32: amax 6 -> scale 1; 2.5 ties to 2 (even code), 0.75 ties up to 1 (odd lower code).
  std::vector<float> b(32, 0.0f);
  b[0] = 6.0f, b[1] = 2.5f, b[2] = 0.75f, b[3] = -5.0f;
  ops.kv_fake_quant(f32(b, {1, 32}), KvQuantFormat::kFp4Pow2x32);
  EXPECT_EQ(b[1], 2.0f);
  EXPECT_EQ(b[2], 1.0f);
  EXPECT_EQ(b[3], -4.0f);
  // FP4 per 16 with an E4M3 scale: amax 3 -> scale 0.5 exactly; 1.25 / 0.5 = 2.5 -> 2 -> 1.0.
  std::vector<float> c(16, 0.0f);
  c[0] = 3.0f, c[1] = 1.25f;
  ops.kv_fake_quant(f32(c, {1, 16}), KvQuantFormat::kFp4E4m3x16);
  EXPECT_EQ(c[0], 3.0f);
  EXPECT_EQ(c[1], 1.0f);
}

// ---- mHC ----
struct HcRef {
  std::vector<double> pre, post, comb;
};
HcRef ref_hc_mix(const std::vector<float>& x, const std::vector<float>& fn, const std::vector<float>& base,
                 const std::vector<float>& scale, int64_t hc, int64_t D, double norm_eps, double eps, int iters) {
  const int64_t n = hc * D, n_mix = (2 + hc) * hc;
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double rho = 1.0 / std::sqrt(ss / n + norm_eps);
  std::vector<double> mu(n_mix, 0.0);
  for (int64_t m = 0; m < n_mix; ++m)
    for (int64_t i = 0; i < n; ++i) mu[m] += fn[m * n + i] * x[i] * rho;
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  HcRef r;
  for (int64_t i = 0; i < hc; ++i) {
    r.pre.push_back(sig(mu[i] * scale[0] + base[i]) + eps);
    r.post.push_back(2.0 * sig(mu[hc + i] * scale[1] + base[hc + i]));
  }
  std::vector<double> c(hc * hc);
  for (int64_t j = 0; j < hc; ++j) {
    double mx = -1e300, s = 0;
    for (int64_t k = 0; k < hc; ++k) mx = std::max(mx, mu[2 * hc + j * hc + k] * scale[2] + base[2 * hc + j * hc + k]);
    for (int64_t k = 0; k < hc; ++k) s += (c[j * hc + k] = std::exp(mu[2 * hc + j * hc + k] * scale[2] + base[2 * hc + j * hc + k] - mx));
    for (int64_t k = 0; k < hc; ++k) c[j * hc + k] = c[j * hc + k] / s + eps;
  }
  auto cols = [&] {
    for (int64_t k = 0; k < hc; ++k) {
      double s = 0;
      for (int64_t j = 0; j < hc; ++j) s += c[j * hc + k];
      for (int64_t j = 0; j < hc; ++j) c[j * hc + k] /= s + eps;
    }
  };
  auto rows = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      double s = 0;
      for (int64_t k = 0; k < hc; ++k) s += c[j * hc + k];
      for (int64_t k = 0; k < hc; ++k) c[j * hc + k] /= s + eps;
    }
  };
  cols();
  for (int i = 0; i < iters - 1; ++i) rows(), cols();
  r.comb = c;
  return r;
}

TEST(HcMixTest, MatchesADoubleReference) {
  cpu::CpuOps ops;
  const int64_t T = 3, hc = 4, D = 64, n_mix = 24;
  std::vector<float> x = randn(T * hc * D, 1), fn = randn(n_mix * hc * D, 2, 0.05f), base = randn(n_mix, 3, 0.3f);
  std::vector<float> scale = {0.9f, 1.1f, 1.3f};
  std::vector<float> pre(T * hc), post(T * hc), comb(T * hc * hc);
  HcWeights w{f32(fn, {n_mix, hc * D}), f32(base, {n_mix}), f32(scale, {3})};
  HcParams p{20, 1e-6f, 1e-20f};
  ops.hc_mix(f32(x, {T, hc, D}), w, p, f32(pre, {T, hc}), f32(post, {T, hc}), f32(comb, {T, hc, hc}));
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> xt(x.begin() + t * hc * D, x.begin() + (t + 1) * hc * D);
    const HcRef r = ref_hc_mix(xt, fn, base, scale, hc, D, 1e-20, 1e-6, 20);
    for (int64_t i = 0; i < hc; ++i) {
      EXPECT_NEAR(pre[t * hc + i], r.pre[i], 2e-6);
      EXPECT_NEAR(post[t * hc + i], r.post[i], 2e-6);
    }
    for (int64_t i = 0; i < hc * hc; ++i) EXPECT_NEAR(comb[t * hc * hc + i], r.comb[i], 2e-6);
  }
}

TEST(HcCollapseTest, IsExactOnIntegerInputs) {
  cpu::CpuOps ops;
  const int64_t T = 2, hc = 4, D = 5;
  std::vector<float> x(T * hc * D), pre = {1, 0, 0, 0, 0.5f, 0.25f, 2, -1}, u(T * D);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  ops.hc_collapse(f32(x, {T, hc, D}), f32(pre, {T, hc}), f32(u, {T, D}));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < D; ++c) {
      float want = 0;
      for (int64_t i = 0; i < hc; ++i) want += pre[t * hc + i] * x[(t * hc + i) * D + c];
      EXPECT_EQ(u[t * D + c], want);
    }
}

// ---- Engram gate ----
TEST(EngramGateTest, MatchesADoubleReferenceAndHonoursTheLiveMask) {
  cpu::CpuOps ops;
  const int64_t T = 2, hc = 4, D = 32;
  std::vector<float> x = randn(T * hc * D, 11), kv = randn(T * (hc + 1) * D, 12), qw = randn(hc * D, 13, 0.3f),
                     kw = randn(hc * D, 14, 0.3f), out(T * hc * D);
  for (float& v : qw) v += 1.0f;
  std::vector<int32_t> live = {1, 0};
  ops.engram_gate(f32(x, {T, hc, D}), f32(kv, {T, (hc + 1) * D}), f32(qw, {hc, D}), f32(kw, {hc, D}),
                  TensorView::contiguous(live.data(), DType::kI32, {T}), 1e-20f, f32(out, {T, hc, D}));
  for (int64_t i = 0; i < hc; ++i) {
    double hh = 0, kk = 0, dot = 0;
    for (int64_t d = 0; d < D; ++d) {
      const double h = x[i * D + d], k = kv[i * D + d];
      hh += h * h, kk += k * k, dot += h * qw[i * D + d] * kw[i * D + d] * k;
    }
    dot = dot / std::sqrt(hh / D + 1e-20) / std::sqrt(kk / D + 1e-20) / std::sqrt(static_cast<double>(D));
    const double gate = 1.0 / (1.0 + std::exp(-std::copysign(std::sqrt(std::max(std::fabs(dot), 1e-6)), dot)));
    for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(out[i * D + d], x[i * D + d] + gate * kv[hc * D + d], 2e-5);
  }
  for (int64_t i = hc * D; i < 2 * hc * D; ++i) EXPECT_EQ(out[i], x[i]);  // dead row: gate 0
}

// ---- indexer: a one-sequence batch over history blocks ----
struct OneSeq {
  std::vector<int32_t> ids, pos, seq_of, table;
  SeqSpan span;
  BatchView batch;
  OneSeq(int32_t start, int32_t n, int32_t block_tokens, int32_t n_blocks) {
    span = SeqSpan{0, 0, n, start, 0, 0};
    for (int32_t i = 0; i < n; ++i) ids.push_back(3), pos.push_back(start + i), seq_of.push_back(0);
    table.resize(static_cast<size_t>(n_blocks));
    std::iota(table.rbegin(), table.rend(), 0);  // reversed: exercises the block indirection
    batch.n_tokens = n;
    batch.n_seqs = 1;
    batch.block_tokens = block_tokens;
    batch.max_blocks = n_blocks;
    batch.h_token_ids = ids.data();
    batch.h_positions = pos.data();
    batch.h_token_seq = seq_of.data();
    batch.h_seqs = &span;
    batch.h_block_tables = table.data();
  }
  int64_t row(int32_t g, int32_t rows_per_block) const {
    return static_cast<int64_t>(table[g / rows_per_block]) * rows_per_block + g % rows_per_block;
  }
};

TEST(IndexerV41Test, TopKAndTwoLevelCandidatesMatchABruteForce) {
  cpu::CpuOps ops;
  const int64_t Hi = 2, di = 4, K = 3;
  const int32_t ratio = 2, block_tokens = 8, rpb = block_tokens / ratio, n_blocks = 6;
  OneSeq s(30, 6, block_tokens, n_blocks);  // positions 30..35: 15..18 visible entries
  std::mt19937 rng(5);
  std::vector<float> keys(n_blocks * rpb * di), q(s.ids.size() * Hi * di), w(s.ids.size() * Hi);
  for (float& v : keys) v = static_cast<float>(static_cast<int>(rng() % 7) - 3);
  for (float& v : q) v = static_cast<float>(static_cast<int>(rng() % 5) - 2);
  for (float& v : w) v = static_cast<float>(1 + rng() % 3);
  IndexerV41Params p{ratio, rpb, 0.5f, 0.5f, IndexerV41Params::Candidates::kPublish, 3, 2};
  const int64_t T = static_cast<int64_t>(s.ids.size());
  std::vector<int32_t> cand(T * 3), idx(T * K), idx2(T * K);
  ops.indexer_topk_v41(f32(q, {T, Hi, di}), f32(w, {T, Hi}), f32(keys, {n_blocks * rpb, di}), s.batch, p,
                       TensorView::contiguous(cand.data(), DType::kI32, {T, 3}),
                       TensorView::contiguous(idx.data(), DType::kI32, {T, K}));
  p.candidates = IndexerV41Params::Candidates::kRestrict;
  ops.indexer_topk_v41(f32(q, {T, Hi, di}), f32(w, {T, Hi}), f32(keys, {n_blocks * rpb, di}), s.batch, p,
                       TensorView::contiguous(cand.data(), DType::kI32, {T, 3}),
                       TensorView::contiguous(idx2.data(), DType::kI32, {T, K}));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t n_vis = (s.pos[t] + 1) / ratio;
    std::vector<double> sc(n_vis);
    for (int32_t g = 0; g < n_vis; ++g) {
      double acc = 0;
      for (int64_t h = 0; h < Hi; ++h) {
        double dot = 0;
        for (int64_t c = 0; c < di; ++c) dot += q[(t * Hi + h) * di + c] * keys[s.row(g, rpb) * di + c];
        acc += std::max(0.0, dot) * 0.5 * w[t * Hi + h] * 0.5;
      }
      sc[g] = acc;
    }
    auto top = [&](std::vector<int32_t> ids, const std::vector<double>& v, int64_t k) {
      std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
      ids.resize(std::min<size_t>(ids.size(), k));
      std::sort(ids.begin(), ids.end());
      return ids;
    };
    std::vector<int32_t> all(n_vis);
    std::iota(all.begin(), all.end(), 0);
    const std::vector<int32_t> want = top(all, sc, K);
    for (int64_t k = 0; k < K; ++k) ASSERT_EQ(idx[t * K + k], want[k]) << "row " << t;
    // Blocks of 2 entries: max score, the newest visible entry's block pinned.
    const int32_t nb = (n_vis + 1) / 2;
    std::vector<double> bmax(nb, -1e300);
    for (int32_t g = 0; g < n_vis; ++g) bmax[g / 2] = std::max(bmax[g / 2], sc[g]);
    bmax[(n_vis - 1) / 2] = 1e300;
    std::vector<int32_t> blocks(nb);
    std::iota(blocks.begin(), blocks.end(), 0);
    const std::vector<int32_t> want_blocks = top(blocks, bmax, 3);
    for (int64_t k = 0; k < 3; ++k) ASSERT_EQ(cand[t * 3 + k], want_blocks[k]) << "row " << t;
    EXPECT_TRUE(std::count(want_blocks.begin(), want_blocks.end(), (n_vis - 1) / 2));
    std::vector<int32_t> inside;
    for (int32_t g = 0; g < n_vis; ++g)
      if (std::count(want_blocks.begin(), want_blocks.end(), g / 2)) inside.push_back(g);
    const std::vector<int32_t> want2 = top(inside, sc, K);
    for (int64_t k = 0; k < K; ++k) ASSERT_EQ(idx2[t * K + k], want2[k]) << "row " << t;
  }
}

TEST(IndexerV41Test, FewerVisibleEntriesThanKArePaddedAndNeverInTheFuture) {
  cpu::CpuOps ops;
  OneSeq s(0, 3, 4, 1);  // ratio 1: positions 0..2 see 1..3 entries
  std::vector<float> keys(4 * 4, 1.0f), q(3 * 1 * 4, 1.0f), w(3, 1.0f);
  std::vector<int32_t> idx(3 * 4), cand(3 * 2);
  IndexerV41Params p{1, 4, 1.0f, 1.0f, IndexerV41Params::Candidates::kPublish, 2, 2};
  ops.indexer_topk_v41(f32(q, {3, 1, 4}), f32(w, {3, 1}), f32(keys, {4, 4}), s.batch, p,
                       TensorView::contiguous(cand.data(), DType::kI32, {3, 2}),
                       TensorView::contiguous(idx.data(), DType::kI32, {3, 4}));
  EXPECT_EQ(idx, (std::vector<int32_t>{0, -1, -1, -1, 0, 1, -1, -1, 0, 1, 2, -1}));
  EXPECT_EQ(cand, (std::vector<int32_t>{0, -1, 0, -1, 0, 1}));
}

// ---- DSpark block attention ----
TEST(BlockAttentionTest, AttendsToTheRingBelowAndTheWholeBlock) {
  cpu::CpuOps ops;
  const int64_t H = 2, d = 8, W = 4, n = 3;
  const int32_t start = 10, floor = 8;
  std::vector<float> ring = randn(W * d, 21), kv = randn(n * d, 22), q = randn(n * H * d, 23), sink = {0.3f, -0.2f},
                     out(n * H * d);
  std::vector<int32_t> ids(n, 1), pos = {10, 11, 12}, seq_of(n, 0);
  SeqSpan span{0, 0, static_cast<int32_t>(n), start, 0, floor};
  BatchView b;
  b.n_tokens = n, b.n_seqs = 1, b.h_token_ids = ids.data(), b.h_positions = pos.data(), b.h_token_seq = seq_of.data();
  b.h_seqs = &span;
  AttentionParams ap;
  ap.window = W;
  ap.softmax_scale = 0.25f;
  ops.block_attention(f32(q, {n, H, d}), f32(kv, {n, d}), f32(ring, {1, W, d}), f32(sink, {H}), b, ap,
                      f32(out, {n, H, d}));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      std::vector<const float*> rows;
      for (int32_t p = floor; p < start; ++p) rows.push_back(&ring[(p % W) * d]);  // ring 8, 9 (floor 8)
      for (int64_t j = 0; j < n; ++j) rows.push_back(&kv[j * d]);                   // the whole block
      std::vector<double> z;
      double mx = sink[h];
      for (const float* r : rows) {
        double v = 0;
        for (int64_t c = 0; c < d; ++c) v += q[(t * H + h) * d + c] * r[c];
        z.push_back(v * 0.25), mx = std::max(mx, z.back());
      }
      double den = std::exp(sink[h] - mx);
      for (double& v : z) den += (v = std::exp(v - mx));
      for (int64_t c = 0; c < d; ++c) {
        double o = 0;
        for (size_t j = 0; j < rows.size(); ++j) o += z[j] / den * rows[j][c];
        EXPECT_NEAR(out[(t * H + h) * d + c], o, 1e-5) << t << " " << h << " " << c;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::ops
