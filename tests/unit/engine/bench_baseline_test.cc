// attach_baseline: the transformers rows embedded in a bench result and the per-row ratio.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/bench_baseline.h"

namespace deepinfer::engine {
namespace {

using json = nlohmann::json;

json bench_result() {
  return json{{"rows",
               json::array({json{{"kind", "decode"}, {"batch", 1}, {"context", 4096}, {"tokens_per_s", 800.0}},
                            json{{"kind", "decode"}, {"batch", 8}, {"context", 4096}, {"tokens_per_s", 3600.0}},
                            json{{"kind", "decode"}, {"batch", 1}, {"context", 32768}, {"tokens_per_s", 780.0}},
                            json{{"kind", "prefill"}, {"batch", 1}, {"context", 8192}, {"tokens_per_s", 82000.0}},
                            json{{"kind", "decode"}, {"batch", 512}, {"context", 131072}, {"skipped", "kv"}}})}};
}

TEST(BenchBaseline, MatchingRowsGetTheRatio) {
  json result = bench_result();
  const char* base = R"({"engine": "transformers 5.17.0", "rows": [
      {"kind": "decode", "batch": 1, "context": 4096, "tokens_per_s": 25.0},
      {"kind": "decode", "batch": 8, "context": 4096, "skipped": "out of memory"},
      {"kind": "prefill", "batch": 1, "context": 8192, "tokens_per_s": 14000.0},
      {"kind": "decode", "batch": 512, "context": 131072, "tokens_per_s": 10.0}]})";
  ASSERT_TRUE(attach_baseline(result, base).is_ok());
  const json& rows = result["rows"];
  EXPECT_DOUBLE_EQ(rows[0]["vs_baseline"].get<double>(), 32.0);
  EXPECT_DOUBLE_EQ(rows[0]["baseline_tokens_per_s"].get<double>(), 25.0);
  EXPECT_FALSE(rows[1].contains("vs_baseline"));  // the baseline skipped batch 8
  EXPECT_FALSE(rows[2].contains("vs_baseline"));  // no baseline at 32K (context must match too)
  EXPECT_NEAR(rows[3]["vs_baseline"].get<double>(), 82000.0 / 14000.0, 1e-12);  // prefill vs prefill
  EXPECT_FALSE(rows[4].contains("vs_baseline"));  // our row was skipped
  EXPECT_EQ(result["baseline"]["engine"], "transformers 5.17.0");
  EXPECT_EQ(result["baseline"]["rows"].size(), 4u);
}

TEST(BenchBaseline, MalformedBaselineIsAnErrorAndChangesNothing) {
  for (const char* bad : {"{not json", "[1, 2]", R"({"rows": {}})", R"({"rows": [1]})", R"({"engine": "x"})"}) {
    json result = bench_result();
    const json before = result;
    const Status st = attach_baseline(result, bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("baseline"), std::string::npos) << st.message();
    EXPECT_EQ(result, before) << bad;
  }
}

}  // namespace
}  // namespace deepinfer::engine
