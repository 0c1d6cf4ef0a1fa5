#include "base/status.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("value {} is not positive", x);
  return x;
}

Status twice(int x, int* out) {
  DI_ASSIGN_OR_RETURN(int v, parse_positive(x));
  *out = 2 * v;
  return Status::ok();
}

TEST(StatusTest, OkAndErrorCarryCodeAndMessage) {
  EXPECT_TRUE(Status::ok().is_ok());
  Status s = not_found("tensor {} missing", "embed.weight");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.to_string(), "NOT_FOUND: tensor embed.weight missing");
  EXPECT_EQ(s.with_context("model-00001.safetensors").message(),
            "model-00001.safetensors: tensor embed.weight missing");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(twice(3, &out).is_ok());
  EXPECT_EQ(out, 6);
  Status s = twice(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 6);
}

TEST(StatusTest, ResultFromOkStatusIsAnError) {
  Result<int> r{Status::ok()};
  EXPECT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace deepinfer
