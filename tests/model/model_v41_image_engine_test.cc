// The engine's image plumbing on tiny-v41 (Request::images, engine/image_inputs.h) with a stand-in
// encoder (spans of their own length and rows, DebugOptions::image_encoder; the real vision tower
// is tested on its own): a placeholder becomes its span, the span's rows reach the model in every
// prefill chunk that covers them (the first token and its logprob are the model's own forward
// over the expanded prompt with those rows; chunked = one shot), the prefix cache shares a prompt's blocks
// only between requests with the same images, and bad image requests are refused by name. Then a
// PNG through tiny-v41's own vision tower end to end.
#include <cmath>
#include <cstring>
#include <future>
#include <numeric>

#include "deepinfer/engine.h"
#include "engine/engine_debug.h"
#include "engine/image_inputs.h"
#include "model_v41_test_util.h"
#include "test_png.h"
#include "vision/preprocess.h"

namespace deepinfer {
namespace {

constexpr int32_t kImageToken = 510;

// Rows from the bytes: a span of 5 + size % 4 rows, values a function of the bytes.
class StandInEncoder final : public engine::ImageEncoder {
 public:
  explicit StandInEncoder(int64_t hidden) : hidden_(hidden) {}
  int64_t hidden() const override { return hidden_; }
  Result<engine::EncodedImage> encode(std::string_view bytes) const override {
    if (bytes.empty()) return invalid_argument("empty image");
    engine::EncodedImage out;
    out.n_rows = 5 + static_cast<int32_t>(bytes.size() % 4);
    float seed = 0.0f;
    for (char c : bytes) seed = seed * 0.9f + static_cast<float>(static_cast<unsigned char>(c));
    out.rows.resize(static_cast<size_t>(out.n_rows * hidden_));
    for (size_t i = 0; i < out.rows.size(); ++i) out.rows[i] = 0.04f * std::sin(seed + 0.71f * static_cast<float>(i));
    return out;
  }

