// Whole-model CUDA checks on the tiny synthetic V4-Flash: CUDA vs the CPU reference (plain numerics
// within 1e-3 of the logits, official within a stated tolerance and >= 95% top-1 agreement), CUDA
// against the transformers golden, and chunked prefill = one shot on the GPU (the kernels are
// batch invariant by construction). Label cuda: runs on the GPU machine.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "deepinfer/engine.h"
#include "engine/device_backend.h"
#include "engine/engine_debug.h"
#include "loader/safetensors.h"
#include "model_test_util.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer {
namespace {

// V4-Flash's prompts in 256-position blocks (testing::run_prompt).
std::vector<std::vector<float>> run(engine::LoadedModel& lm, const std::vector<int32_t>& ids, int64_t chunk,
                                    const std::vector<int32_t>& wanted) {
  return testing::run_prompt(lm, ids, chunk, wanted, 256, false);
}

std::unique_ptr<engine::LoadedModel> load_on(const std::string& device, model::Numerics numerics) {
  auto lm = engine::load_model(testing::synthetic_model_dir("tiny-v4f"), engine::LoadOptions{numerics, device});
  EXPECT_TRUE(lm.is_ok()) << lm.status().to_string();
  return lm.is_ok() ? std::move(lm).value() : nullptr;
}

class CudaModelTest : public ::testing::TestWithParam<model::Numerics> {
 protected:
  void SetUp() override {
    if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaModelTest, MatchesTheCpuReference) {
  auto cpu = load_on("cpu", GetParam());
  auto gpu = load_on("cuda", GetParam());
  ASSERT_TRUE(cpu && gpu);
  const auto ids = testing::random_ids(300, 77, 128000);
  std::vector<int32_t> wanted;
  for (int32_t p = 0; p < 300; p += 11) wanted.push_back(p);
  wanted.push_back(299);
  const auto lc = run(*cpu, ids, 300, wanted), lg = run(*gpu, ids, 300, wanted);
  ASSERT_EQ(lc.size(), lg.size());
  const auto [worst, agree] = testing::compare_logits(lc, lg);
  const bool plain = GetParam() == model::Numerics::kPlain;
  std::printf("CUDA vs CPU (%s): max |logit diff| %.4g, top-1 %d/%zu\n", plain ? "plain" : "official", worst, agree,
              lc.size());
  if (plain) {
    EXPECT_LT(worst, 1e-3f);
    EXPECT_EQ(agree, static_cast<int>(lc.size()));
  }
  // Official numerics: BF16 roundings and FP8/FP4 fake-quant decisions flip on last-bit summation
  // differences, and the flips compound over layers: an E4M3 code is 6-12% wide, so a 0.2% input
  // difference flips a few % of the codes of the next quantised GEMM input (measured on the H200:
  // |gpu - cpu| / |cpu| = 0.002 after layer 0, 0.018 after layer 1, 0.13 after layer 6; the logits
  // end up as far apart as official and plain numerics are). So the check is per layer, relative to
  // the effect of the contract itself (official vs plain on the CPU): after layer 0 the GPU must be
  // within a quarter of it, and after every layer strictly closer to the CPU's official numerics
  // than plain numerics are — a skipped or misplaced quantiser would put the GPU on the plain side.
  // Each op's official numerics are checked without compounding in cuda_ops_test.
  if (!plain) {
    auto cpu_plain = load_on("cpu", model::Numerics::kPlain);
    ASSERT_NE(cpu_plain, nullptr);
    model::Capture cc, cg, cp;
    const int32_t nb = 2;
    for (auto [lm, cap] : {std::pair{cpu.get(), &cc}, std::pair{gpu.get(), &cg}, std::pair{cpu_plain.get(), &cp}}) {
      model::KvState state(lm->config, {1, nb, 256, lm->model->act_dtype()}, lm->ops.get());
      state.reset_slot(0);
      ASSERT_TRUE(lm->model->forward(testing::make_batch({{0, ids, 0, testing::iota_blocks(0, nb)}}), state, cap).is_ok());
    }
    testing::expect_layers_near_official(cg, cc, cp);
  }
}

TEST_P(CudaModelTest, ChunkedPrefillEqualsOneShotOnTheGpu) {
  auto gpu = load_on("cuda", GetParam());
  ASSERT_NE(gpu, nullptr);
  const auto ids = testing::random_ids(300, 5, 128000);
  const std::vector<int32_t> wanted = {0, 67, 127, 128, 255, 256, 299};
  const auto one = run(*gpu, ids, 300, wanted), chunked = run(*gpu, ids, 37, wanted), steps = run(*gpu, ids, 133, wanted);
  EXPECT_EQ(chunked, one);
  EXPECT_EQ(steps, one);
}

// Logits of a forward result copied to the host ([rows * vocab] F32).
std::vector<float> host_logits(engine::LoadedModel& lm, const model::ForwardResult& r) {
  std::vector<float> h(static_cast<size_t>(r.logits.numel()));
  lm.ops->copy(r.logits, tensor::TensorView::contiguous(h.data(), tensor::DType::kF32, {r.logits.shape[0], r.logits.shape[1]}));
  return h;
}

// The tiny model loaded twice on the GPU: with step graphs off (eager launches) and on.
struct EagerAndGraphed {
  std::unique_ptr<engine::LoadedModel> eager, graphed;
};
EagerAndGraphed load_eager_and_graphed(model::Numerics numerics) {
  setenv("DEEPINFER_CUDA_GRAPHS", "0", 1);
  EagerAndGraphed m;
  m.eager = load_on("cuda", numerics);
  unsetenv("DEEPINFER_CUDA_GRAPHS");
  m.graphed = load_on("cuda", numerics);
  if (m.eager && m.graphed) {
    EXPECT_FALSE(m.eager->ops->graphs_enabled());
    EXPECT_TRUE(m.graphed->ops->graphs_enabled());
  }
  return m;
}

const ops::cuda::GraphStats& graph_stats(engine::LoadedModel& lm) {
  return dynamic_cast<ops::cuda::CudaOps&>(*lm.ops).graph_stats();
}

// Two sequences (prompts of 200 and 150 tokens, ids from `seed`) prefilled together on two models,
// then decoded together for `steps` steps (CSA and HCA emissions, indexer growth); every forward's
// logits are compared bit for bit between the models.
void expect_same_two_sequence_decode(engine::LoadedModel& x, engine::LoadedModel& y, uint64_t seed, int steps) {
  const auto a = testing::random_ids(200 + steps, seed, 128000), b = testing::random_ids(150 + steps, seed + 1, 128000);
  model::KvState x_state(x.config, {2, 4, 256, x.model->act_dtype()}, x.ops.get());
  model::KvState y_state(y.config, {2, 4, 256, y.model->act_dtype()}, y.ops.get());
  for (model::KvState* st : {&x_state, &y_state}) st->reset_slot(0), st->reset_slot(1);
  int32_t pa = 200, pb = 150;
  const auto prefill = testing::make_batch({{0, {a.begin(), a.begin() + pa}, 0, {0, 1}, 0, 0, {pa - 1}},
                                            {1, {b.begin(), b.begin() + pb}, 0, {2, 3}, 0, 0, {pb - 1}}});
  auto rx = x.model->forward(prefill, x_state);
  auto ry = y.model->forward(prefill, y_state);
  ASSERT_TRUE(rx.is_ok() && ry.is_ok());
  ASSERT_EQ(host_logits(y, *ry), host_logits(x, *rx)) << "prefill";
  for (int step = 0; step < steps; ++step, ++pa, ++pb) {
    const auto batch = testing::make_batch({{0, {a[pa]}, pa, {0, 1}, 0, 0, {0}}, {1, {b[pb]}, pb, {2, 3}, 0, 0, {0}}});
    rx = x.model->forward(batch, x_state);
    ry = y.model->forward(batch, y_state);
    ASSERT_TRUE(rx.is_ok() && ry.is_ok());
    ASSERT_EQ(host_logits(y, *ry), host_logits(x, *rx)) << "decode step " << step;
  }
}

// Decode steps replayed from recorded CUDA graphs compute exactly what eager launches compute:
// two sequences decoded together for 120 steps, logits compared bit for bit with a model whose
// backend has graphs off; most steps must be replays.
TEST_P(CudaModelTest, GraphReplayEqualsEagerDecode) {
  auto [eager, graphed] = load_eager_and_graphed(GetParam());
  ASSERT_TRUE(eager && graphed);
  expect_same_two_sequence_decode(*eager, *graphed, 21, 120);
  const ops::cuda::GraphStats& st = graph_stats(*graphed);
  std::printf("step graphs: %lld replayed, %lld recorded, %lld eager, %lld failed\n",
              static_cast<long long>(st.replayed), static_cast<long long>(st.captured),
              static_cast<long long>(st.eager), static_cast<long long>(st.failed));
  EXPECT_EQ(st.failed, 0);
  EXPECT_GE(st.captured, 1);
  EXPECT_GE(st.replayed, 100);
  // A recorded step copies nothing: its uploads arrive in one copy queued before each launch, out
  // of the staging ring's slot (a copy node between kernels stalls the replayed step: the MoE
  // layers' expert descriptors, compared byte by byte with their padding, were re-uploaded from
  // pageable memory in every step graph — 7-18 us of idle GPU before each grouping launch).
  std::printf("last recording: %lld kernels, %lld copies, %lld memsets, %lld other nodes\n",
              static_cast<long long>(st.last_kernels), static_cast<long long>(st.last_copies),
              static_cast<long long>(st.last_memsets), static_cast<long long>(st.last_other));
  const char* one_upload = std::getenv("DEEPINFER_CUDA_ONE_UPLOAD");
  if (one_upload == nullptr || std::string(one_upload) != "0") {
    EXPECT_EQ(st.last_copies, 0);
  }
  EXPECT_EQ(st.last_memsets, 0);
  EXPECT_GT(st.last_kernels, 0);
}

// Two KV states of the same shapes decoded alternately: their steps have the same workspace
// layout, so only the state key keeps a graph recorded on one from being replayed on the other.
TEST_P(CudaModelTest, GraphReplayKeepsKvStatesApart) {
  auto [eager, graphed] = load_eager_and_graphed(GetParam());
  ASSERT_TRUE(eager && graphed);
  const std::vector<int32_t> ids[2] = {testing::random_ids(60, 31, 128000), testing::random_ids(60, 32, 128000)};
  std::vector<std::unique_ptr<model::KvState>> states;  // eager A, eager B, graphed A, graphed B
  for (auto* lm : {eager.get(), eager.get(), graphed.get(), graphed.get()}) {
    states.push_back(std::make_unique<model::KvState>(lm->config, model::KvStateOptions{1, 1, 256, lm->model->act_dtype()},
                                                      lm->ops.get()));
    states.back()->reset_slot(0);
  }
  for (int32_t pos = 0; pos < 60; ++pos) {
    for (int which = 0; which < 2; ++which) {
      const auto batch = testing::make_batch({{0, {ids[which][pos]}, pos, {0}, 0, 0, {0}}});
      auto re = eager->model->forward(batch, *states[which]);
      auto rg = graphed->model->forward(batch, *states[2 + which]);
      ASSERT_TRUE(re.is_ok() && rg.is_ok());
      ASSERT_EQ(host_logits(*graphed, *rg), host_logits(*eager, *re)) << "state " << which << " position " << pos;
    }
  }
  EXPECT_GE(graph_stats(*graphed).replayed, 100);
}

// Side regions (Ops::side_begin .. side_join: the compressors and the indexer's head weights beside
// the query path in lane 0 while lane 1 runs the KV row's norm and the indexer's query beside wq_b,
// the window store beside the output projections, the shared expert beside the router) on streams
// of their own compute exactly what
// program order computes: a two-sequence prefill and 80 decode steps (graphs recorded and
// replayed), logits compared bit for bit with a model whose backend runs the regions in order. A
// missing join or a shared scratch buffer shows up here.
TEST_P(CudaModelTest, SideStreamsEqualProgramOrder) {
  setenv("DEEPINFER_CUDA_SIDE_STREAM", "0", 1);
  auto ordered = load_on("cuda", GetParam());
  unsetenv("DEEPINFER_CUDA_SIDE_STREAM");
  auto side = load_on("cuda", GetParam());
  ASSERT_TRUE(ordered && side);
  expect_same_two_sequence_decode(*ordered, *side, 41, 80);
  EXPECT_EQ(graph_stats(*side).failed, 0);
  EXPECT_GE(graph_stats(*side).replayed, 60);
}

INSTANTIATE_TEST_SUITE_P(Numerics, CudaModelTest, ::testing::Values(model::Numerics::kOfficial, model::Numerics::kPlain),
                         [](const auto& info) { return info.param == model::Numerics::kOfficial ? "Official" : "Plain"; });

TEST(CudaGoldenTest, PlainNumericsMatchTransformers) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto gpu = load_on("cuda", model::Numerics::kPlain);
  ASSERT_NE(gpu, nullptr);
  auto g = loader::SafetensorsFile::open(testing::fixture_path("golden_v4/golden.safetensors"));
  ASSERT_TRUE(g.is_ok());
  const loader::TensorInfo* idi = g->find("p0.ids");
  const int32_t* idp = reinterpret_cast<const int32_t*>(g->data(*idi));
  const std::vector<int32_t> ids(idp, idp + idi->numel());
  const loader::TensorInfo* ti = g->find("p0.topk_ids");
  const int32_t* top_ids = reinterpret_cast<const int32_t*>(g->data(*ti));
  const float* top_logits = reinterpret_cast<const float*>(g->data(*g->find("p0.topk_logits")));
  const int64_t K = ti->shape[1];
  std::vector<int32_t> wanted(ids.size());
  std::iota(wanted.begin(), wanted.end(), 0);
  const auto logits = run(*gpu, ids, 300, wanted);
  float worst = 0.0f;
  int agree = 0;
  for (size_t t = 0; t < logits.size(); ++t) {
    agree += std::max_element(logits[t].begin(), logits[t].end()) - logits[t].begin() == top_ids[t * K];
    for (int64_t k = 0; k < K; ++k) worst = std::max(worst, std::fabs(logits[t][top_ids[t * K + k]] - top_logits[t * K + k]));
  }
  std::printf("CUDA plain vs transformers golden: max |logit error| %.4g, top-1 %d/%zu\n", worst, agree, logits.size());
  EXPECT_EQ(agree, static_cast<int>(logits.size()));
  EXPECT_LT(worst, 2e-3f);
}

// The first sequence of each of 4 prompts of the tiny checkpoint, generated by an engine on
// `device` in plain numerics: 12 tokens each at `temperature` (top-p on prompt 0, min-p on 1,
// top-k on 3, seeds 100 + i); prompt 2 asks for `logprobs` top logprobs (>= 0; raw mode unless
// `processed`); `host_sampling`: every step sampled on the host from the copied logits;
// `async`: EngineOptions::async_scheduling.
struct EngineRun {
  std::string device = "cuda";
  float temperature = 0.0f;
  bool host_sampling = false;
  int32_t logprobs = -1;
  bool processed = false;
  bool async = true;
  int32_t nextn = 0;  // EngineOptions::nextn_decode (speculative decoding with MTP drafts)
  bool graphs = true;  // false: DEEPINFER_CUDA_GRAPHS=0 (every step eager)
  // With nextn: every step's proposed drafts, by (request, tokens generated so far).
  std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>>* drafts = nullptr;
  // EngineOptions::spec_verification: coupled, so seeded rows give the tokens of decoding without.
  const char* spec_verification = "coupled";
};
std::vector<GenerateOutput::Sequence> engine_outputs(const EngineRun& run, EngineStats* stats) {
  EngineOptions o;
  o.model = testing::synthetic_model_dir("tiny-v4f");
  o.device = run.device;
  o.numerics = "plain";
  o.max_num_batched_tokens = 96;  // several prefill chunks per prompt
  o.kv_blocks = 64;
  o.async_scheduling = run.async;
  o.nextn_decode = run.nextn;
  o.spec_verification = run.spec_verification;
  auto opened = EngineOptions::with_environment(o);
  EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
  engine::DebugOptions debug;
  debug.host_sampling = run.host_sampling;
  if (run.drafts != nullptr) {
    debug.on_drafts = [&run](RequestId id, int32_t, int32_t n_generated, std::vector<int32_t>* drafts) {
      (*run.drafts)[{id, n_generated}] = *drafts;
    };
  }
  if (!run.graphs) setenv("DEEPINFER_CUDA_GRAPHS", "0", 1);  // read when the engine's ops are made
  auto engine = engine::open_engine(*opened, debug);
  if (!run.graphs) unsetenv("DEEPINFER_CUDA_GRAPHS");
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  std::vector<GenerateOutput::Sequence> seqs;
  if (!engine.is_ok()) return seqs;
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt_ids = testing::random_ids(200, 11, 128000);           // shared prefix
    r.prompt_ids.resize(static_cast<size_t>(120 + 37 * i));
    r.sampling.temperature = run.temperature;
    r.sampling.min_p = i == 1 ? 0.02f : 0.0f;
    r.sampling.top_p = i == 0 ? 0.9f : 1.0f;
    r.sampling.top_k = i == 3 ? 40 : 0;
    r.sampling.seed = 100 + i;
    r.sampling.max_tokens = 12;
    r.sampling.ignore_eos = true;
    if (run.logprobs >= 0 && i == 2) {
      r.sampling.logprobs = run.logprobs;
      if (run.processed) r.sampling.logprobs_mode = LogprobsMode::kProcessed;
    }
    reqs.push_back(r);
  }
  auto outs = (*engine)->generate(reqs);
  *stats = (*engine)->stats();
  EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
  if (outs.is_ok()) {
    for (const auto& out : *outs) seqs.push_back(out.sequences.at(0));
  }
  return seqs;
}
std::vector<std::vector<int32_t>> engine_tokens(const EngineRun& run, EngineStats* stats) {
  std::vector<std::vector<int32_t>> tokens;
  for (const auto& s : engine_outputs(run, stats)) tokens.push_back(s.token_ids);
  return tokens;
}

