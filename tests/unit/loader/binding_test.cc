// Weight binding against the inventory (missing/extra/dtype/shape/NaN-scale errors), exact FP8/FP4
// dequantisation against the generator's float masters, and generator determinism.
#include "loader/weight_binding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "base/file.h"
#include "loader/inventory.h"
#include "loader/synthetic.h"
#include "tensor/number_formats.h"
#include "test_models.h"

namespace deepinfer::loader {
namespace {

// A source that wraps the checkpoint and lets a test hide, add or alter tensors.
class EditedSource : public TensorSource {
 public:
  explicit EditedSource(const TensorSource& base) : base_(base) {}
  std::optional<TensorView> get(const std::string& name) const override {
    if (hidden_.count(name)) return std::nullopt;
    auto it = overrides_.find(name);
    if (it != overrides_.end()) return it->second;
    return base_.get(name);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& n : base_.names())
      if (!hidden_.count(n)) out.push_back(n);
    for (const auto& [n, v] : overrides_)
      if (!base_.get(n)) out.push_back(n);
    return out;
  }
  std::set<std::string> hidden_;
  std::map<std::string, TensorView> overrides_;

 private:
  const TensorSource& base_;
};

class BindingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::synthetic_model_dir("micro", 0);
    auto cfg = load_model_config(dir_);
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
    config_ = *cfg;
    auto ck = Checkpoint::open(dir_);
    ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
    ckpt_ = std::make_unique<Checkpoint>(std::move(ck).value());
    source_ = std::make_unique<CheckpointSource>(*ckpt_);
  }
  std::string dir_;
  ModelConfig config_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<CheckpointSource> source_;
};

TEST_F(BindingTest, BindsEveryTensorOfTheInventory) {
  auto w = bind_weights(config_, *source_);
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_EQ(static_cast<int64_t>(w->layers.size()), config_.num_hidden_layers);
  EXPECT_EQ(w->mtp.size(), 1u);
  EXPECT_TRUE(w->layers[2].attn.indexer.has_value());
  EXPECT_FALSE(w->layers[3].attn.indexer.has_value());
  EXPECT_TRUE(w->layers[3].attn.compressor.has_value());
  EXPECT_FALSE(w->layers[0].ffn.tid2eid.empty());
  EXPECT_TRUE(w->layers[3].ffn.tid2eid.empty());
  EXPECT_EQ(w->layers[0].attn.wq_a.format, tensor::WeightFormat::kFp8Block);
  EXPECT_EQ(w->layers[0].ffn.experts[0].w1.format, tensor::WeightFormat::kFp4Block);
  // tid2eid rows hold k distinct experts.
  const int64_t k = config_.num_experts_per_tok;
  const int64_t* t2e = w->layers[0].ffn.tid2eid.as<const int64_t>();
  for (int64_t t = 0; t < config_.vocab_size; ++t) {
    std::set<int64_t> s(t2e + t * k, t2e + t * k + k);
    ASSERT_EQ(static_cast<int64_t>(s.size()), k);
  }
}

TEST_F(BindingTest, MissingAndExtraTensorsAreListed) {
  EditedSource edited(*source_);
  edited.hidden_ = {"layers.1.attn.wkv.weight", "mtp.0.e_proj.scale"};
  auto r = bind_weights(config_, edited);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("layers.1.attn.wkv.weight"), std::string::npos);
  EXPECT_NE(r.status().message().find("mtp.0.e_proj.scale"), std::string::npos);
  EXPECT_NE(r.status().message().find("2 tensor(s)"), std::string::npos);

  EditedSource extra(*source_);
  static float dummy = 0;
  extra.overrides_["layers.9.attn.wkv.weight"] = TensorView::contiguous(&dummy, tensor::DType::kF32, {1});
  auto e = bind_weights(config_, extra);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("layers.9.attn.wkv.weight"), std::string::npos);
}

TEST_F(BindingTest, WrongDtypeShapeAndNanScalesAreErrors) {
  const std::string name = "layers.2.attn.wq_b.weight";
  TensorView v = *source_->get(name);
  EditedSource dt(*source_);
  TensorView bad = v;
  bad.dtype = tensor::DType::kI8;
  dt.overrides_[name] = bad;
  auto r1 = bind_weights(config_, dt);
  ASSERT_FALSE(r1.is_ok());
  EXPECT_NE(r1.status().message().find(name), std::string::npos);
  EXPECT_NE(r1.status().message().find("dtype I8"), std::string::npos);

  EditedSource sh(*source_);
  TensorView wrong = v.reshape({v.shape[0] / 2, v.shape[1] * 2});
  sh.overrides_[name] = wrong;
  auto r2 = bind_weights(config_, sh);
  ASSERT_FALSE(r2.is_ok());
  EXPECT_NE(r2.status().message().find("expected [512, 128]"), std::string::npos) << r2.status().message();

  const std::string scale = "layers.2.attn.wq_b.scale";
  TensorView s = *source_->get(scale);
  std::vector<uint8_t> copy(s.as<const uint8_t>(), s.as<const uint8_t>() + s.numel());
  copy[1] = 0xff;
  EditedSource nan(*source_);
  nan.overrides_[scale] = TensorView::contiguous(copy.data(), tensor::DType::kF8E8M0, {s.shape[0], s.shape[1]});
  auto r3 = bind_weights(config_, nan);
  ASSERT_FALSE(r3.is_ok());
  EXPECT_NE(r3.status().message().find("NaN"), std::string::npos);
}

