// Errors at the engine's boundary: bad requests are rejected at submit with a Status naming the
// problem (and nothing is queued); bad options and models fail Engine::open with a message
// naming the option; environment variables: known ones applied, unknown ones warned about,
// malformed ones rejected naming the variable.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "engine/device_backend.h"
#include "engine_test_util.h"

namespace deepinfer {
namespace {

using testing::ids_request;
using testing::prompt_ids;

class EngineValidationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = testing::open_micro().release(); }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  // The error message of submitting `r` (empty if accepted).
  static Status submit(Request r) {
    auto id = engine_->submit(std::move(r), [](const TokenEvent&) {});
    return id.is_ok() ? Status::ok() : id.status();
  }
  static void expect_error(Request r, StatusCode code, const std::string& needle) {
    const Status s = submit(std::move(r));
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << "'" << s.message() << "' lacks '" << needle << "'";
  }
  static Engine* engine_;
};
Engine* EngineValidationTest::engine_ = nullptr;

TEST_F(EngineValidationTest, BadRequestsNameTheProblem) {
  ASSERT_NE(engine_, nullptr);
  expect_error(Request{}, StatusCode::kInvalidArgument, "prompt is empty");
  Request both = ids_request({1, 2}, 4, 1);
  both.prompt = "text";
  expect_error(both, StatusCode::kInvalidArgument, "both set");
  expect_error(ids_request({5, 512, 7}, 4, 1), StatusCode::kInvalidArgument, "prompt_ids[1] = 512");
  expect_error(ids_request({5, -1}, 4, 1), StatusCode::kInvalidArgument, "prompt_ids[1] = -1");
  expect_error(ids_request(prompt_ids(engine_->max_model_len(), 1), 4, 1), StatusCode::kInvalidArgument,
               "max_model_len");
  Request top_p = ids_request({1, 2}, 4, 1);
  top_p.sampling.top_p = 1.5f;
  expect_error(top_p, StatusCode::kInvalidArgument, "sampling: top_p = 1.5");
  Request n0 = ids_request({1, 2}, 4, 1);
  n0.sampling.n = 0;
  expect_error(n0, StatusCode::kInvalidArgument, "n = 0");
  Request bias = ids_request({1, 2}, 4, 1);
  bias.sampling.logit_bias[600] = 1.0f;
  expect_error(bias, StatusCode::kInvalidArgument, "logit_bias");
  Request temp = ids_request({1, 2}, 4, 1);
  temp.sampling.temperature = -1.0f;
  expect_error(temp, StatusCode::kInvalidArgument, "temperature");
  Request max0 = ids_request({1, 2}, 0, 1);
  expect_error(max0, StatusCode::kInvalidArgument, "max_tokens");
  Request plp = ids_request({1, 2}, 4, 1);
  plp.sampling.prompt_logprobs = -1;
  expect_error(plp, StatusCode::kInvalidArgument, "sampling: prompt_logprobs = -1 is outside [0, 20]");
  plp.sampling.prompt_logprobs = 21;
  expect_error(plp, StatusCode::kInvalidArgument, "sampling: prompt_logprobs = 21 is outside [0, 20]");
  auto no_sink = engine_->submit(ids_request({1, 2}, 4, 1), nullptr);
  ASSERT_FALSE(no_sink.is_ok());
  EXPECT_NE(no_sink.status().message().find("sink"), std::string::npos);
  EXPECT_EQ(engine::debug_snapshot(*engine_).n_live_requests, 0);
}

TEST_F(EngineValidationTest, TextPromptsAreTokenizedWithBos) {
  ASSERT_NE(engine_, nullptr);
  Request r;
  r.prompt = "Hi";  // ids of the real tokenizer exceed micro's 512-token vocabulary...
  const Status s = submit(r);
  const auto ids = engine_->tokenizer()->encode("Hi", true);
  const bool fits = std::all_of(ids.begin(), ids.end(), [](int32_t t) { return t < 512; });
  if (fits) {
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  } else {
    EXPECT_NE(s.message().find("outside the vocabulary [0, 512)"), std::string::npos) << s.to_string();
  }
  Request bos;
  bos.prompt = "<｜begin▁of▁sentence｜>";  // special-token text: BOS is matched, not doubled
  bos.sampling.max_tokens = 1;
  auto outs = engine_->generate({bos});
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  EXPECT_EQ((*outs)[0].prompt_ids, std::vector<int32_t>{engine_->tokenizer()->bos_id()});
}