// The engine on the CUDA backend end to end (scheduler, KV pools, chunked prefill, greedy steps
// sampled by the device's argmax_rows, only the ids copied back): greedy tokens in plain numerics
// equal the CPU engine's, for a batch of prompts of different lengths that share a prefix; and
// with every step sampled on the host from the copied logits (DebugOptions::host_sampling), or a
// processed-logprobs request in the batch (which sends its steps there), the tokens are the same.
// Needs a tokenizer ($DEEPINFER_TOKENIZER or the prepared data), as every engine does.
TEST(CudaEngineTest, GreedyBatchEqualsTheCpuEngine) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  EngineStats cpu_stats, gpu_stats, host_stats, processed_stats;
  const auto cpu = engine_tokens({.device = "cpu"}, &cpu_stats);
  const auto gpu = engine_tokens({}, &gpu_stats);
  EXPECT_GE(gpu_stats.n_argmax_steps, 11);  // at least the 11 decode steps after the last prompt's prefill
  const auto gpu_host_sampled = engine_tokens({.host_sampling = true}, &host_stats);
  EXPECT_EQ(host_stats.n_device_sampled_steps, 0);
  const auto gpu_processed = engine_tokens({.logprobs = 1, .processed = true}, &processed_stats);
  // The processed-logprobs request's 12 sampling steps go to the host (steps while it is still
  // prefilling, which sample only the other prompts, stay on the device).
  EXPECT_GE(processed_stats.n_steps - processed_stats.n_device_sampled_steps, 12);
  ASSERT_EQ(cpu.size(), 4u);
  ASSERT_EQ(gpu.size(), 4u);
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(gpu[i].size(), 12u);
    EXPECT_EQ(gpu[i], cpu[i]) << "prompt " << i;
  }
  EXPECT_EQ(gpu_host_sampled, gpu);
  EXPECT_EQ(gpu_processed, gpu);
}

