// The vision tower (vision/vision_encoder.h) on the generated tiny-v41 checkpoint (2 layers, 64 wide,
// 2 heads of 32, aligner 576 -> 128): the span layout and its learned delimiter rows, determinism,
// the ViT against a double-precision forward written here from model_v41_flash.md §8, and aligner
// rows recomputed in double from the weights and the ViT features.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "loader/checkpoint.h"
#include "loader/weights_v41.h"
#include "ops/cpu/cpu_ops.h"
#include "tensor/number_formats.h"
#include "test_models.h"
#include "vision/vision_encoder.h"

namespace deepinfer::vision {
namespace {

using model::Numerics;

std::vector<double> read_vec(const tensor::TensorView& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype == tensor::DType::kF32 ? t.as<const float>()[i] : tensor::bf16_to_f32(t.as<const uint16_t>()[i]);
  return v;
}

// y [n, out] = x [n, in] W^T (+ bias), in double.
std::vector<double> linear_ref(const std::vector<double>& x, const tensor::LinearWeight& w,
                               const tensor::TensorView* bias,
                               int64_t row_begin = 0, int64_t rows = -1) {
  if (rows < 0) rows = w.out;
  const int64_t n = static_cast<int64_t>(x.size()) / w.in;
  std::vector<double> b = bias ? read_vec(*bias) : std::vector<double>(static_cast<size_t>(w.out), 0.0);
  std::vector<double> y(static_cast<size_t>(n * rows));
  std::vector<float> wr(static_cast<size_t>(w.in));
  for (int64_t o = 0; o < rows; ++o) {
    w.dequantize_row(row_begin + o, wr.data());
    for (int64_t t = 0; t < n; ++t) {
      double acc = b[row_begin + o];
      for (int64_t i = 0; i < w.in; ++i) acc += x[t * w.in + i] * wr[i];
      y[t * rows + o] = acc;
    }
  }
  return y;
}

std::vector<double> rms_norm_ref(const std::vector<double>& x, const tensor::TensorView& weight) {
  const std::vector<double> g = read_vec(weight);
  const int64_t n = static_cast<int64_t>(g.size()), rows = static_cast<int64_t>(x.size()) / n;
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < n; ++i) ms += x[r * n + i] * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ms / n + 1e-6);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * inv * g[i];
  }
  return y;
}

// Rotate-half 2D RoPE of one head vector (§8): angle j = row * f_j (j < hd/4) or col * f_(j-hd/4),
// f_i = theta^(-2i / (hd/2)), pairs (j, j + hd/2).
void rope_ref(double* v, int64_t hd, int64_t row, int64_t col) {
  const int64_t half = hd / 2, quarter = hd / 4;
  for (int64_t j = 0; j < half; ++j) {
    const int64_t pos = j < quarter ? row : col, i = j < quarter ? j : j - quarter;
    const double a = static_cast<double>(pos) * std::pow(1e4, -2.0 * static_cast<double>(i) / half);
    const double x1 = v[j], x2 = v[j + half];
    v[j] = x1 * std::cos(a) - x2 * std::sin(a);
    v[j + half] = x2 * std::cos(a) + x1 * std::sin(a);
  }
}

