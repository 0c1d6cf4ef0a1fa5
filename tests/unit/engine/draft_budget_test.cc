// Confidence-scheduled verification's budget (draft_budget.h): the step-cost fit, and which drafts
// a step verifies — every one while the cost is unknown or flat, the tokens-per-second optimum
// otherwise, always prefix-closed per request and above the survival floor.
#include "engine/draft_budget.h"

#include <gtest/gtest.h>

namespace deepinfer::engine {
namespace {

StepCostModel line(double a, double b) {
  StepCostModel m;
  for (int64_t t : {4, 8, 16, 32, 12, 20}) m.observe(t, a + b * static_cast<double>(t));
  return m;
}

TEST(StepCostModelTest, RecoversALineAndNeedsTwoSizes) {
  StepCostModel one;
  for (int i = 0; i < 5; ++i) one.observe(8, 0.02);
  EXPECT_FALSE(one.fitted());
  EXPECT_DOUBLE_EQ(one.intercept(), 0.02);
  EXPECT_EQ(one.slope(), 0.0);
  const StepCostModel m = line(0.010, 0.0005);
  ASSERT_TRUE(m.fitted());
  EXPECT_NEAR(m.intercept(), 0.010, 1e-9);
  EXPECT_NEAR(m.slope(), 0.0005, 1e-12);
  EXPECT_NEAR(m.predict(100), 0.060, 1e-9);
  // Ignored: nothing, negative or non-finite times.
  StepCostModel n = m;
  n.observe(0, 1.0);
  n.observe(8, -1.0);
  EXPECT_NEAR(n.predict(100), 0.060, 1e-9);
}

TEST(StepCostModelTest, FollowsAChangedCost) {
  StepCostModel m = line(0.010, 0.0005);
  for (int i = 0; i < 200; ++i) m.observe(4 + (i % 8) * 4, 0.002 + 0.002 * (4 + (i % 8) * 4));
  EXPECT_NEAR(m.slope(), 0.002, 1e-5);
  EXPECT_NEAR(m.intercept(), 0.002, 1e-4);
}

TEST(DraftBudgetTest, EveryDraftWhileTheCostIsUnknownOrFlat) {
  const std::vector<std::vector<double>> s = {{0.9, 0.5, 0.1}, {0.3}, {}};
  EXPECT_EQ(draft_budget(s, 3, StepCostModel{}, 0.0), (std::vector<int32_t>{3, 1, 0}));
  EXPECT_EQ(draft_budget(s, 3, line(0.01, 0.0), 0.0), (std::vector<int32_t>{3, 1, 0}));
  // The floor cuts each request's list where its survival falls below it.
  EXPECT_EQ(draft_budget(s, 3, StepCostModel{}, 0.4), (std::vector<int32_t>{2, 0, 0}));
}

TEST(DraftBudgetTest, AFixedCostBuysEveryLikelyDraft) {
  // GPU-like: 10 ms a step, 5 us a token: a draft pays for itself at any survival above ~0.001.
  const std::vector<std::vector<double>> s = {{0.9, 0.6, 0.3, 0.05}, {0.7, 0.2}};
  EXPECT_EQ(draft_budget(s, 2, line(0.010, 0.000005), 0.0), (std::vector<int32_t>{4, 2}));
}

TEST(DraftBudgetTest, ATokenBoundCostTakesOnlyTheBestSlotsGlobally) {
  // Cost 2 + T, base 2: rate(0) = 2 / 4 = 0.5 token per unit; a slot raises the rate while its
  // survival beats the rate so far: 0.95, 0.9 and 0.8 do (0.59, 0.64, 0.66), 0.2 and 0.1 do not.
  const std::vector<std::vector<double>> s = {{0.9, 0.8, 0.1}, {0.95, 0.2}};
  EXPECT_EQ(draft_budget(s, 2, line(2.0, 1.0), 0.0), (std::vector<int32_t>{2, 1}));
  // Pure per-token cost: nothing beats the one token every request emits anyway.
  EXPECT_EQ(draft_budget(s, 2, line(0.0, 1.0), 0.0), (std::vector<int32_t>{0, 0}));
}

TEST(DraftBudgetTest, EqualSurvivalsStayPrefixClosed) {
  const std::vector<std::vector<double>> s = {{0.5, 0.5, 0.5}, {0.5, 0.5}};
  // Cost 6 + T, base 2: rate(B) = (2 + 0.5 B) / (8 + B) rises with B: every slot; cost 1 + T: it
  // falls: none. Equal survivals are admitted in request order, each request's in order.
  EXPECT_EQ(draft_budget(s, 2, line(6.0, 1.0), 0.0), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(draft_budget(s, 2, line(1.0, 1.0), 0.0), (std::vector<int32_t>{0, 0}));
}

}  // namespace
}  // namespace deepinfer::engine