// Asynchronous scheduling on the CUDA engine: decode steps planned and queued while the step
// before runs, their input tokens read where that step sampled them (a take_tokens launch inside
// the replayed step graph, the ids' copy queued behind it): the tokens and logprobs of the
// synchronous loop, greedy and seeded, with most steps planned ahead.
TEST(CudaEngineTest, AsyncSchedulingEqualsTheSynchronousLoop) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const float temperature : {0.0f, 0.8f}) {
    EngineStats async_stats, sync_stats;
    const auto async = engine_outputs({.temperature = temperature, .logprobs = 5}, &async_stats);
    const auto sync = engine_outputs({.temperature = temperature, .logprobs = 5, .async = false}, &sync_stats);
    ASSERT_EQ(async.size(), 4u);
    ASSERT_EQ(sync.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(async[i].token_ids, sync[i].token_ids) << "prompt " << i << " at temperature " << temperature;
      ASSERT_EQ(async[i].logprobs.size(), sync[i].logprobs.size());
      for (size_t t = 0; t < async[i].logprobs.size(); ++t) {
        EXPECT_EQ(async[i].logprobs[t].logprob, sync[i].logprobs[t].logprob) << "prompt " << i << " token " << t;
        EXPECT_EQ(async[i].logprobs[t].top, sync[i].logprobs[t].top) << "prompt " << i << " token " << t;
      }
    }
    EXPECT_GE(async_stats.n_steps_ahead, 8);  // the decode steps after the last prompt's prefill
    EXPECT_EQ(sync_stats.n_steps_ahead, 0);
  }
}