// Dequantised values equal the generator's float masters quantised with the official recipe
// (§5.8): FP8 with a power-of-two scale per 128x128 block, FP4 per 1x32 block.
TEST_F(BindingTest, DequantisationMatchesTheFloatMasters) {
  auto w = bind_weights(config_, *source_);
  ASSERT_TRUE(w.is_ok());
  struct Case {
    std::string name;
    const tensor::LinearWeight* lw;
  };
  const std::vector<Case> cases = {{"layers.0.attn.wq_a.weight", &w->layers[0].attn.wq_a},
                                   {"layers.3.attn.wo_b.weight", &w->layers[3].attn.wo_b},
                                   {"layers.2.ffn.experts.5.w2.weight", &w->layers[2].ffn.experts[5].w2},
                                   {"layers.4.ffn.experts.0.w1.weight", &w->layers[4].ffn.experts[0].w1}};
  for (const Case& c : cases) {
    const tensor::LinearWeight& lw = *c.lw;
    const float stddev = 1.0f / std::sqrt(static_cast<float>(lw.in));
    const bool fp4 = lw.format == tensor::WeightFormat::kFp4Block;
    const float qmax = fp4 ? 6.0f : 448.0f;
    for (int64_t r = 0; r < lw.out; r += 7) {
      std::vector<float> row(static_cast<size_t>(lw.in));
      lw.dequantize_row(r, row.data());
      for (int64_t c0 = 0; c0 < lw.in; c0 += lw.block_in) {
        float amax = 0.0f;  // over the whole scale block
        for (int64_t br = (r / lw.block_out) * lw.block_out; br < std::min(lw.out, (r / lw.block_out + 1) * lw.block_out); ++br)
          for (int64_t bc = c0; bc < c0 + lw.block_in; ++bc)
            amax = std::max(amax, std::fabs(synthetic_master_value(0, c.name, br * lw.in + bc, stddev)));
        const float s = std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(amax / qmax))));
        EXPECT_EQ(lw.scale_at(r, c0), s) << c.name;
        for (int64_t col = c0; col < c0 + lw.block_in; ++col) {
          const float m = synthetic_master_value(0, c.name, r * lw.in + col, stddev);
          const float expect = (fp4 ? tensor::round_e2m1(m / s) : tensor::round_e4m3(m / s)) * s;
          ASSERT_EQ(row[col], expect) << c.name << " (" << r << ", " << col << ")";
          ASSERT_LE(std::fabs(row[col] - m), fp4 ? s : std::fabs(m) / 16 + std::ldexp(s, -9)) << c.name;
        }
      }
    }
  }
}

TEST(SyntheticTest, GeneratorIsDeterministicAndSeeded) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "di_gen_test";
  fs::remove_all(root);
  ModelConfig c = micro_config();
  c.vocab_size = 256;  // keep it quick
  SyntheticOptions o;
  ASSERT_TRUE(write_synthetic_checkpoint(c, (root / "a").string(), o).is_ok());
  ASSERT_TRUE(write_synthetic_checkpoint(c, (root / "b").string(), o).is_ok());
  o.seed = 1;
  ASSERT_TRUE(write_synthetic_checkpoint(c, (root / "c").string(), o).is_ok());
  int n_files = 0;
  for (const auto& e : fs::directory_iterator(root / "a")) {
    if (!e.is_regular_file()) continue;
    ++n_files;
    const std::string name = e.path().filename().string();
    EXPECT_EQ(*read_file(e.path().string()), *read_file((root / "b" / name).string())) << name;
    if (name.find(".safetensors") != std::string::npos && name.find("index") == std::string::npos) {
      EXPECT_NE(*read_file(e.path().string()), *read_file((root / "c" / name).string())) << name;
    }
  }
  EXPECT_EQ(n_files, 7);  // 3 shards, index, config.json, generation_config.json, provenance
  auto ck = Checkpoint::open((root / "a").string());
  ASSERT_TRUE(ck.is_ok());
  size_t n_expected = 0;
  for (const ParamSpec& p : param_inventory(c)) n_expected += file_tensors(p).size();
  EXPECT_EQ(ck->tensor_names().size(), n_expected);
}

TEST(InventoryTest, TinyConfigHasTheSpecTensorCount) {
  // model_v4_flash.md §10.3: 1,057 tensors for tiny-v4f.
  size_t n = 0;
  for (const ParamSpec& p : param_inventory(tiny_v4_flash_config())) n += file_tensors(p).size();
  EXPECT_EQ(n, 1057u);
}

}  // namespace
}  // namespace deepinfer::loader