TEST(EngineOpenTest, BadOptionsAndModelsNameTheOption) {
  auto expect_open_error = [](EngineOptions o, const std::string& needle) {
    auto e = Engine::open(o);
    ASSERT_FALSE(e.is_ok());
    EXPECT_NE(e.status().message().find(needle), std::string::npos) << e.status().to_string();
  };
  EngineOptions o = testing::micro_options();
  o.max_num_seqs = 0;
  expect_open_error(o, "max_num_seqs = 0");
  o = testing::micro_options();
  o.replay_mode = "fuzzy";
  expect_open_error(o, "replay_mode 'fuzzy'");
  o = testing::micro_options();
  o.block_tokens = 8;  // micro's largest compression ratio is 16
  expect_open_error(o, "block_tokens = 8");
  o = testing::micro_options();
  o.max_model_len = 2'000'000;
  expect_open_error(o, "max_position_embeddings");
  o = testing::micro_options();
  o.model = "no-such-org/no-such-model";
  expect_open_error(o, "Looked in");
  o = testing::micro_options();
  o.device = "tpu";
  expect_open_error(o, "device 'tpu'");
  o = testing::micro_options();
  o.snapshot_interval_tokens = 24;  // blocks of 16
  expect_open_error(o, "snapshot_interval_tokens = 24 must be a multiple of block_tokens = 16");
  o.snapshot_interval_tokens = -16;
  expect_open_error(o, "snapshot_interval_tokens");
  // auto: the engine names the backend it chose; V4.1 (CPU-only) and a machine without a GPU (CI)
  // get the CPU reference.
  EXPECT_EQ(EngineOptions{}.device, "auto");
  EXPECT_EQ(engine::resolve_device("auto", false), "cpu");
  EXPECT_EQ(engine::resolve_device("cpu", true), "cpu");
  EXPECT_EQ(engine::resolve_device("cuda", false), "cuda");
  for (const char* model : {"micro", "tiny-v41"}) {
    o = testing::micro_options();
    o.model = testing::synthetic_model_dir(model);
    o.block_tokens = 32;
    o.device = "auto";
    auto opened = engine::open_engine(o, {});
    ASSERT_TRUE(opened.is_ok()) << model << ": " << opened.status().to_string();
    EXPECT_EQ((*opened)->options().device, engine::resolve_device("auto", std::string(model) == "micro")) << model;
  }
  o = testing::micro_options();
  o.spec_verification = "typical";
  expect_open_error(o, "spec_verification 'typical' must be rejection or coupled");
}