// Speculative decoding on the CUDA engine (MTP drafts, verification, rewinds by slot copy and
// replay): greedy and seeded (the coupled rule), the tokens and logprobs of decoding without
// drafts — which holds where verifying k + 1 rows gives each row the logits a one-row decode gives
// it. Rejection sampling (the default; seeded rows drafted and verified on the host from copied
// logits): greedy rows as without drafts, seeded rows the same twice.
TEST(CudaEngineTest, SpeculativeDecodingEqualsDecodingWithout) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const float temperature : {0.0f, 0.8f}) {
    EngineStats spec_stats, plain_stats;
    const auto spec = engine_outputs({.temperature = temperature, .logprobs = 5, .nextn = 3}, &spec_stats);
    const auto plain = engine_outputs({.temperature = temperature, .logprobs = 5}, &plain_stats);
    ASSERT_EQ(spec.size(), 4u);
    ASSERT_EQ(plain.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(spec[i].token_ids, plain[i].token_ids) << "prompt " << i << " at temperature " << temperature;
      ASSERT_EQ(spec[i].logprobs.size(), plain[i].logprobs.size());
      for (size_t t = 0; t < spec[i].logprobs.size(); ++t) {
        EXPECT_EQ(spec[i].logprobs[t].logprob, plain[i].logprobs[t].logprob) << "prompt " << i << " token " << t;
      }
    }
    EXPECT_GT(spec_stats.n_draft_rows, 0);
    EXPECT_EQ(plain_stats.n_draft_rows, 0);
    EngineStats rejection_stats, again_stats;
    const auto rejection =
        engine_outputs({.temperature = temperature, .logprobs = 5, .nextn = 3, .spec_verification = "rejection"},
                       &rejection_stats);
    const auto again =
        engine_outputs({.temperature = temperature, .logprobs = 5, .nextn = 3, .spec_verification = "rejection"},
                       &again_stats);
    ASSERT_EQ(rejection.size(), 4u);
    ASSERT_EQ(again.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(rejection[i].token_ids, again[i].token_ids) << "prompt " << i << " at temperature " << temperature;
      EXPECT_FALSE(rejection[i].token_ids.empty()) << "prompt " << i;
      if (temperature == 0.0f) {
        EXPECT_EQ(rejection[i].token_ids, plain[i].token_ids) << "prompt " << i;
      }
    }
    EXPECT_GT(rejection_stats.n_draft_rows, 0);
  }
  // The drafts themselves: the target and MTP steps replayed from step graphs and the chained
  // steps reading their tokens where the picks are give the drafts of every step run eagerly.
  std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>> graphed, eager;
  EngineStats graphed_stats, eager_stats;
  engine_outputs({.nextn = 3, .drafts = &graphed}, &graphed_stats);
  engine_outputs({.nextn = 3, .graphs = false, .drafts = &eager}, &eager_stats);
  EXPECT_GT(graphed.size(), 8u);
  EXPECT_EQ(graphed, eager);
}

