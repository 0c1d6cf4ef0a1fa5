// Image spans in ModelV41 (model_v41_flash.md §4, §6, §8) on the CPU reference, with the span rows'
// embeddings given (ForwardBatch::image_rows / image_embeds; the vision encoder that produces them
// is tested on its own). tiny-v41 (image token 510, Engram at layers 1 and 4):
//   * bias_vl: with Engram off, image rows I under the checkpoint's biases give, bit for bit, what
//     the complement rows flagged as image give under swapped biases (bias <-> bias_vl) — and not
//     what the complement gives unswapped. The rows' embeddings are the table's own rows, so only
//     the selection bias tells the two flags apart.
//   * Engram gate 0: a span at the start of a sequence (it attends only to itself) leaves every
//     layer's span rows unchanged when the Engram layers are removed; the text rows change.
//   * DEAD: exact prefill in chunks that split the span, with other token ids inside the span,
//     equals one shot bit for bit (the span's ids never reach an n-gram: blocked in the step and,
//     for later chunks, in the slot's history), and the span's flags are what make the
//     difference (flags dropped: other logits).
//   * Bad image rows are refused with errors that name them.
#include <memory>
#include <numeric>

#include "loader/engram_layout.h"
#include "loader/weight_binding.h"
#include "loader/weights_v41.h"
#include "model/v41/model_v41.h"
#include "model_v41_test_util.h"