// The whole ViT in double: [T, Vd] final-normed features.
std::vector<double> vit_ref(const PreparedImage& img, const loader::ModelConfig& c, const loader::VisionWeights& w) {
  const int64_t T = img.layout.grid_h * img.layout.grid_w, gw = img.layout.grid_w, Vd = c.vision.hidden_size;
  const int64_t H = c.vision.num_attention_heads, hd = Vd / H, I = c.vision.intermediate_size;
  std::vector<double> x = linear_ref(std::vector<double>(img.patches.begin(), img.patches.end()), w.patch_embed,
                                     &w.patch_embed_bias);
  for (const loader::VisionBlockWeights& b : w.blocks) {
    std::vector<double> qkv = linear_ref(rms_norm_ref(x, b.norm1), b.wqkv, &b.wqkv_bias);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        rope_ref(&qkv[t * 3 * Vd + h * hd], hd, t / gw, t % gw);
        rope_ref(&qkv[t * 3 * Vd + Vd + h * hd], hd, t / gw, t % gw);
      }
    std::vector<double> attn(static_cast<size_t>(T * Vd), 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<size_t>(T));
        double mx = -1e300, den = 0;
        for (int64_t j = 0; j < T; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e) d += qkv[t * 3 * Vd + h * hd + e] * qkv[j * 3 * Vd + Vd + h * hd + e];
          mx = std::max(mx, s[j] = d / std::sqrt(static_cast<double>(hd)));
        }
        for (double& v : s) den += (v = std::exp(v - mx));
        for (int64_t j = 0; j < T; ++j)
          for (int64_t e = 0; e < hd; ++e)
            attn[t * Vd + h * hd + e] += s[j] / den * qkv[j * 3 * Vd + 2 * Vd + h * hd + e];
      }
    const std::vector<double> o = linear_ref(attn, b.wo, &b.wo_bias);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const std::vector<double> hn = rms_norm_ref(x, b.norm2);
    const std::vector<double> g = linear_ref(hn, b.w1, nullptr, 0, I), u = linear_ref(hn, b.w1, nullptr, I, I);
    std::vector<double> act(g.size());
    for (size_t i = 0; i < g.size(); ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    const std::vector<double> m = linear_ref(act, b.w2, nullptr);
    for (size_t i = 0; i < x.size(); ++i) x[i] += m[i];
  }
  return rms_norm_ref(x, w.norm);
}

// One aligner row in double from ViT features: cell (cy, cx) unfolded channel-major (c*9 + kh*3 +
// kw, zero outside the grid), Linear + bias, erf GELU, Linear + bias.
std::vector<double> aligner_row_ref(const std::vector<float>& vit, const ImageLayout& l, int64_t cy, int64_t cx,
                                    const loader::VisionWeights& w, int64_t Vd) {
  std::vector<double> in(static_cast<size_t>(Vd * 9), 0.0);
  for (int64_t c = 0; c < Vd; ++c)
    for (int64_t kh = 0; kh < 3; ++kh)
      for (int64_t kw = 0; kw < 3; ++kw) {
        const int64_t py = cy * 3 + kh, px = cx * 3 + kw;
        if (py < l.grid_h && px < l.grid_w) in[c * 9 + kh * 3 + kw] = vit[(py * l.grid_w + px) * Vd + c];
      }
  std::vector<double> h = linear_ref(in, w.aligner_w1, &w.aligner_b1);
  for (double& v : h) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  return linear_ref(h, w.aligner_w2, &w.aligner_b2);
}

RgbImage pattern(int64_t w, int64_t h) {
  RgbImage img{w, h, std::vector<uint8_t>(static_cast<size_t>(w * h * 3))};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.rgb[(y * w + x) * 3 + c] = static_cast<uint8_t>((x * 11 + y * 5 + c * 70 + (x * y) % 17) % 256);
  return img;
}

class VisionEncoderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = testing::synthetic_model_dir("tiny-v41", 0);
    auto cfg = loader::load_model_config(dir);
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
    config_ = new loader::ModelConfig(*cfg);
    auto ck = loader::Checkpoint::open(dir);
    ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
    ckpt_ = new loader::Checkpoint(std::move(ck).value());
    source_ = new loader::CheckpointSource(*ckpt_);
    auto w = loader::bind_weights_v41(*config_, *source_);
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    ASSERT_TRUE(w->vision.has_value());
    weights_ = new loader::VisionWeights(*w->vision);
  }
  // 100 x 84 (area >= 7056, kept): grid 8 wide x 6 high, so the aligner pads one patch column.
  PreparedImage image() const {
    auto p = prepare_image(pattern(100, 84), config_->vision);
    EXPECT_TRUE(p.is_ok()) << p.status().to_string();
    return *p;
  }
  static loader::ModelConfig* config_;
  static loader::Checkpoint* ckpt_;
  static loader::CheckpointSource* source_;
  static loader::VisionWeights* weights_;
  ops::cpu::CpuOps ops_;
};
loader::ModelConfig* VisionEncoderTest::config_ = nullptr;
loader::Checkpoint* VisionEncoderTest::ckpt_ = nullptr;
loader::CheckpointSource* VisionEncoderTest::source_ = nullptr;
loader::VisionWeights* VisionEncoderTest::weights_ = nullptr;