// Seeded temperature sampling on the CUDA engine: steps sampled on the device (Ops::sample_rows,
// only the ids copied back) give the tokens the host sampler gives from the copied logits — the
// same keyed noise on both sides.
// device = "auto" (EngineOptions' default) on a machine with a GPU: V4 runs on the CUDA backend (V4.1
// too: cuda_model_v41_test.cc); the engine names its choice.
TEST(CudaEngineTest, AutoDevicePicksTheGpuForV4) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(engine::resolve_device("auto", true), "cuda");
  EXPECT_EQ(engine::resolve_device("auto", false), "cpu");
  EngineOptions o;
  o.model = testing::synthetic_model_dir("tiny-v4f");
  o.kv_blocks = 16;
  auto e = engine::open_engine(o, {});
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ((*e)->options().device, "cuda");
}

TEST(CudaEngineTest, TemperatureStepsOnTheDeviceEqualTheHostSampler) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  EngineStats device_stats, host_stats;
  const auto on_device = engine_tokens({.temperature = 0.8f}, &device_stats);
  const auto on_host = engine_tokens({.temperature = 0.8f, .host_sampling = true}, &host_stats);
  EXPECT_GE(device_stats.n_device_sampled_steps, 11);
  EXPECT_EQ(device_stats.n_argmax_steps, 0);
  EXPECT_EQ(host_stats.n_device_sampled_steps, 0);
  ASSERT_EQ(on_device.size(), 4u);
  EXPECT_EQ(on_device, on_host);
  EngineStats greedy_stats;
  EXPECT_NE(on_device, engine_tokens({}, &greedy_stats));  // sampled, not argmax rows
}

