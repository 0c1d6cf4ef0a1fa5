// summarize_timeline (engine/kernel_timeline.h): the busy time is the union of the kernels'
// intervals, the idle time what is left of the span, and the gaps name the kernels around them —
// with overlapping kernels (PDL, side streams), nested ones and spans in any order.
#include "engine/kernel_timeline.h"

#include <gtest/gtest.h>

namespace deepinfer::engine {
namespace {

KernelSpan span(const char* name, uint64_t start_us, uint64_t end_us) {
  return {name, start_us * 1000, end_us * 1000, 7, 1};
}

TEST(KernelTimelineTest, EmptyStepHasNothing) {
  const TimelineSummary s = summarize_timeline({}, 4);
  EXPECT_EQ(s.kernels, 0);
  EXPECT_EQ(s.span_us, 0);
  EXPECT_TRUE(s.largest_gaps.empty());
}

TEST(KernelTimelineTest, BackToBackKernelsAreNeverIdle) {
  const TimelineSummary s = summarize_timeline({span("a", 10, 15), span("b", 15, 20), span("c", 20, 30)}, 4);
  EXPECT_EQ(s.kernels, 3);
  EXPECT_DOUBLE_EQ(s.span_us, 20);
  EXPECT_DOUBLE_EQ(s.busy_us, 20);
  EXPECT_DOUBLE_EQ(s.idle_us, 0);
  EXPECT_DOUBLE_EQ(s.kernel_sum_us, 20);
  EXPECT_TRUE(s.largest_gaps.empty());
}

TEST(KernelTimelineTest, OverlapsCountOnceAndGapsNameTheirNeighbours) {
  // a [0, 10), b overlaps it [8, 14) (a dependent launch started early), c nested in b [9, 12),
  // idle [14, 17), d [17, 20), idle [20, 30), e [30, 31); given out of order.
  const TimelineSummary s = summarize_timeline(
      {span("e", 30, 31), span("c", 9, 12), span("a", 0, 10), span("d", 17, 20), span("b", 8, 14)}, 1);
  EXPECT_EQ(s.kernels, 5);
  EXPECT_DOUBLE_EQ(s.span_us, 31);
  EXPECT_DOUBLE_EQ(s.busy_us, 14 + 3 + 1);
  EXPECT_DOUBLE_EQ(s.idle_us, 3 + 10);
  EXPECT_DOUBLE_EQ(s.kernel_sum_us, 10 + 6 + 3 + 3 + 1);
  ASSERT_EQ(s.largest_gaps.size(), 1u);  // top 1 of the two gaps
  EXPECT_DOUBLE_EQ(s.largest_gaps[0].us, 10);
  EXPECT_DOUBLE_EQ(s.largest_gaps[0].at_us, 20);
  EXPECT_EQ(s.largest_gaps[0].before, "d");
  EXPECT_EQ(s.largest_gaps[0].after, "e");
}

TEST(KernelTimelineTest, TheGapFollowsTheKernelThatEndedLast) {
  // b starts inside a but ends after it: the gap after them is b's.
  const TimelineSummary s = summarize_timeline({span("a", 0, 10), span("b", 5, 12), span("c", 20, 21)}, 4);
  ASSERT_EQ(s.largest_gaps.size(), 1u);
  EXPECT_EQ(s.largest_gaps[0].before, "b");
  EXPECT_DOUBLE_EQ(s.largest_gaps[0].us, 8);
}

}  // namespace
}  // namespace deepinfer::engine