 private:
  int64_t hidden_;
};

EngineOptions options(int32_t chunk) {
  EngineOptions o;
  o.model = testing::synthetic_model_dir("tiny-v41");
  o.block_tokens = 16;
  o.kv_blocks = 96;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = chunk;
  o.yoco_prefill_mode = "none";  // exact prefill: chunking never changes a token
  return o;
}

std::unique_ptr<Engine> open(int32_t chunk, std::shared_ptr<const engine::ImageEncoder> encoder) {
  engine::DebugOptions debug;
  debug.check_integrity_every_step = true;
  debug.image_encoder = std::move(encoder);
  auto e = engine::open_engine(options(chunk), debug);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

std::vector<int32_t> prompt_with_image() {
  auto ids = testing::random_ids(40, 41, 500);
  ids[12] = kImageToken;
  return ids;
}

Request request(std::vector<int32_t> prompt, std::vector<std::string> images, int32_t max_tokens) {
  Request r;
  r.prompt_ids = std::move(prompt);
  for (auto& bytes : images) r.images.push_back(ImageInput{std::move(bytes)});
  r.sampling.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  return r;
}

class V41ImageEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lm_ = testing::load_v41(model::Numerics::kOfficial);
    ASSERT_NE(lm_, nullptr);
    encoder_ = std::make_shared<StandInEncoder>(lm_->config.hidden_size);
  }
  std::unique_ptr<engine::LoadedModel> lm_;
  std::shared_ptr<StandInEncoder> encoder_;
};

TEST_F(V41ImageEngineTest, SpanRowsReachTheModelInEveryChunk) {
  // The model's own forward over the expanded prompt with the span's rows.
  auto expanded = prompt_with_image();
  auto spans = engine::expand_images(&expanded, {ImageInput{"a picture"}}, kImageToken, encoder_.get());
  ASSERT_TRUE(spans.is_ok()) << spans.status().to_string();
  const int32_t n = static_cast<int32_t>(expanded.size());
  ASSERT_EQ(n, 40 - 1 + 5 + 9 % 4);
  auto state = testing::make_v41_state(*lm_, 1, 8);
  model::ForwardBatch b = testing::make_batch({{0, expanded, 0, testing::iota_blocks(0, n / 16 + 1), 0, 0, {n - 1}}});
  b.n_prompt = {n};
  (*spans)->collect(0, n, 0, &b.image_rows, &b.image_embeds);
  ASSERT_EQ(b.image_rows.size(), 6u);
  auto r = lm_->model->forward(b, state);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto logits = testing::logits_of(*r);
  const auto want = static_cast<int32_t>(testing::argmax(logits.back()));
  // The first token's logprob under the model's own logits (the engine reports raw logprobs).
  double z = 0.0;
  for (float v : logits.back()) z += std::exp(static_cast<double>(v) - logits.back()[static_cast<size_t>(want)]);
  const double want_logprob = -std::log(z);
  std::vector<std::vector<int32_t>> runs;
  for (int32_t chunk : {64, 7}) {  // one prefill step; chunks of 7 that split the span
    auto e = open(chunk, encoder_);
    ASSERT_NE(e, nullptr);
    Request r = request(prompt_with_image(), {"a picture"}, 6);
    r.sampling.logprobs = 0;
    auto outs = e->generate({std::move(r)});
    ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
    EXPECT_EQ((*outs)[0].prompt_ids, prompt_with_image());  // as given: one placeholder
    runs.push_back((*outs)[0].sequences[0].token_ids);
    ASSERT_EQ(runs.back().size(), 6u);
    EXPECT_EQ(runs.back()[0], want) << "chunk " << chunk;
    ASSERT_FALSE((*outs)[0].sequences[0].logprobs.empty());
    EXPECT_NEAR((*outs)[0].sequences[0].logprobs[0].logprob, want_logprob, 1e-5) << "chunk " << chunk;
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST_F(V41ImageEngineTest, PrefixCacheSharesOnlyBetweenTheSameImages) {
  auto e = open(64, encoder_);
  ASSERT_NE(e, nullptr);
  auto run = [&](const std::string& image) {
    auto outs = e->generate({request(prompt_with_image(), {image}, 4)});
    EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
    return outs.is_ok() ? (*outs)[0] : GenerateOutput{};
  };
  const GenerateOutput first = run("image one");
  const GenerateOutput other = run("image two");  // same length: same span, other rows
  const GenerateOutput again = run("image one");
  EXPECT_EQ(other.n_cached_tokens, 0) << "another image's blocks were served from the cache";
  EXPECT_GT(again.n_cached_tokens, 0);
  EXPECT_EQ(again.sequences[0].token_ids, first.sequences[0].token_ids);
}

TEST_F(V41ImageEngineTest, BadImageRequestsAreRefused) {
  auto e = open(64, encoder_);
  ASSERT_NE(e, nullptr);
  auto error = [&](Request r) {
    auto outs = e->generate({std::move(r)});
    return outs.is_ok() ? std::string("accepted") : outs.status().to_string();
  };
  EXPECT_EQ(error(request(prompt_with_image(), {}, 2)), "accepted");  // no images: the id is a token
  EXPECT_NE(error(request(prompt_with_image(), {"x", "y"}, 2)).find("1 image placeholder(s) (token 510) for 2"),
            std::string::npos);
  EXPECT_NE(error(request(testing::random_ids(20, 42, 500), {"x"}, 2)).find("0 image placeholder(s)"),
            std::string::npos);
  EXPECT_NE(error(request(prompt_with_image(), {""}, 2)).find("images[0]: empty image"), std::string::npos);
  auto real = open(64, nullptr);  // tiny-v41's own vision tower: "x" is no image file
  ASSERT_NE(real, nullptr);
  auto outs = real->generate({request(prompt_with_image(), {"x"}, 2)});
  ASSERT_FALSE(outs.is_ok());
  EXPECT_NE(outs.status().to_string().find("images[0]"), std::string::npos) << outs.status().to_string();
  EngineOptions v4;
  v4.model = testing::synthetic_model_dir("tiny-v4f");
  v4.kv_blocks = 16;
  auto no_vision = engine::open_engine(v4, {});
  ASSERT_TRUE(no_vision.is_ok()) << no_vision.status().to_string();
  outs = (*no_vision)->generate({request(testing::random_ids(20, 43, 500), {"x"}, 2)});
  ASSERT_FALSE(outs.is_ok());
  EXPECT_NE(outs.status().to_string().find("takes no image input"), std::string::npos) << outs.status().to_string();
}

// A PNG through tiny-v41's own vision tower (decode, size rules, ViT + aligner): the placeholder
// becomes the span the size rules give, and the tokens do not depend on how the prefill is chunked.
TEST_F(V41ImageEngineTest, APngThroughTheVisionTower) {
  std::vector<uint8_t> rgb(100 * 60 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>((i * 7) % 251);
  const std::string png = testing::encode_png_rgb(100, 60, rgb.data());
  ASSERT_FALSE(png.empty());
  auto layout = vision::plan_image_size(100, 60, lm_->config.vision);
  ASSERT_TRUE(layout.is_ok()) << layout.status().to_string();
  std::vector<std::vector<int32_t>> runs;
  for (int32_t chunk : {64, 5}) {
    auto e = open(chunk, nullptr);
    ASSERT_NE(e, nullptr);
    struct Seen {
      int32_t n_prompt = 0;
      std::vector<int32_t> tokens;
      std::promise<void> done;
    };
    auto seen = std::make_shared<Seen>();
    auto id = e->submit(request(prompt_with_image(), {png}, 4), [seen](const TokenEvent& ev) {
      seen->n_prompt = ev.n_prompt_tokens;
      seen->tokens.insert(seen->tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
      if (ev.finish) seen->done.set_value();
    });
    ASSERT_TRUE(id.is_ok()) << id.status().to_string();
    seen->done.get_future().wait();
    EXPECT_EQ(seen->n_prompt, 39 + static_cast<int32_t>(layout->span_len()));
    runs.push_back(seen->tokens);
    EXPECT_EQ(runs.back().size(), 4u);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

}  // namespace
}  // namespace deepinfer