// Raw logprobs on the CUDA engine (Ops::logprob_rows and token_rank_rows: 2 + 2 x 20 numbers per
// row copied back, not the logits), greedy and sampled: the tokens, logprobs, ranks and top-20
// lists of the host sampler from the copied logits — the ids and ranks exactly, the values within
// 2 float ulps.
TEST(CudaEngineTest, RawLogprobsOnTheDeviceEqualTheHostSamplers) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto close = [](float got, float want) {
    return got == want || std::fabs(got - want) <= 2.0f * 1.2e-7f * std::max(1.0f, std::fabs(want));
  };
  for (const float temperature : {0.0f, 0.8f}) {
    EngineStats device_stats, host_stats;
    const auto on_device = engine_outputs({.temperature = temperature, .logprobs = 20}, &device_stats);
    const auto on_host = engine_outputs({.temperature = temperature, .host_sampling = true, .logprobs = 20}, &host_stats);
    EXPECT_GE(device_stats.n_device_sampled_steps, 11);
    ASSERT_EQ(on_device.size(), 4u);
    ASSERT_EQ(on_host.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(on_device[i].token_ids, on_host[i].token_ids) << "prompt " << i;
    const auto &d = on_device[2].logprobs, &h = on_host[2].logprobs;
    ASSERT_EQ(d.size(), 12u);
    ASSERT_EQ(h.size(), 12u);
    for (size_t t = 0; t < d.size(); ++t) {
      EXPECT_TRUE(close(d[t].logprob, h[t].logprob)) << t << ": " << d[t].logprob << " vs " << h[t].logprob;
      EXPECT_EQ(d[t].rank, h[t].rank) << "token " << t;  // Ops::token_rank_rows of the sampled id
      EXPECT_GE(d[t].rank, 1) << "token " << t;
      ASSERT_EQ(d[t].top.size(), 20u);
      ASSERT_EQ(h[t].top.size(), 20u);
      for (size_t j = 0; j < 20; ++j) {
        EXPECT_EQ(d[t].top[j].token, h[t].top[j].token) << "token " << t << ", entry " << j;
        EXPECT_TRUE(close(d[t].top[j].logprob, h[t].top[j].logprob)) << "token " << t << ", entry " << j;
      }
    }
  }
}

