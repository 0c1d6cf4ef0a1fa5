// The CUDA launchers' environment knobs (src/kernels/common/env_knob.h) without a GPU: switches
// are on unless "0"; integers fall back when unset, not positive or outside the allowed set;
// three-way settings are automatic (-1) unless exactly "0" or "1".
#include "kernels/common/env_knob.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace deepinfer::kernels {
namespace {

constexpr const char* kName = "DEEPINFER_ENV_KNOB_TEST";

TEST(EnvKnobTest, SwitchIsOnUnlessZero) {
  unsetenv(kName);
  EXPECT_TRUE(env_switch(kName));
  setenv(kName, "0", 1);
  EXPECT_FALSE(env_switch(kName));
  setenv(kName, "1", 1);
  EXPECT_TRUE(env_switch(kName));
  setenv(kName, "00", 1);  // only the exact "0" turns a switch off
  EXPECT_TRUE(env_switch(kName));
  unsetenv(kName);
}

TEST(EnvKnobTest, IntegerFallsBackOutsideItsRange) {
  unsetenv(kName);
  EXPECT_EQ(env_int(kName, 3), 3);
  setenv(kName, "8", 1);
  EXPECT_EQ(env_int(kName, 3), 8);
  setenv(kName, "-2", 1);
  EXPECT_EQ(env_int(kName, 3), 3);
  setenv(kName, "junk", 1);
  EXPECT_EQ(env_int(kName, 3), 3);
  setenv(kName, "4", 1);
  EXPECT_EQ(env_int(kName, 3, {2, 3, 4, 6}), 4);
  setenv(kName, "5", 1);
  EXPECT_EQ(env_int(kName, 3, {2, 3, 4, 6}), 3);
  unsetenv(kName);
}

TEST(EnvKnobTest, TristateIsAutomaticUnlessExactlyZeroOrOne) {
  unsetenv(kName);
  EXPECT_EQ(env_tristate(kName), -1);
  setenv(kName, "0", 1);
  EXPECT_EQ(env_tristate(kName), 0);
  setenv(kName, "1", 1);
  EXPECT_EQ(env_tristate(kName), 1);
  setenv(kName, "01", 1);
  EXPECT_EQ(env_tristate(kName), -1);
  setenv(kName, "auto", 1);
  EXPECT_EQ(env_tristate(kName), -1);
  unsetenv(kName);
}

}  // namespace
}  // namespace deepinfer::kernels