namespace deepinfer {
namespace {

using testing::SeqChunk;

constexpr int32_t kImageToken = 510;

class V41ImageTest : public ::testing::TestWithParam<model::Numerics> {
 protected:
  void SetUp() override {
    lm_ = testing::load_v41(GetParam());
    ASSERT_NE(lm_, nullptr);
    ASSERT_EQ(lm_->config.image_token_id, kImageToken);
  }
  // tiny-v41 on the loaded model's ops with its weights edited by `edit`.
  std::unique_ptr<model::ModelV41> variant(const std::function<void(loader::ModelWeightsV41&)>& edit) {
    loader::CheckpointSource source(*lm_->checkpoint);
    auto weights = loader::bind_weights_v41(lm_->config, source);
    EXPECT_TRUE(weights.is_ok()) << weights.status().to_string();
    auto engram = loader::load_engram_sidecar(lm_->config, lm_->dir);
    EXPECT_TRUE(engram.is_ok()) << engram.status().to_string();
    if (!weights.is_ok() || !engram.is_ok()) return nullptr;
    edit(*weights);
    return std::make_unique<model::ModelV41>(lm_->config, std::move(weights).value(), std::move(engram).value(),
                                             lm_->ops.get(), lm_->model->options());
  }
  // The embedding table's rows of `ids` in F32 [n, D]: what the token embedding would give.
  std::vector<float> table_rows(const std::vector<int32_t>& ids) {
    const int64_t n = static_cast<int64_t>(ids.size()), D = lm_->config.hidden_size;
    loader::CheckpointSource source(*lm_->checkpoint);
    auto weights = loader::bind_weights_v41(lm_->config, source);
    EXPECT_TRUE(weights.is_ok());
    std::vector<float> out(static_cast<size_t>(n * D));
    ops::Ops& ops = *lm_->ops;
    ops.begin_step();
    tensor::TensorView rows = ops.alloc(tensor::DType::kF32, {n, D});
    ops.gather_rows(weights->embed, ids, rows);
    ops.copy(rows, tensor::TensorView::contiguous(out.data(), tensor::DType::kF32, {n, D}));
    return out;
  }
  // One forward of `ids` from position 0 with the rows `image` flagged (embeddings from `embeds`,
  // [ids.size(), D], taken at the flagged rows); logits of every row, or the capture.
  std::vector<std::vector<float>> run(model::LanguageModel& m, const std::vector<int32_t>& ids,
                                      const std::vector<int32_t>& image, const std::vector<float>& embeds,
                                      model::Capture* capture = nullptr) {
    const int32_t n = static_cast<int32_t>(ids.size());
    auto state = testing::make_v41_state(*lm_, 1, 8);
    std::vector<int32_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    model::ForwardBatch b = testing::make_batch({{0, ids, 0, testing::iota_blocks(0, n / 16 + 1), 0, 0, all}});
    b.n_prompt = {n};
    set_images(b, image, embeds, 0);
    auto r = m.forward(b, state, capture);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? testing::logits_of(*r) : std::vector<std::vector<float>>{};
  }
  // Flags the rows of `image` that fall in [begin, begin + batch rows) (as rows relative to begin).
  void set_images(model::ForwardBatch& b, const std::vector<int32_t>& image, const std::vector<float>& embeds,
                  int32_t begin) {
    const int64_t D = lm_->config.hidden_size, T = static_cast<int64_t>(b.token_ids.size());
    for (int32_t r : image) {
      if (r < begin || r >= begin + T) continue;
      b.image_rows.push_back(r - begin);
      b.image_embeds.insert(b.image_embeds.end(), embeds.begin() + r * D, embeds.begin() + (r + 1) * D);
    }
  }
  std::unique_ptr<engine::LoadedModel> lm_;
};

std::vector<int32_t> complement(const std::vector<int32_t>& rows, int32_t n) {
  std::vector<int32_t> out;
  for (int32_t r = 0; r < n; ++r)
    if (std::find(rows.begin(), rows.end(), r) == rows.end()) out.push_back(r);
  return out;
}

TEST_P(V41ImageTest, ImageRowsSelectExpertsWithBiasVl) {
  auto no_engram = [](loader::ModelWeightsV41& w) {
    for (auto& l : w.layers) l.engram.reset();
  };
  auto orig = variant(no_engram);
  auto swapped = variant([&](loader::ModelWeightsV41& w) {
    no_engram(w);
    for (auto& l : w.layers) std::swap(l.ffn.bias, l.ffn.bias_vl);
  });
  ASSERT_TRUE(orig && swapped);
  const auto ids = testing::random_ids(48, 31, 500);
  const auto embeds = table_rows(ids);
  std::vector<int32_t> image(9);
  std::iota(image.begin(), image.end(), 6);
  for (int32_t r = 30; r < 36; ++r) image.push_back(r);
  const auto other = complement(image, 48);
  const auto a = run(*orig, ids, image, embeds);
  ASSERT_EQ(a.size(), 48u);
  EXPECT_EQ(run(*swapped, ids, other, embeds), a);
  EXPECT_NE(run(*orig, ids, other, embeds), a) << "bias_vl made no difference: the test cannot tell the flags apart";
}

TEST_P(V41ImageTest, EngramGatesImageRowsToZero) {
  auto without = variant([](loader::ModelWeightsV41& w) {
    for (auto& l : w.layers) l.engram.reset();
  });
  ASSERT_NE(without, nullptr);
  const int32_t span = 11;
  auto ids = testing::random_ids(40, 32, 500);
  std::fill(ids.begin(), ids.begin() + span, kImageToken);
  std::vector<int32_t> image(static_cast<size_t>(span));
  std::iota(image.begin(), image.end(), 0);
  const auto embeds = table_rows(testing::random_ids(40, 33, 500));  // any rows: the encoder's
  model::Capture with_engram, without_engram;
  run(*lm_->model, ids, image, embeds, &with_engram);
  run(*without, ids, image, embeds, &without_engram);
  const int64_t width = lm_->config.hc_mult * lm_->config.hidden_size;
  ASSERT_EQ(with_engram.after_layer.size(), without_engram.after_layer.size());
  for (size_t l = 0; l < with_engram.after_layer.size(); ++l) {
    const auto& a = with_engram.after_layer[l];
    const auto& b = without_engram.after_layer[l];
    const int64_t T = static_cast<int64_t>(a.size()) / width;
    if (T < static_cast<int64_t>(ids.size())) continue;  // a CED decoder layer over a kept tail
    EXPECT_TRUE(std::equal(a.begin(), a.begin() + span * width, b.begin())) << "span rows after layer " << l;
    if (l >= 1) {
      EXPECT_FALSE(std::equal(a.begin() + span * width, a.end(), b.begin() + span * width)) << "layer " << l;
    }
  }
}

TEST_P(V41ImageTest, SpanIdsAreDeadInTheStepAndInTheHistory) {
  auto ids = testing::random_ids(64, 34, 500);
  std::vector<int32_t> image;
  for (int32_t r = 5; r < 19; ++r) {
    ids[static_cast<size_t>(r)] = kImageToken;
    image.push_back(r);
  }
  const auto embeds = table_rows(testing::random_ids(64, 35, 500));
  const auto one = run(*lm_->model, ids, image, embeds);
  ASSERT_EQ(one.size(), 64u);
  // The chunked runs carry other ids inside the span: DEAD rows make the span's ids irrelevant (its
  // embeddings are given, its n-grams blocked — in the step and, for later chunks, in the history).
  auto other_ids = ids;
  const auto noise = testing::random_ids(64, 37, 500);
  for (int32_t r : image) other_ids[static_cast<size_t>(r)] = noise[static_cast<size_t>(r)];
  for (int32_t chunk : {1, 7, 16, 64}) {
    auto state = testing::make_v41_state(*lm_, 1, 8);
    std::vector<std::vector<float>> chunked;
    for (int32_t begin = 0; begin < 64; begin += chunk) {
      const int32_t end = std::min(64, begin + chunk);
      std::vector<int32_t> rows(static_cast<size_t>(end - begin));
      std::iota(rows.begin(), rows.end(), 0);
      model::ForwardBatch b = testing::make_batch(
          {{0, {other_ids.begin() + begin, other_ids.begin() + end}, begin, testing::iota_blocks(0, 5), 0, 0, rows}});
      b.n_prompt = {64};
      set_images(b, image, embeds, begin);
      auto r = lm_->model->forward(b, state);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      for (auto& row : testing::logits_of(*r)) chunked.push_back(std::move(row));
    }
    EXPECT_EQ(chunked, one) << "chunk " << chunk;
  }
  EXPECT_NE(run(*lm_->model, ids, {}, embeds), one) << "the span's flags made no difference";
}

TEST_P(V41ImageTest, BadImageRowsAreRefused) {
  const auto ids = testing::random_ids(8, 36, 500);
  auto state = testing::make_v41_state(*lm_, 1, 2);
  auto forward = [&](std::vector<int32_t> rows, size_t n_values) {
    model::ForwardBatch b = testing::make_batch({{0, ids, 0, testing::iota_blocks(0, 1), 0, 0, {7}}});
    b.image_rows = std::move(rows);
    b.image_embeds.assign(n_values, 0.5f);
    return lm_->model->forward(b, state).status().to_string();
  };
  const size_t D = static_cast<size_t>(lm_->config.hidden_size);
  EXPECT_NE(forward({3, 2}, 2 * D).find("image_rows"), std::string::npos);
  EXPECT_NE(forward({8}, D).find("image_rows"), std::string::npos);
  EXPECT_NE(forward({1, 2}, D).find("image_embeds"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Numerics, V41ImageTest, ::testing::Values(model::Numerics::kOfficial, model::Numerics::kPlain),
                         [](const auto& info) { return info.param == model::Numerics::kPlain ? "Plain" : "Official"; });

}  // namespace
}  // namespace deepinfer
