// Runs tests/e2e/python_e2e_test.py with the system interpreter against the module in the build
// tree, on the tiny demo model (made sure to exist first, so Python never generates it).
#include "e2e_util.h"

namespace deepinfer {
namespace {

TEST(PythonE2eTest, UnittestSuitePasses) {
  const std::string cmd = "PYTHONPATH=" DI_BINARY_DIR "/python DI_TEST_MODEL=" + testing::tiny_model_dir() +
                          " /usr/bin/python3 " DI_SOURCE_DIR "/tests/e2e/python_e2e_test.py";
  const auto r = testing::run_shell(cmd, /*merge_stderr=*/true);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\nOK"), std::string::npos) << r.out;
}

TEST(PythonE2eTest, OfflineInferenceExampleRuns) {
  const std::string cmd = "PYTHONPATH=" DI_BINARY_DIR "/python /usr/bin/python3 " DI_SOURCE_DIR
                          "/examples/offline_inference.py --model " + testing::tiny_model_dir() + " --max-tokens 4";
  const auto r = testing::run_shell(cmd, /*merge_stderr=*/true);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Prompt:    'The capital of France is'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Chat answer:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace deepinfer
