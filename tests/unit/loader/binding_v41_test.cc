// V4.1 checkpoint binding (model_v41_flash.md §9) on the generated tiny-v41 checkpoint: every
// tensor by its official name with 32x32 UE8M0 dense scales, UE8M0-per-32 FP4 experts and Engram
// rows, bias_vl, DSpark heads and vision tensors; exact dequantisation against the generator's
// masters; binding errors; generator determinism.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "base/file.h"
#include "loader/checkpoint.h"
#include "loader/engram_layout.h"
#include "loader/inventory.h"
#include "loader/synthetic.h"
#include "loader/weights_v41.h"
#include "tensor/number_formats.h"
#include "test_models.h"

namespace deepinfer::loader {
namespace {

class HidingSource : public TensorSource {
 public:
  HidingSource(const TensorSource& base, std::string hidden) : base_(base), hidden_(std::move(hidden)) {}
  std::optional<TensorView> get(const std::string& name) const override {
    return name == hidden_ ? std::nullopt : base_.get(name);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& n : base_.names())
      if (n != hidden_) out.push_back(n);
    return out;
  }

 private:
  const TensorSource& base_;
  std::string hidden_;
};

class BindingV41Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new std::string(testing::synthetic_model_dir("tiny-v41", 0)); }
  void SetUp() override {
    auto cfg = load_model_config(*dir_);
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
    config_ = *cfg;
    auto ck = Checkpoint::open(*dir_);
    ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
    ckpt_ = std::make_unique<Checkpoint>(std::move(ck).value());
    source_ = std::make_unique<CheckpointSource>(*ckpt_);
  }
  static std::string* dir_;
  ModelConfig config_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<CheckpointSource> source_;
};
std::string* BindingV41Test::dir_ = nullptr;

std::vector<int64_t> shape_of(const TensorView& v) { return std::vector<int64_t>(v.shape.begin(), v.shape.begin() + v.rank); }