// Penalties, logit bias, allowed ids, min_tokens' stop ids and grammar masks on the CUDA engine
// (Ops::adjust_logits, then the device's sampling: no logits copied): the tokens and text of the
// host sampler from the copied logits, greedy and seeded, on the tiny checkpoint's real vocabulary.
// With asynchronous scheduling (the default) the device run plans its steps ahead: the penalty
// rows count the token the step before sampled on the device (AdjustRow::pending) — request 1's
// biased token loses to its frequency penalty after a count that an uncounted token would shift —
// and the grammar row samples once the host has its token.
TEST(CudaEngineTest, LogitProcessorsOnTheDeviceEqualTheHostSampler) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto run = [&](bool host_sampling, EngineStats* stats) {
    EngineOptions o;
    o.model = testing::synthetic_model_dir("tiny-v4f");
    o.device = "cuda";
    o.numerics = "plain";
    o.kv_blocks = 64;
    auto opened = EngineOptions::with_environment(o);
    EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
    engine::DebugOptions debug;
    debug.host_sampling = host_sampling;
    auto engine = engine::open_engine(*opened, debug);
    EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
    std::vector<GenerateOutput> outs;
    if (!engine.is_ok()) return outs;
    std::vector<Request> reqs(5);
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto k = static_cast<int64_t>(i);
      reqs[i].prompt_ids = testing::random_ids(90 + 17 * k, 40 + static_cast<uint64_t>(k), 128000);
      reqs[i].sampling.max_tokens = 10;
      reqs[i].sampling.seed = 7 + i;
      reqs[i].sampling.temperature = i % 2 ? 0.0f : 0.9f;
      reqs[i].sampling.ignore_eos = true;
    }
    reqs[0].sampling.repetition_penalty = 1.5f;
    reqs[0].sampling.frequency_penalty = 0.8f;
    reqs[1].sampling.presence_penalty = 1.2f;
    reqs[1].sampling.frequency_penalty = 2.0f;
    reqs[1].sampling.logit_bias = {{500, 8.0f}, {600, 5.0f}};
    reqs[2].sampling.allowed_token_ids = {100, 200, 300, 400, 500, 600, 700};
    reqs[3].sampling.ignore_eos = false;
    reqs[3].sampling.min_tokens = 8;
    reqs[3].sampling.stop_token_ids = {600};
    reqs[3].sampling.logit_bias = {{600, 30.0f}};  // would stop at once without min_tokens
    reqs[4].prompt_ids.clear();
    reqs[4].prompt = "Answer:";
    reqs[4].structured_output = StructuredOutput{StructuredOutput::Kind::kRegex, "(yes|no|maybe)"};
    auto r = (*engine)->generate(reqs);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (r.is_ok()) outs = *r;
    *stats = (*engine)->stats();
    return outs;
  };
  EngineStats device, host;
  const auto on_device = run(false, &device), on_host = run(true, &host);
  ASSERT_EQ(on_device.size(), 5u);
  ASSERT_EQ(on_host.size(), 5u);
  EXPECT_EQ(device.n_device_sampled_steps, device.n_steps);
  EXPECT_EQ(host.n_device_sampled_steps, 0);
  EXPECT_GE(device.n_steps_ahead, 5);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(on_device[i].sequences.at(0).token_ids, on_host[i].sequences.at(0).token_ids) << "request " << i;
    EXPECT_EQ(on_device[i].sequences.at(0).text, on_host[i].sequences.at(0).text) << "request " << i;
  }
  for (int32_t t : on_device[2].sequences.at(0).token_ids) EXPECT_EQ(t % 100, 0) << t;
  EXPECT_GE(on_device[3].sequences.at(0).token_ids.size(), 8u);  // the biased stop id held back for 8 tokens ...
  EXPECT_EQ(on_device[3].sequences.at(0).finish, FinishReason::kStop);  // ... then taken
  const std::string& text = on_device[4].sequences.at(0).text;
  EXPECT_TRUE(text == "yes" || text == "no" || text == "maybe") << text;
}

