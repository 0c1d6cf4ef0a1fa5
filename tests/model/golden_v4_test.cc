// Whole-model golden test: our CPU reference (plain dequantised F32 math) against HF transformers'
// DeepseekV4ForCausalLM on the tiny synthetic V4-Flash (tests/fixtures/golden_v4/README.md says how
// the fixtures were produced). Tolerances: logits within kLogitTol absolute at every position of
// every prompt, hidden states within kHiddenTol relative, 100% top-1 agreement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/loaded_model.h"
#include "loader/safetensors.h"
#include "model_test_util.h"
#include "test_models.h"

namespace deepinfer {
namespace {

constexpr float kLogitTol = 2e-3f;   // observed max ~1e-4 (F32 summation order only)
constexpr float kHiddenTol = 1e-4f;  // relative to the row's max |value|

struct Golden {
  loader::SafetensorsFile file;
  template <typename T>
  std::vector<T> get(const std::string& name, std::vector<int64_t>* shape = nullptr) const {
    const loader::TensorInfo* info = file.find(name);
    EXPECT_NE(info, nullptr) << name;
    if (info == nullptr) return {};
    if (shape) *shape = info->shape;
    const T* p = reinterpret_cast<const T*>(file.data(*info));
    return std::vector<T>(p, p + info->numel());
  }
};

Golden load_golden() {
  auto f = loader::SafetensorsFile::open(testing::fixture_path("golden_v4/golden.safetensors"));
  EXPECT_TRUE(f.is_ok()) << f.status().to_string();
  return Golden{std::move(f).value()};
}

class GoldenV4Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::synthetic_model_dir("tiny-v4f", 0));
  }
  static std::string* dir_;
};
std::string* GoldenV4Test::dir_ = nullptr;

TEST_F(GoldenV4Test, GeneratorBytesMatchTheCheckpointTransformersRead) {
  // The device run recorded SHA-256 of the shards it generated with the same generator and seed:
  // the bytes are identical across machines, so the golden applies to the local checkpoint.
  std::ifstream in(testing::fixture_path("golden_v4/golden.json"));
  const auto meta = nlohmann::json::parse(in);
  for (const auto& [shard, sha] : meta["checkpoint_sha256"].items()) {
    const std::string out = testing::run_command("sha256sum '" + *dir_ + "/" + shard + "'");
    EXPECT_EQ(out.substr(0, 64), sha.get<std::string>()) << shard;
  }
  EXPECT_EQ(meta["load_path"], "FineGrainedFP8Config(dequantize=True), cpu");
  for (const auto& [name, cmp] : meta["weight_compare"].items()) EXPECT_TRUE(cmp["bitwise_equal"].get<bool>()) << name;
}

TEST_F(GoldenV4Test, LogitsMatchTransformersAtEveryPosition) {
  const Golden g = load_golden();
  auto lm = engine::load_model(*dir_, engine::LoadOptions{model::Numerics::kPlain, "cpu"});
  ASSERT_TRUE(lm.is_ok()) << lm.status().to_string();
  float worst = 0.0f, worst_lse = 0.0f;
  for (const std::string p : {"p0", "p1", "p2"}) {
    const auto ids = g.get<int32_t>(p + ".ids");
    std::vector<int64_t> tshape;
    const auto top_ids = g.get<int32_t>(p + ".topk_ids", &tshape);
    const auto top_logits = g.get<float>(p + ".topk_logits");
    const auto lse = g.get<float>(p + ".lse");
    const int64_t n = static_cast<int64_t>(ids.size()), K = tshape[1], V = (*lm)->config.vocab_size;
    model::KvStateOptions so{1, static_cast<int32_t>(n / 256 + 1), 256, tensor::DType::kF32};
    model::KvState state((*lm)->config, so, (*lm)->ops.get());
    state.reset_slot(0);
    model::ForwardBatch b;
    b.token_ids = ids;
    for (int64_t i = 0; i < n; ++i) b.positions.push_back(static_cast<int32_t>(i)), b.logit_rows.push_back(static_cast<int32_t>(i));
    b.seqs.push_back({0, 0, static_cast<int32_t>(n), 0, 0, 0});
    b.max_blocks = so.n_blocks;
    for (int32_t k = 0; k < so.n_blocks; ++k) b.block_tables.push_back(k);
    auto r = (*lm)->model->forward(b, state);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const float* logits = r->logits.as<const float>();
    int agree = 0;
    for (int64_t t = 0; t < n; ++t) {
      const float* row = logits + t * V;
      const int64_t argmax = std::max_element(row, row + V) - row;
      agree += argmax == top_ids[t * K];
      for (int64_t k = 0; k < K; ++k) worst = std::max(worst, std::fabs(row[top_ids[t * K + k]] - top_logits[t * K + k]));
      double mx = *std::max_element(row, row + V), den = 0.0;
      for (int64_t v = 0; v < V; ++v) den += std::exp(static_cast<double>(row[v]) - mx);
      worst_lse = std::max(worst_lse, static_cast<float>(std::fabs(mx + std::log(den) - lse[t])));
    }
    EXPECT_EQ(agree, n) << p << ": top-1 agreement " << agree << "/" << n;
    const auto full_pos = g.get<int32_t>(p + ".full_positions");
    const auto full = g.get<float>(p + ".full_logits");
    for (size_t i = 0; i < full_pos.size(); ++i) {
      for (int64_t v = 0; v < V; ++v) worst = std::max(worst, std::fabs(logits[full_pos[i] * V + v] - full[i * V + v]));
    }
  }
  std::printf("golden: max |logit error| %.3g, max |lse error| %.3g\n", worst, worst_lse);
  EXPECT_LT(worst, kLogitTol);
  EXPECT_LT(worst_lse, kLogitTol);
}

TEST_F(GoldenV4Test, HiddenStatesMatchTransformersAfterEveryLayer) {
  const Golden g = load_golden();
  auto lm = engine::load_model(*dir_, engine::LoadOptions{model::Numerics::kPlain, "cpu"});
  ASSERT_TRUE(lm.is_ok()) << lm.status().to_string();
  const auto ids = g.get<int32_t>("p0.ids");
  const auto positions = g.get<int32_t>("p0.hidden_positions");
  const auto hidden = g.get<float>("p0.hidden");  // [layers, n_positions, hc, D]
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t row = (*lm)->config.hc_mult * (*lm)->config.hidden_size;
  model::KvStateOptions so{1, static_cast<int32_t>(n / 256 + 1), 256, tensor::DType::kF32};
  model::KvState state((*lm)->config, so, (*lm)->ops.get());
  state.reset_slot(0);
  model::ForwardBatch b;
  b.token_ids = ids;
  for (int64_t i = 0; i < n; ++i) b.positions.push_back(static_cast<int32_t>(i));
  b.seqs.push_back({0, 0, static_cast<int32_t>(n), 0, 0, 0});
  b.max_blocks = so.n_blocks;
  for (int32_t k = 0; k < so.n_blocks; ++k) b.block_tables.push_back(k);
  model::Capture capture;
  ASSERT_TRUE((*lm)->model->forward(b, state, &capture).is_ok());
  ASSERT_EQ(static_cast<int64_t>(capture.after_layer.size()), (*lm)->config.num_hidden_layers);
  testing::expect_hidden_states_match(capture, hidden, positions, row, kHiddenTol, "golden v4");
}

}  // namespace
}  // namespace deepinfer
