// Whole-model CUDA checks on the tiny synthetic V4.1-Flash (exact prefill): CUDA against the CPU
// reference per layer against the official-vs-plain gap in both numerics (plain also with 90% of
// the top-1 ids: V4.1's plain numerics keep the KV quantisers and the indexer's discrete top-k),
// chunked prefill = one shot on the GPU bit for bit (every kernel is batch invariant; one-token
// steps replay step graphs), an image span, the engine end to end, and "auto" picking the GPU.
// All passed on an H100 in session 58. Label cuda: runs on the GPU machine.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "engine/engine_debug.h"
#include "engine/loaded_model.h"
#include "model_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "test_models.h"

namespace deepinfer {
namespace {

std::unique_ptr<engine::LoadedModel> load_v41_on(const std::string& device, model::Numerics numerics) {
  engine::LoadOptions o{numerics, device};
  o.prefill_mode = model::PrefillMode::kExact;
  auto lm = engine::load_model(testing::synthetic_model_dir("tiny-v41"), o);
  EXPECT_TRUE(lm.is_ok()) << lm.status().to_string();
  return lm.is_ok() ? std::move(lm).value() : nullptr;
}

// V4.1's prompts in 16-position blocks, the prompt's length on every step (testing::run_prompt).
std::vector<std::vector<float>> run(engine::LoadedModel& lm, const std::vector<int32_t>& ids, int64_t chunk,
                                    const std::vector<int32_t>& wanted, model::Capture* capture = nullptr) {
  return testing::run_prompt(lm, ids, chunk, wanted, 16, true, capture);
}

class CudaModelV41Test : public ::testing::TestWithParam<model::Numerics> {
 protected:
  void SetUp() override {
    if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaModelV41Test, MatchesTheCpuReference) {
  auto cpu = load_v41_on("cpu", GetParam());
  auto gpu = load_v41_on("cuda", GetParam());
  ASSERT_TRUE(cpu && gpu);
  const auto ids = testing::random_ids(300, 77, static_cast<int32_t>(cpu->config.vocab_size));
  std::vector<int32_t> wanted;
  for (int32_t p = 0; p < 300; p += 11) wanted.push_back(p);
  wanted.push_back(299);
  const auto lc = run(*cpu, ids, 300, wanted), lg = run(*gpu, ids, 300, wanted);
  ASSERT_EQ(lc.size(), lg.size());
  const auto [worst, agree] = testing::compare_logits(lc, lg);
  const bool plain = GetParam() == model::Numerics::kPlain;
  std::printf("V4.1 CUDA vs CPU (%s): max |logit diff| %.4g, top-1 %d/%zu\n", plain ? "plain" : "official", worst,
              agree, lc.size());
  // Per layer against the official-vs-plain gap (expect_layers_near_official), in both numerics:
  // V4.1's plain numerics keep the KV quantizers (FP8 / FP4 codes) and the indexer's discrete
  // top-k, so a difference of one F32 ulp that moves a value across a code boundary or a score
  // across the k-th moves it by a whole code or a whole entry. Session 58's first GPU run: plain
  // max |logit diff| 0.34 over 29 rows with every top-1 equal (the 1e-3 bound written before any
  // run did not hold); the per-layer figures say where the difference starts.
  // Top-1 in plain numerics (29 of 29 in that run); official numerics on this random tiny model sit
  // 0.6 from plain by the last layer, where 18 of 29 agreed.
  if (plain) {
    EXPECT_GE(agree, static_cast<int>(lc.size()) * 9 / 10);
  }
  auto other = load_v41_on("cpu", plain ? model::Numerics::kOfficial : model::Numerics::kPlain);
  ASSERT_NE(other, nullptr);
  model::Capture cc, cg, co;
  run(*cpu, ids, 300, {}, &cc);
  run(*gpu, ids, 300, {}, &cg);
  run(*other, ids, 300, {}, &co);
  testing::expect_layers_near_official(cg, cc, co);
}

// Exact prefill in chunks of 37 and one token at a time equals one shot on the GPU, bit for bit (the
// one-token steps are graph-shaped: replayed from step graphs, the rest eager).
TEST_P(CudaModelV41Test, ChunkedPrefillEqualsOneShotOnTheGpu) {
  auto gpu = load_v41_on("cuda", GetParam());
  ASSERT_NE(gpu, nullptr);
  const auto ids = testing::random_ids(300, 5, static_cast<int32_t>(gpu->config.vocab_size));
  const std::vector<int32_t> wanted = {36, 37, 150, 290, 299};
  const auto one = run(*gpu, ids, 300, wanted);
  EXPECT_EQ(run(*gpu, ids, 37, wanted), one);
  EXPECT_EQ(run(*gpu, ids, 1, {290, 299}), std::vector<std::vector<float>>(one.end() - 2, one.end()));
}

// An image span (its rows' embeddings given, Engram gate 0, bias_vl routing; chunks of 37 split
// it): the GPU against the CPU with MatchesTheCpuReference's bounds (plain numerics).
TEST_P(CudaModelV41Test, ImageSpanMatchesTheCpuReference) {
  if (GetParam() != model::Numerics::kPlain) GTEST_SKIP() << "checked in plain numerics";
  auto cpu = load_v41_on("cpu", GetParam());
  auto gpu = load_v41_on("cuda", GetParam());
  ASSERT_TRUE(cpu && gpu);
  const int64_t D = cpu->config.hidden_size;
  auto ids = testing::random_ids(120, 78, 500);
  std::vector<int32_t> image;
  for (int32_t r = 20; r < 60; ++r) {
    ids[static_cast<size_t>(r)] = static_cast<int32_t>(cpu->config.image_token_id);
    image.push_back(r);
  }
  std::vector<float> embeds(static_cast<size_t>(120 * D));
  for (size_t i = 0; i < embeds.size(); ++i) embeds[i] = 0.05f * std::sin(0.37f * static_cast<float>(i));
  auto edit = [&](model::ForwardBatch& b, int32_t begin) {
    for (int32_t r : image) {
      if (r < begin || r >= begin + static_cast<int32_t>(b.token_ids.size())) continue;
      b.image_rows.push_back(r - begin);
      b.image_embeds.insert(b.image_embeds.end(), embeds.begin() + r * D, embeds.begin() + (r + 1) * D);
    }
  };
  std::vector<int32_t> wanted;
  for (int32_t p = 0; p < 120; p += 7) wanted.push_back(p);
  const auto lc = testing::run_prompt(*cpu, ids, 37, wanted, 16, true, nullptr, edit);
  const auto lg = testing::run_prompt(*gpu, ids, 37, wanted, 16, true, nullptr, edit);
  ASSERT_EQ(lc.size(), lg.size());
  const auto [worst, agree] = testing::compare_logits(lc, lg);
  std::printf("V4.1 CUDA vs CPU with an image span: max |logit diff| %.4g, top-1 %d/%zu\n", worst, agree, lc.size());
  // The bounds of MatchesTheCpuReference (its comment says why per layer): session 58's first run
  // gave max |logit diff| 1.5e-3 here with every top-1 equal.
  EXPECT_GE(agree, static_cast<int>(lc.size()) * 9 / 10);
  auto official = load_v41_on("cpu", model::Numerics::kOfficial);
  ASSERT_NE(official, nullptr);
  model::Capture cc, cg, co;
  testing::run_prompt(*cpu, ids, 120, {}, 16, true, &cc, edit);
  testing::run_prompt(*gpu, ids, 120, {}, 16, true, &cg, edit);
  testing::run_prompt(*official, ids, 120, {}, 16, true, &co, edit);
  testing::expect_layers_near_official(cg, cc, co);
}

INSTANTIATE_TEST_SUITE_P(Numerics, CudaModelV41Test,
                         ::testing::Values(model::Numerics::kOfficial, model::Numerics::kPlain),
                         [](const auto& info) { return info.param == model::Numerics::kPlain ? "Plain" : "Official"; });

class CudaEngineV41Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// The engine on tiny-v41 end to end on the GPU (scheduler, 16-token blocks, chunked prefill, a
// shared prefix served from the prefix cache with exact replay, Engram hashes on the host, device
// sampling): the first sequence of each of 4 prompts, 10 tokens each, in plain numerics.
// `host_sampling`: every step sampled on the host from the copied logits.
std::vector<std::vector<int32_t>> v41_engine_tokens(const std::string& device, float temperature, bool host_sampling,
                                                    EngineStats* stats, bool graphs = true) {
  EngineOptions o;
  o.model = testing::synthetic_model_dir("tiny-v41");
  o.device = device;
  o.numerics = "plain";
  o.block_tokens = 16;
  o.kv_blocks = 96;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 64;  // several prefill chunks per prompt
  o.replay_mode = "exact";
  engine::DebugOptions debug;
  debug.check_integrity_every_step = true;
  debug.host_sampling = host_sampling;
  if (!graphs) setenv("DEEPINFER_CUDA_GRAPHS", "0", 1);  // read when the engine's ops are made
  auto engine = engine::open_engine(o, debug);
  if (!graphs) unsetenv("DEEPINFER_CUDA_GRAPHS");
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  std::vector<std::vector<int32_t>> tokens;
  if (!engine.is_ok()) return tokens;
  EXPECT_EQ((*engine)->options().device, device);
  std::vector<Request> reqs;
  const auto shared = testing::random_ids(200, 11, 500);  // below the noise (500) and image (510) ids
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt_ids = shared;
    r.prompt_ids.resize(static_cast<size_t>(100 + 29 * i));
    r.sampling.temperature = temperature;
    r.sampling.top_p = i == 0 ? 0.9f : 1.0f;
    r.sampling.seed = 100 + i;
    r.sampling.max_tokens = 10;
    r.sampling.ignore_eos = true;
    reqs.push_back(r);
  }
  auto outs = (*engine)->generate(reqs);
  EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
  if (outs.is_ok()) {
    for (const auto& out : *outs) tokens.push_back(out.sequences.at(0).token_ids);
  }
  *stats = (*engine)->stats();
  const engine::DebugSnapshot d = engine::debug_snapshot(**engine);
  EXPECT_TRUE(d.integrity.is_ok()) << d.integrity.to_string();
  return tokens;
}

// Greedy tokens on the GPU equal the CPU engine's; seeded tokens sampled on the device equal those
// the host sampler draws from the same step's copied logits, and those of every step run eagerly
// (the decode steps replay step graphs, the Engram rows gathered on the host and staged).
TEST_F(CudaEngineV41Test, GreedyTokensEqualTheCpuEngineAndDeviceSamplingTheHosts) {
  EngineStats cpu_stats, gpu_stats, seeded_stats, host_stats;
  const auto cpu = v41_engine_tokens("cpu", 0.0f, false, &cpu_stats);
  const auto gpu = v41_engine_tokens("cuda", 0.0f, false, &gpu_stats);
  ASSERT_EQ(cpu.size(), 4u);
  ASSERT_EQ(gpu.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(gpu[i].size(), 10u);
    EXPECT_EQ(gpu[i], cpu[i]) << "prompt " << i;
  }
  EXPECT_GT(gpu_stats.n_device_sampled_steps, 0);
  const auto seeded = v41_engine_tokens("cuda", 0.8f, false, &seeded_stats);
  const auto host = v41_engine_tokens("cuda", 0.8f, true, &host_stats);
  EXPECT_GT(seeded_stats.n_device_sampled_steps, 0);
  EXPECT_EQ(host_stats.n_device_sampled_steps, 0);
  EXPECT_EQ(seeded, host);
  EngineStats eager_stats;
  EXPECT_EQ(v41_engine_tokens("cuda", 0.8f, false, &eager_stats, /*graphs=*/false), seeded);
}

// device = "auto" on a machine with a GPU picks it for V4.1 too (since session 58's checks).
TEST(CudaModelV41Auto, AutoDevicePicksTheGpu) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto lm = engine::load_model(testing::synthetic_model_dir("tiny-v41"),
                               engine::LoadOptions{model::Numerics::kOfficial, "auto"});
  ASSERT_TRUE(lm.is_ok()) << lm.status().to_string();
  EXPECT_EQ((*lm)->device, "cuda");
  EXPECT_NE((*lm)->image_encoder, nullptr);  // the vision tower, on the CPU beside it
}

}  // namespace
}  // namespace deepinfer