TEST(EngineOptionsTest, EnvironmentVariables) {
  std::vector<std::string> warnings;
  auto o = EngineOptions::with_environment(
      EngineOptions{},
      {"DEEPINFER_ACCELERATOR=nvidia", "DEEPINFER_ENABLE_MTP_VARLEN=1",
       "DEEPINFER_USE_NEXTN_DECODE=5", "DEEPINFER_BATCH_INVARIANT=false",
       "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=none", "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS=140",
       "DEEPINFER_HF_MODEL_DIR=/models", "DEEPINFER_LOG_LEVEL=warn", "DEEPINFER_GEMV_STAGES=4",
       "DEEPINFER_GEMV_MAX_SPC=2", "DEEPINFER_GEMV_EXPERT_SPC=2", "DEEPINFER_GEMV_TRANSPOSED=0",
       "DEEPINFER_MOE_GROUP_SMALL=0", "DEEPINFER_GEMV_TR_MIN_NT=2", "DEEPINFER_GEMM_KERNEL=mma",
       "DEEPINFER_CUDA_PDL=0", "DEEPINFER_SPEC_VERIFICATION=Coupled", "DEEPINFER_TYPO=1", "PATH=/bin"},
      &warnings);
  ASSERT_TRUE(o.is_ok()) << o.status().to_string();
  EXPECT_EQ(o->device, "cuda");
  EXPECT_TRUE(o->mtp_varlen);
  EXPECT_EQ(o->nextn_decode, 5);
  EXPECT_FALSE(o->batch_invariant);
  EXPECT_EQ(o->yoco_prefill_mode, "none");
  EXPECT_EQ(o->yoco_keep_tokens, 140);
  EXPECT_EQ(o->log_level, "warn");
  EXPECT_EQ(o->spec_verification, "coupled");
  EXPECT_EQ(EngineOptions{}.spec_verification, "rejection");  // the design anchor's default
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("unknown environment variable DEEPINFER_TYPO"), std::string::npos);

  for (const auto& [bad, needle] : std::vector<std::pair<std::string, std::string>>{
           {"DEEPINFER_ENABLE_MTP_VARLEN=maybe", "DEEPINFER_ENABLE_MTP_VARLEN='maybe' is not a boolean"},
           {"DEEPINFER_USE_NEXTN_DECODE=-2", "DEEPINFER_USE_NEXTN_DECODE='-2'"},
           {"DEEPINFER_YOCO_PREFILL_KEEP_TOKENS=12x", "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS='12x'"},
           {"DEEPINFER_ACCELERATOR=ascend", "DEEPINFER_ACCELERATOR='ascend'"},
           {"DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=wide", "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE='wide'"},
           {"DEEPINFER_LOG_LEVEL=loud", "DEEPINFER_LOG_LEVEL='loud'"},
           {"DEEPINFER_SPEC_VERIFICATION=greedy", "DEEPINFER_SPEC_VERIFICATION='greedy' must be rejection or coupled"}}) {
    auto r = EngineOptions::with_environment(EngineOptions{}, {bad}, &warnings);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  }
}

// Every DEEPINFER_* name the sources read (a string literal in src/, apps/, include/ or python/)
// is one EngineOptions knows — setting it must not warn that it is ignored — and is documented
// (`NAME` in docs/*.md or the README). A new launch knob that skips the list or the docs fails here.
TEST(EngineOptionsTest, EveryVariableTheSourcesReadIsKnownAndDocumented) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(testing::fixture_path("x")).parent_path().parent_path().parent_path();
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  std::set<std::string> names;
  const std::regex literal("\"(DEEPINFER_[A-Z0-9_]+)\"");
  for (const char* dir : {"src", "apps", "include", "python"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cc" && ext != ".h" && ext != ".cu" && ext != ".cuh" && ext != ".py")) continue;
      const std::string text = read(e.path());
      for (std::sregex_iterator m(text.begin(), text.end(), literal), end; m != end; ++m) names.insert((*m)[1]);
    }
  }
  ASSERT_GT(names.size(), 30u) << "no sources found under " << root;
  std::string docs = read(root / "README.md");
  for (const auto& e : fs::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") docs += read(e.path());
  for (const std::string& name : names) {
    std::vector<std::string> warnings;
    auto r = EngineOptions::with_environment(EngineOptions{}, {name + "=1"}, &warnings);
    // A value a typed variable rejects still shows it is known (the error names it).
    if (!r.is_ok()) {
      EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().to_string();
    }
    for (const std::string& w : warnings) EXPECT_EQ(w.find("unknown environment variable"), std::string::npos) << w;
    EXPECT_NE(docs.find("`" + name + "`"), std::string::npos) << name << " is not documented";
  }
}

TEST(EngineOptionsTest, ProcessEnvironmentIsReadOnce) {
  ::setenv("DEEPINFER_USE_NEXTN_DECODE", "3", 1);
  auto o = EngineOptions::with_environment(EngineOptions{});
  ::unsetenv("DEEPINFER_USE_NEXTN_DECODE");
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->nextn_decode, 3);
  ::setenv("DEEPINFER_BATCH_INVARIANT", "sometimes", 1);
  auto bad = EngineOptions::with_environment(EngineOptions{});
  ::unsetenv("DEEPINFER_BATCH_INVARIANT");
  EXPECT_FALSE(bad.is_ok());
}

}  // namespace
}  // namespace deepinfer