TEST_F(BindingV41Test, BindsEveryTensorWithItsScaleGrid) {
  EXPECT_EQ(config_.family, ModelFamily::kV41);
  auto w = bind_weights_v41(config_, *source_);
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  ASSERT_EQ(w->layers.size(), 12u);
  ASSERT_EQ(w->dspark.size(), 3u);
  // 32 x 32 blocks: wq_a [64, 128] -> scale [2, 4]; wo_a [64, 128] -> [2, 4]; wq_b [256, 64] -> [8, 2].
  const auto& a0 = w->layers[0].attn;
  EXPECT_EQ(a0.wq_a.block_out, 32);
  EXPECT_EQ(a0.wq_a.block_in, 32);
  EXPECT_EQ(shape_of(a0.wq_a.scale), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(shape_of(a0.wq_b.scale), (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(a0.wq_a.scale.dtype, tensor::DType::kF8E8M0);
  // FP4 experts: w1 [64, 128] packed [64, 64] with [64, 4] scales; w2 [128, 64] -> [128, 32] / [128, 2].
  const auto& e0 = w->layers[0].ffn.experts[0];
  EXPECT_EQ(e0.w1.format, tensor::WeightFormat::kFp4Block);
  EXPECT_EQ(shape_of(e0.w1.weight), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shape_of(e0.w1.scale), (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(shape_of(e0.w2.scale), (std::vector<int64_t>{128, 2}));
  // CSA2 roles decide which tensors exist.
  EXPECT_FALSE(a0.compressor.has_value());
  EXPECT_TRUE(w->layers[2].attn.compressor->wgate.weight.data != nullptr);
  EXPECT_TRUE(w->layers[6].attn.compressor->wgate.empty());  // ratio 1: no gate
  EXPECT_TRUE(w->layers[6].attn.index_keys.has_value());
  EXPECT_FALSE(w->layers[3].attn.indexer.has_value());
  EXPECT_TRUE(w->layers[8].attn.indexer.has_value());
  EXPECT_FALSE(w->layers[8].attn.index_keys.has_value());
  EXPECT_EQ(shape_of(w->layers[2].attn.index_keys->wk.weight), (std::vector<int64_t>{32, 64}));
  // Router biases for text and image tokens.
  EXPECT_EQ(shape_of(w->layers[0].ffn.bias_vl), (std::vector<int64_t>{8}));
  EXPECT_EQ(w->dspark[0].block.ffn.experts.size(), 4u);
  EXPECT_EQ(shape_of(w->dspark[0].block.ffn.bias_vl), (std::vector<int64_t>{4}));
  // Engram at layers 1 and 4: FP8 rows with one UE8M0 scale per 32 values.
  ASSERT_TRUE(w->layers[1].engram.has_value());
  ASSERT_TRUE(w->layers[4].engram.has_value());
  EXPECT_FALSE(w->layers[2].engram.has_value());
  EXPECT_EQ(shape_of(w->layers[4].engram->table.weight), (std::vector<int64_t>{864, 32}));
  EXPECT_EQ(shape_of(w->layers[4].engram->table.scale), (std::vector<int64_t>{864, 1}));
  EXPECT_EQ(shape_of(w->layers[1].engram->wkv.weight), (std::vector<int64_t>{640, 192}));
  EXPECT_EQ(shape_of(w->layers[1].engram->wkv.scale), (std::vector<int64_t>{20, 6}));
  // DSpark: main_proj on stage 0, Markov and confidence heads on the last stage.
  EXPECT_EQ(shape_of(w->dspark[0].main_proj.weight), (std::vector<int64_t>{128, 384}));
  EXPECT_TRUE(w->dspark[1].main_proj.empty());
  EXPECT_EQ(shape_of(w->dspark[2].markov_embed), (std::vector<int64_t>{512, 16}));
  EXPECT_EQ(shape_of(w->dspark[2].confidence_proj.weight), (std::vector<int64_t>{1, 144}));
  // Vision tower, aligner and image delimiters.
  ASSERT_TRUE(w->vision.has_value());
  EXPECT_EQ(w->vision->blocks.size(), 2u);
  EXPECT_EQ(shape_of(w->vision->patch_embed.weight), (std::vector<int64_t>{64, 588}));
  EXPECT_EQ(shape_of(w->vision->aligner_w1.weight), (std::vector<int64_t>{128, 576}));
  EXPECT_EQ(shape_of(w->vision->image_newline), (std::vector<int64_t>{128}));
}

TEST_F(BindingV41Test, DequantisedWeightsEqualTheQuantisedMasters) {
  auto w = bind_weights_v41(config_, *source_);
  ASSERT_TRUE(w.is_ok());
  // FP8 32x32: each element is the RNE E4M3 of master / 2^k with k from its own 32x32 block amax.
  const LinearWeight& wq = w->layers[3].attn.wq_b;
  for (int64_t r : {0, 31, 32, 255}) {
    for (int64_t c : {0, 31, 32, 63}) {
      float amax = 0.0f;
      for (int64_t rr = r / 32 * 32; rr < r / 32 * 32 + 32; ++rr)
        for (int64_t cc = c / 32 * 32; cc < c / 32 * 32 + 32; ++cc)
          amax = std::max(amax, std::fabs(synthetic_master_value(0, "layers.3.attn.wq_b.weight", rr * 64 + cc,
                                                                 1.0f / 8.0f)));
      const int k = tensor::pow2_scale_exponent(amax, 448.0f);
      const float m = synthetic_master_value(0, "layers.3.attn.wq_b.weight", r * 64 + c, 1.0f / 8.0f);
      EXPECT_EQ(wq.element(r, c), tensor::round_e4m3(std::ldexp(m, -k)) * std::ldexp(1.0f, k)) << r << "," << c;
    }
  }
  // Engram table rows: per-row blocks of 32 (one block per row in the tiny model).
  const LinearWeight& table = w->layers[1].engram->table;
  for (int64_t r : {0, 100, 659}) {
    float amax = 0.0f;
    for (int64_t c = 0; c < 32; ++c) amax = std::max(amax, std::fabs(synthetic_master_value(0, "layers.1.engram.embed.weight", r * 32 + c, 1.0f)));
    const int k = tensor::pow2_scale_exponent(amax, 448.0f);
    const float m = synthetic_master_value(0, "layers.1.engram.embed.weight", r * 32 + 5, 1.0f);
    EXPECT_EQ(table.element(r, 5), tensor::round_e4m3(std::ldexp(m, -k)) * std::ldexp(1.0f, k)) << r;
  }
}

TEST_F(BindingV41Test, MissingTensorAndWrongBlockGridAreErrors) {
  HidingSource hidden(*source_, "layers.2.attn.indexer.wk.weight");
  auto w = bind_weights_v41(config_, hidden);
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("layers.2.attn.indexer.wk.weight"), std::string::npos) << w.status().message();
  // Reading the 32x32 files with V4's 128x128 assumption rescales nothing silently: it fails.
  ModelConfig v4_grid = config_;
  v4_grid.quant.block_out = v4_grid.quant.block_in = 128;
  auto g = bind_weights_v41(v4_grid, *source_);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find(".scale"), std::string::npos) << g.status().message();
  // The V4 binder refuses V4.1 configs instead of mis-binding them.
  EXPECT_FALSE(bind_weights(config_, *source_).is_ok());
}

TEST_F(BindingV41Test, GeneratorIsDeterministicAndSeedDependent) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("di_v41_gen_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  SyntheticOptions o;
  o.seed = 0;
  o.layers_per_shard = 4;  // a different sharding must not change any tensor's bytes
  ASSERT_TRUE(write_synthetic_checkpoint(config_, (tmp / "a").string(), o).is_ok());
  o.seed = 1;
  ASSERT_TRUE(write_synthetic_checkpoint(config_, (tmp / "b").string(), o).is_ok());
  auto a = Checkpoint::open((tmp / "a").string());
  auto b = Checkpoint::open((tmp / "b").string());
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  int n_equal = 0, n_diff = 0;
  for (const std::string& name : ckpt_->tensor_names()) {
    auto ref = ckpt_->find(name), ta = a->find(name), tb = b->find(name);
    ASSERT_TRUE(ref && ta && tb) << name;
    const size_t n = ref->info->nbytes();
    EXPECT_EQ(std::memcmp(ref->data, ta->data, n), 0) << name;
    (std::memcmp(ref->data, tb->data, n) == 0 ? n_equal : n_diff) += 1;
  }
  EXPECT_GT(n_diff, 1000);  // every random tensor changes with the seed
  EXPECT_TRUE(file_exists((tmp / "a" / kEngramSidecarFile).string()));
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace deepinfer::loader