// Prompt logprobs on the CUDA engine (reduced per prompt chunk where the logits are:
// Ops::logprob_rows + Ops::token_rank_rows on the device) against the CPU engine's, in plain
// numerics (logits within ~1e-3 of each other): two requests with prompt logprobs among plain
// ones, one prompt over several 96-token chunks, the steps planned ahead. Every position's
// logprob, top-5 values and rank agree within what such logits allow (a row taken from the wrong
// position or chunk would be off by whole nats and thousands of ranks), the top-5 ids wherever
// the CPU's entries are clearly apart; the generated tokens are the same.
TEST(CudaEngineTest, PromptLogprobsOnTheDeviceEqualTheCpuEngine) {
  if (!ops::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto run = [&](const char* device) {
    EngineOptions o;
    o.model = testing::synthetic_model_dir("tiny-v4f");
    o.device = device;
    o.numerics = "plain";
    o.max_num_batched_tokens = 96;  // the 230-token prompt in three chunks, beside the others
    o.kv_blocks = 64;
    auto opened = EngineOptions::with_environment(o);
    EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
    std::vector<GenerateOutput> outs;
    auto engine = engine::open_engine(*opened, engine::DebugOptions{});
    EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
    if (!engine.is_ok()) return outs;
    std::vector<Request> reqs(3);
    for (size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].prompt_ids = testing::random_ids(static_cast<int64_t>(60 + 85 * i), 300 + i, 128000);
      reqs[i].sampling.max_tokens = 4;
      reqs[i].sampling.ignore_eos = true;
    }
    reqs[0].sampling.prompt_logprobs = 5;
    reqs[2].sampling.prompt_logprobs = 5;
    auto r = (*engine)->generate(reqs);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (r.is_ok()) outs = *r;
    return outs;
  };
  const auto gpu = run("cuda"), cpu = run("cpu");
  ASSERT_EQ(gpu.size(), 3u);
  ASSERT_EQ(cpu.size(), 3u);
  EXPECT_TRUE(gpu[1].prompt_logprobs.empty());
  for (size_t i : {size_t{0}, size_t{2}}) {
    EXPECT_EQ(gpu[i].sequences.at(0).token_ids, cpu[i].sequences.at(0).token_ids) << "request " << i;
    const auto &g = gpu[i].prompt_logprobs, &c = cpu[i].prompt_logprobs;
    ASSERT_EQ(g.size(), static_cast<size_t>(60 + 85 * i - 1)) << "request " << i;
    ASSERT_EQ(c.size(), g.size());
    for (size_t t = 0; t < g.size(); ++t) {
      const std::string at = "request " + std::to_string(i) + " position " + std::to_string(t + 1);
      EXPECT_EQ(g[t].token, c[t].token) << at;
      EXPECT_NEAR(g[t].logprob, c[t].logprob, 5e-3) << at;
      EXPECT_LE(std::abs(g[t].rank - c[t].rank), 50 + c[t].rank / 100) << at << ": rank " << g[t].rank << " vs " << c[t].rank;
      ASSERT_EQ(g[t].top.size(), 5u) << at;
      ASSERT_EQ(c[t].top.size(), 5u) << at;
      for (size_t j = 0; j < 5; ++j) {
        EXPECT_NEAR(g[t].top[j].logprob, c[t].top[j].logprob, 5e-3) << at << " entry " << j;
        const bool apart = (j == 0 || c[t].top[j - 1].logprob - c[t].top[j].logprob > 1e-2f) &&
                           (j == 4 || c[t].top[j].logprob - c[t].top[j + 1].logprob > 1e-2f);
        if (apart) {
          EXPECT_EQ(g[t].top[j].token, c[t].top[j].token) << at << " entry " << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer
