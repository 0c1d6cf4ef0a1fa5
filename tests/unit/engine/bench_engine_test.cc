// `deepinfer bench-engine` (run_engine_benchmark) on the micro model, CPU: every request generates
// exactly output_len tokens, the rows' figures are consistent with each other (phases sum to the
// step, greedy steps are the argmax's, sampled ones the host sampler's), and bad options are
// refused by name. The speeds themselves are GPU figures (bench/results), never asserted here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "deepinfer/bench.h"
#include "engine_test_util.h"

namespace deepinfer {
namespace {

EngineBenchOptions micro_bench() {
  EngineBenchOptions o;
  o.model = testing::synthetic_model_dir("micro");
  o.device = "cpu";
  o.concurrency = {1, 3};
  o.input_len = 7;
  o.output_len = 4;
  return o;
}

TEST(BenchEngineTest, RowsAreConsistent) {
  auto out = run_engine_benchmark(micro_bench());
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  const auto j = nlohmann::json::parse(*out);
  ASSERT_EQ(j["rows"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& r = j["rows"][i];
    SCOPED_TRACE(r.dump());
    EXPECT_EQ(r["concurrency"].get<int>(), i == 0 ? 1 : 3);
    const double wall = r["wall_s"].get<double>(), step_ms = r["step_ms"].get<double>();
    EXPECT_GT(wall, 0.0);
    EXPECT_NEAR(r["output_tokens_per_s"].get<double>(), r["concurrency"].get<int>() * 4 / wall, 1e-6);
    // One step for the prompts (they fit one step together), then one per further token.
    EXPECT_GE(r["steps"].get<int>(), 4);
    EXPECT_EQ(r["argmax_steps"], r["steps"]);  // greedy: every step sampled by the argmax
    EXPECT_EQ(r["device_sampled_steps"], r["steps"]);
    double phases = 0;
    for (const auto& [name, ms] : r["phase_ms_per_step"].items()) {
      EXPECT_GE(ms.get<double>(), 0.0) << name;
      phases += ms.get<double>();
    }
    EXPECT_NEAR(phases, step_ms, 1e-9 + 1e-9 * step_ms);
    EXPECT_NEAR(r["host_ms_per_step"].get<double>(), step_ms - r["phase_ms_per_step"]["forward"].get<double>(),
                1e-9 + 1e-9 * step_ms);
    EXPECT_GT(r["phase_ms_per_step"]["forward"].get<double>(), 0.0);
    EXPECT_LE(r["step_time_share"].get<double>(), 1.0);
    EXPECT_LE(r["ttft_ms_p50"].get<double>(), r["ttft_ms_max"].get<double>());
    EXPECT_LE(r["ttft_ms_max"].get<double>(), wall * 1e3);
  }
}

// Temperature rows, top-p and raw logprobs included, are sampled where the logits are
// (Ops::sample_rows, Ops::logprob_rows); --host-sampling sends every step to the host sampler.
TEST(BenchEngineTest, SampledRowsTakeTheDevicePathUnlessHostSampling) {
  EngineBenchOptions o = micro_bench();
  o.concurrency = {2};
  o.temperature = 0.8;
  auto out = run_engine_benchmark(o);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  auto r = nlohmann::json::parse(*out)["rows"][0];
  EXPECT_EQ(r["argmax_steps"].get<int>(), 0);
  EXPECT_GE(r["steps"].get<int>(), 4);
  EXPECT_EQ(r["device_sampled_steps"], r["steps"]);
  o.top_p = 0.9;
  out = run_engine_benchmark(o);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  r = nlohmann::json::parse(*out)["rows"][0];
  EXPECT_EQ(r["device_sampled_steps"], r["steps"]);
  EXPECT_EQ(r["top_p"].get<double>(), 0.9);
  o.logprobs = 2;
  out = run_engine_benchmark(o);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  r = nlohmann::json::parse(*out)["rows"][0];
  EXPECT_EQ(r["device_sampled_steps"], r["steps"]);
  EXPECT_EQ(r["logprobs"].get<int>(), 2);
  o.repetition_penalty = 1.2;  // steps 1-4 on the device too (Ops::adjust_logits)
  o.frequency_penalty = 0.5;
  out = run_engine_benchmark(o);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  r = nlohmann::json::parse(*out)["rows"][0];
  EXPECT_EQ(r["device_sampled_steps"], r["steps"]);
  EXPECT_EQ(r["repetition_penalty"].get<double>(), 1.2);
  o.host_sampling = true;
  out = run_engine_benchmark(o);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  r = nlohmann::json::parse(*out)["rows"][0];
  EXPECT_EQ(r["device_sampled_steps"].get<int>(), 0);
  EXPECT_TRUE(r["host_sampling"].get<bool>());
}

// --regex: every request is constrained (a grammar mask per row and step, sampled on the device);
// requests end where the grammar does, and the rows count the tokens generated. tiny-v4f: the
// grammar needs the real vocabulary's strings.
TEST(BenchEngineTest, RegexRowsAreConstrainedAndCountTheirTokens) {
  EngineBenchOptions o = micro_bench();
  o.model = testing::synthetic_model_dir("tiny-v4f");
  o.concurrency = {2};
  o.output_len = 10;
  o.regex = "(yes|no|maybe)";
  auto out = run_engine_benchmark(o);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  const auto r = nlohmann::json::parse(*out)["rows"][0];
  SCOPED_TRACE(r.dump());
  EXPECT_EQ(r["regex"].get<std::string>(), "(yes|no|maybe)");
  const double tokens = r["output_tokens"].get<double>();
  EXPECT_GE(tokens, 2.0);   // at least one token each
  // At most "maybe" a character a token and EOS each: the grammar ended both before output_len
  // (without the regex they would make 20).
  EXPECT_LE(tokens, 12.0);
  EXPECT_NEAR(r["output_tokens_per_s"].get<double>(), tokens / r["wall_s"].get<double>(), 1e-6);
  // Every step sampled on the device, but the one planned ahead of the grammar's stop, whose rows
  // all ended before it was taken in (nothing of it is sampled for anyone).
  EXPECT_GE(r["device_sampled_steps"].get<int>(), r["steps"].get<int>() - 1);
  EXPECT_GE(r["steps_ahead"].get<int>(), 1);
}

TEST(BenchEngineTest, BadOptionsAreNamed) {
  auto expect_error = [](EngineBenchOptions o, const std::string& flag) {
    auto out = run_engine_benchmark(o);
    ASSERT_FALSE(out.is_ok()) << flag;
    EXPECT_NE(out.status().message().find(flag), std::string::npos) << out.status().to_string();
  };
  EngineBenchOptions o = micro_bench();
  o.concurrency = {1, 0};
  expect_error(o, "--concurrency");
  o = micro_bench();
  o.concurrency.clear();
  expect_error(o, "--concurrency");
  o = micro_bench();
  o.repetition_penalty = 0.0;
  expect_error(o, "--repetition-penalty");
  o = micro_bench();
  o.frequency_penalty = 3.0;
  expect_error(o, "--frequency-penalty");
  o = micro_bench();
  o.output_len = 0;
  expect_error(o, "--output-len");
  o = micro_bench();
  o.input_len = -3;
  expect_error(o, "--input-len");
  o = micro_bench();
  o.temperature = -1;
  expect_error(o, "--temperature");
  o = micro_bench();
  o.top_p = 0;
  expect_error(o, "--top-p");
  o = micro_bench();
  o.logprobs = 21;
  expect_error(o, "--logprobs");
  o = micro_bench();
  o.model = "/nonexistent/model/dir";
  expect_error(o, "/nonexistent/model/dir");
}

// --nextn-decode: each row counts the drafts verified and accepted (the micro model's MTP block).
TEST(BenchEngineTest, SpeculativeRowsCountTheirDrafts) {
  EngineBenchOptions o = micro_bench();
  o.concurrency = {2};
  o.output_len = 9;
  o.nextn_decode = 2;
  auto out = run_engine_benchmark(o);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  const auto r = nlohmann::json::parse(*out)["rows"][0];
  SCOPED_TRACE(r.dump());
  EXPECT_EQ(r["nextn_decode"].get<int>(), 2);
  EXPECT_EQ(r["output_tokens"].get<double>(), 18.0);
  EXPECT_GT(r["draft_rows"].get<int>(), 0);
  EXPECT_LE(r["draft_tokens"].get<int>(), 2 * r["draft_rows"].get<int>());
  EXPECT_LE(r["accepted_draft_tokens"].get<int>(), r["draft_tokens"].get<int>());
  EXPECT_EQ(r["spec_verification"].get<std::string>(), "rejection");
  o.spec_verification = "coupled";
  auto coupled = run_engine_benchmark(o);
  ASSERT_TRUE(coupled.is_ok()) << coupled.status().to_string();
  EXPECT_EQ(nlohmann::json::parse(*coupled)["rows"][0]["spec_verification"].get<std::string>(), "coupled");
  o.spec_verification = "typical";
  EXPECT_FALSE(run_engine_benchmark(o).is_ok());
  o.spec_verification = "rejection";
  o.nextn_decode = -1;
  EXPECT_FALSE(run_engine_benchmark(o).is_ok());
}

// EngineStats::step_times: every phase of a step is timed, forward included.
TEST(BenchEngineTest, EngineStatsTimeTheStepPhases) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  (void)testing::generate_tokens(*engine, {testing::ids_request(testing::prompt_ids(11, 3), 5, std::nullopt, 0.0f)});
  const EngineStats s = engine->stats();
  EXPECT_GE(s.n_steps, 5);
  EXPECT_GT(s.step_times.forward_s, 0.0);
  EXPECT_GT(s.step_times.schedule_s, 0.0);
  EXPECT_GT(s.step_times.sample_s, 0.0);
  EXPECT_GT(s.step_times.emit_s, 0.0);
  EXPECT_GT(s.step_times.total_s(), s.step_times.forward_s);
}

}  // namespace
}  // namespace deepinfer