TEST_F(VisionEncoderTest, SpanLayoutAndLearnedDelimiters) {
  VisionEncoder enc(*config_, *weights_, &ops_, Numerics::kOfficial);
  ASSERT_TRUE(enc.status().is_ok()) << enc.status().to_string();
  const PreparedImage img = image();
  ASSERT_EQ(img.layout.grid_w, 8);
  ASSERT_EQ(img.layout.grid_h, 6);
  auto e = enc.encode(img);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ(e->n_llm_w, 3);
  EXPECT_EQ(e->n_llm_h, 2);
  ASSERT_EQ(e->span_len, 2 * (3 + 1) + 2);
  ASSERT_EQ(e->dim, config_->hidden_size);
  ASSERT_EQ(e->rows.size(), static_cast<size_t>(e->span_len * e->dim));
  EXPECT_EQ(e->slots, span_tokens(2, 3));
  const std::vector<double> start = read_vec(weights_->image_start), nl = read_vec(weights_->image_newline),
                            end = read_vec(weights_->image_end);
  for (int64_t i = 0; i < e->span_len; ++i) {
    const std::vector<double>* want = e->slots[i] == SpanSlot::kStart     ? &start
                                      : e->slots[i] == SpanSlot::kNewline ? &nl
                                      : e->slots[i] == SpanSlot::kEnd     ? &end
                                                                          : nullptr;
    for (int64_t d = 0; d < e->dim; ++d) {
      ASSERT_TRUE(std::isfinite(e->row(i)[d])) << "row " << i << " dim " << d;
      if (want) {
        ASSERT_EQ(e->row(i)[d], (*want)[d]) << "delimiter row " << i << " dim " << d;
      }
    }
  }
  // Image rows are the aligner's (not a delimiter) and differ from one another.
  EXPECT_NE(e->row(1)[0], start[0]);
  EXPECT_NE(e->row(1)[0], e->row(2)[0]);
}

TEST_F(VisionEncoderTest, DeterministicAndNumericsChangeOnlyRounding) {
  VisionEncoder off(*config_, *weights_, &ops_, Numerics::kOfficial);
  VisionEncoder plain(*config_, *weights_, &ops_, Numerics::kPlain);
  const PreparedImage img = image();
  auto a = off.encode(img), b = off.encode(img), p = plain.encode(img);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && p.is_ok());
  EXPECT_EQ(a->rows, b->rows);
  ASSERT_EQ(a->rows.size(), p->rows.size());
  EXPECT_NE(a->rows, p->rows);  // BF16 activations under the official numerics
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < a->rows.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(a->rows[i] - p->rows[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(p->rows[i])));
  }
  EXPECT_LT(max_diff, 0.05 * max_abs) << "BF16 vs F32 activations";
  for (float v : a->rows) ASSERT_EQ(v, tensor::round_bf16(v)) << "official rows are BF16 values";
}

TEST_F(VisionEncoderTest, VitMatchesDoubleReference) {
  VisionEncoder enc(*config_, *weights_, &ops_, Numerics::kPlain);
  const PreparedImage img = image();
  auto vit = enc.run_vit(img);
  ASSERT_TRUE(vit.is_ok()) << vit.status().to_string();
  const std::vector<double> want = vit_ref(img, *config_, *weights_);
  ASSERT_EQ(vit->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR((*vit)[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << "patch " << i / 64 << " channel " << i % 64;
}

TEST_F(VisionEncoderTest, AlignerRowsMatchDoubleReference) {
  const int64_t Vd = config_->vision.hidden_size;
  for (Numerics n : {Numerics::kPlain, Numerics::kOfficial}) {
    VisionEncoder enc(*config_, *weights_, &ops_, n);
    const PreparedImage img = image();
    auto vit = enc.run_vit(img);
    auto e = enc.encode(img);
    ASSERT_TRUE(vit.is_ok() && e.is_ok());
    // Cell (1, 2): the bottom-right one, whose last column of patches is zero padding; cell (0, 1).
    for (auto [cy, cx] : {std::pair<int64_t, int64_t>{1, 2}, {0, 1}}) {
      const std::vector<double> want = aligner_row_ref(*vit, img.layout, cy, cx, *weights_, Vd);
      const int64_t pos = 1 + cy * (e->n_llm_w + 1) + cx;  // [START] then rows of n_llm_w + newline
      ASSERT_EQ(e->slots[pos], SpanSlot::kImage);
      double scale = 0;
      for (double v : want) scale = std::max(scale, std::fabs(v));
      // Plain: F32 rounding only. Official: the GELU input and output are rounded to BF16 too.
      const double tol = n == Numerics::kPlain ? 1e-5 * (1 + scale) : 2e-2 * scale;
      for (int64_t d = 0; d < e->dim; ++d)
        ASSERT_NEAR(e->row(pos)[d], want[d], tol) << "cell (" << cy << "," << cx << ") dim " << d;
    }
  }
}

TEST_F(VisionEncoderTest, PixelUnshuffleIsChannelMajorWithZeroPadding) {
  // grid 2 x 4 (the second cell column pads 2 patch columns), Vd 2, values 100 * patch + channel.
  std::vector<float> vit(2 * 4 * 2);
  for (int64_t p = 0; p < 8; ++p)
    for (int64_t c = 0; c < 2; ++c) vit[p * 2 + c] = static_cast<float>(100 * p + c);
  const std::vector<float> u = VisionEncoder::pixel_unshuffle(vit, 2, 4, 2, 3);
  ASSERT_EQ(u.size(), 2u * 18u);
  // cell 0: patches (0..1, 0..2); element c*9 + kh*3 + kw.
  EXPECT_EQ(u[0 * 9 + 0 * 3 + 1], 100.0f * 1);
  EXPECT_EQ(u[1 * 9 + 1 * 3 + 2], 100.0f * 6 + 1);
  EXPECT_EQ(u[0 * 9 + 2 * 3 + 0], 0.0f);  // row 2 is padding
  // cell 1: patch (0, 3) at kw 0; kw 1, 2 padding.
  EXPECT_EQ(u[18 + 1 * 9 + 0 * 3 + 0], 100.0f * 3 + 1);
  EXPECT_EQ(u[18 + 0 * 9 + 1 * 3 + 0], 100.0f * 7);
  EXPECT_EQ(u[18 + 0 * 9 + 0 * 3 + 1], 0.0f);
}

TEST_F(VisionEncoderTest, BadInputsAreErrors) {
  VisionEncoder enc(*config_, *weights_, &ops_, Numerics::kOfficial);
  PreparedImage img = image();
  img.patches.pop_back();
  auto r = enc.encode(img);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("patch values"), std::string::npos) << r.status().to_string();
  PreparedImage big = image();
  big.layout.n_llm_h = 1;  // inconsistent with the 6-row grid
  EXPECT_FALSE(enc.encode(big).is_ok());
  loader::ModelConfig no_vision = *config_;
  no_vision.vision = loader::VisionConfig{};
  VisionEncoder none(no_vision, *weights_, &ops_, Numerics::kOfficial);
  EXPECT_FALSE(none.status().is_ok());
  auto n = none.encode(image());
  ASSERT_FALSE(n.is_ok());
  EXPECT_NE(n.status().to_string().find("no vision tower"), std::string::npos) << n.status().to_string();
}

}  // namespace
}  // namespace deepinfer::vision
