// SamplingParams::validate: every rejected field is named with its allowed range, and the
// documented edge values are accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "deepinfer/sampling.h"

namespace deepinfer {
namespace {

// Expects validate(n_vocab) to fail with INVALID_ARGUMENT and a message containing every
// fragment (field name, value, range).
void expect_invalid(const std::function<void(SamplingParams&)>& edit,
                    std::initializer_list<std::string> fragments, int32_t n_vocab = 1000) {
  SamplingParams p;
  edit(p);
  const Status s = p.validate(n_vocab);
  ASSERT_FALSE(s.is_ok()) << "expected an error mentioning " << *fragments.begin();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (const auto& f : fragments) EXPECT_NE(s.message().find(f), std::string::npos) << s.message();
}

TEST(SamplingParamsTest, DefaultsAreValid) {
  SamplingParams p;
  EXPECT_TRUE(p.validate().is_ok());
  EXPECT_TRUE(p.validate(129280).is_ok());
  EXPECT_FALSE(p.is_greedy());
}

TEST(SamplingParamsTest, EdgeValuesAreAccepted) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.repetition_penalty = 1e-3f;
  p.logit_bias = {{0, -100.0f}, {999, 100.0f}};
  p.logprobs = 20;
  p.prompt_logprobs = 0;
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.n = kMaxSamplesPerRequest;
  p.stop = {"\n\n", "。", "🛑"};
  p.stop_token_ids = {0, 999};
  p.allowed_token_ids = {5, 6};
  EXPECT_TRUE(p.validate(1000).is_ok()) << p.validate(1000).to_string();
  EXPECT_TRUE(p.is_greedy());
  p.top_k = -1;
  EXPECT_TRUE(p.validate(1000).is_ok());
}

TEST(SamplingParamsTest, DistributionFieldsNameTheirRange) {
  expect_invalid([](auto& p) { p.temperature = -0.5f; }, {"temperature", "-0.5", ">= 0"});
  expect_invalid([](auto& p) { p.temperature = NAN; }, {"temperature"});
  expect_invalid([](auto& p) { p.temperature = INFINITY; }, {"temperature", "finite"});
  expect_invalid([](auto& p) { p.top_p = 0.0f; }, {"top_p", "(0, 1]"});
  expect_invalid([](auto& p) { p.top_p = 1.5f; }, {"top_p", "1.5", "(0, 1]"});
  expect_invalid([](auto& p) { p.top_p = NAN; }, {"top_p"});
  expect_invalid([](auto& p) { p.top_k = -2; }, {"top_k", "-2", "-1 or 0"});
  expect_invalid([](auto& p) { p.min_p = -0.1f; }, {"min_p", "[0, 1]"});
  expect_invalid([](auto& p) { p.min_p = 1.01f; }, {"min_p", "[0, 1]"});
  expect_invalid([](auto& p) { p.repetition_penalty = 0.0f; }, {"repetition_penalty", "> 0"});
  expect_invalid([](auto& p) { p.presence_penalty = 2.5f; }, {"presence_penalty", "[-2, 2]"});
  expect_invalid([](auto& p) { p.frequency_penalty = -3.0f; }, {"frequency_penalty", "[-2, 2]"});
  expect_invalid([](auto& p) { p.frequency_penalty = NAN; }, {"frequency_penalty"});
  expect_invalid([](auto& p) { p.logit_bias[3] = 100.5f; }, {"logit_bias[3]", "[-100, 100]"});
}

TEST(SamplingParamsTest, CountFieldsNameTheirRange) {
  expect_invalid([](auto& p) { p.n = 0; }, {"n = 0", "[1, 128]"});
  expect_invalid([](auto& p) { p.n = 129; }, {"n = 129"});
  expect_invalid([](auto& p) { p.max_tokens = 0; }, {"max_tokens = 0", ">= 1"});
  expect_invalid([](auto& p) { p.min_tokens = -1; }, {"min_tokens = -1", ">= 0"});
  expect_invalid([](auto& p) { p.min_tokens = 5, p.max_tokens = 4; },
                 {"min_tokens = 5", "max_tokens = 4"});
  expect_invalid([](auto& p) { p.logprobs = 21; }, {"logprobs = 21", "[0, 20]"});
  expect_invalid([](auto& p) { p.logprobs = -1; }, {"logprobs = -1"});
  expect_invalid([](auto& p) { p.prompt_logprobs = 21; }, {"prompt_logprobs = 21", "[0, 20]"});
}

TEST(SamplingParamsTest, TokenIdsAreCheckedAgainstTheVocabulary) {
  expect_invalid([](auto& p) { p.logit_bias[1000] = 1.0f; },
                 {"logit_bias token id 1000", "[0, 1000)"});
  expect_invalid([](auto& p) { p.logit_bias[-1] = 1.0f; }, {"logit_bias token id -1", "negative"});
  expect_invalid([](auto& p) { p.stop_token_ids = {1, 1000}; },
                 {"stop_token_ids[1] = 1000", "[0, 1000)"});
  expect_invalid([](auto& p) { p.allowed_token_ids = {-3}; },
                 {"allowed_token_ids[0] = -3", "negative"});
  SamplingParams p;
  p.logit_bias[5000] = 1.0f;
  EXPECT_TRUE(p.validate().is_ok());  // no vocabulary known: only the sign is checked
  EXPECT_FALSE(p.validate(4096).is_ok());
  EXPECT_FALSE(SamplingParams().validate(0).is_ok());
}

TEST(SamplingParamsTest, StopStringsMustBeNonEmptyUtf8) {
  expect_invalid([](auto& p) { p.stop = {"ok", ""}; }, {"stop[1]", "empty"});
  expect_invalid([](auto& p) { p.stop = {"\xE3\x80"}; }, {"stop[0]", "UTF-8"});     // truncated
  expect_invalid([](auto& p) { p.stop = {"\xC0\xAF"}; }, {"stop[0]", "UTF-8"});     // overlong
  expect_invalid([](auto& p) { p.stop = {"\xED\xA0\x80"}; }, {"stop[0]", "UTF-8"}); // surrogate
  expect_invalid([](auto& p) { p.stop = {"a\x80"}; }, {"stop[0]", "UTF-8"});
}

}  // namespace
}  // namespace deepinfer
