// The decode GEMMs' L2 prefetch plan (src/ops/l2_prefetch_chain.h) without a GPU: a launch
// prefetches the next `budget` bytes of the weights its recorded successors read, never what an
// earlier launch of the chain already issued, never across an expert launch, and starts afresh
// when the launches come out of order.
#include "ops/l2_prefetch_chain.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer::ops {
namespace {

using Span = L2PrefetchChain::Span;

// Fake weights: distinct 16-byte aligned addresses (never dereferenced).
alignas(16) uint8_t g_arena[1 << 12];
const uint8_t* at(int64_t offset) { return g_arena + offset; }

struct Launch {
  const uint8_t* w;
  int64_t bytes;
  bool barrier = false;
};

// One pass over `seq`: every launch's plan.
std::vector<L2PrefetchChain::Plan> pass(L2PrefetchChain& chain, const std::vector<Launch>& seq) {
  std::vector<L2PrefetchChain::Plan> plans;
  for (const Launch& l : seq) {
    const Span read{l.w, l.bytes};
    plans.push_back(chain.on_launch(
        l.w, l.barrier ? std::span<const Span>{} : std::span<const Span>(&read, 1), l.barrier));
  }
  return plans;
}

void expect_spans(const L2PrefetchChain::Plan& p, const std::vector<Span>& want) {
  ASSERT_EQ(p.n, static_cast<int>(want.size()));
  for (int i = 0; i < p.n; ++i) {
    EXPECT_EQ(p.spans[i].ptr, want[i].ptr) << "span " << i;
    EXPECT_EQ(p.spans[i].bytes, want[i].bytes) << "span " << i;
  }
}

TEST(L2PrefetchChainTest, TheFirstPassPlansNothingTheSecondPrefetchesAheadOnce) {
  L2PrefetchChain chain(256);
  // Four projections of 128, 64, 512 and 96 bytes.
  const std::vector<Launch> seq = {{at(0), 128}, {at(1024), 64}, {at(2048), 512}, {at(3072), 96}};
  for (const auto& p : pass(chain, seq)) EXPECT_EQ(p.n, 0);  // nothing recorded yet
  const auto plans = pass(chain, seq);
  // Launch 0: the next 256 bytes — launch 1's 64 and the first 192 of launch 2's.
  expect_spans(plans[0], {{at(1024), 64}, {at(2048), 192}});
  // Launch 1: its window (launch 2's 512, then launch 3's) up to 256; the first 192 are issued.
  expect_spans(plans[1], {{at(2048 + 192), 64}});
  // Launch 2: launch 3's 96, then the wrap to the next pass's launch 0 (128) and launch 1's
  // first 32.
  expect_spans(plans[2], {{at(3072), 96}, {at(0), 128}, {at(1024), 32}});
  // Launch 3: the window starts at launch 0 of the next pass: 0..224 done, then the rest.
  expect_spans(plans[3], {{at(1024 + 32), 32}, {at(2048), 64}});
  // In steady state no byte is issued twice in a pass; launch 2's last 256 bytes lie beyond every
  // window (a weight larger than the budget is prefetched in its first `budget` bytes only).
  const auto again = pass(chain, seq);
  int64_t total = 0;
  for (const auto& p : again) total += p.bytes();
  EXPECT_EQ(total, 128 + 64 + 256 + 96);
}

TEST(L2PrefetchChainTest, ExpertLaunchesEndTheWindowsBeforeThem) {
  L2PrefetchChain chain(1024);
  const std::vector<Launch> seq = {
      {at(0), 64}, {at(64), 64}, {at(2048), 0, true}, {at(2064), 0, true}, {at(128), 256}};
  pass(chain, seq);
  const auto plans = pass(chain, seq);
  expect_spans(plans[0], {{at(64), 64}});  // stops at the gate / up expert launch
  EXPECT_EQ(plans[1].n, 0);
  EXPECT_EQ(plans[2].n, 0);  // the down launch follows: a barrier too
  expect_spans(plans[3],
               {{at(128), 256}, {at(0), 64}, {at(64), 64}});  // after it, up to the next barrier
  EXPECT_EQ(plans[4].n, 0);                                   // launch 3 covered it all
}

TEST(L2PrefetchChainTest, AnOutOfOrderLaunchStartsAfresh) {
  L2PrefetchChain chain(128);
  const std::vector<Launch> seq = {{at(0), 64}, {at(64), 64}, {at(128), 64}, {at(192), 64}};
  pass(chain, seq);
  pass(chain, seq);
  // Launch 0 then launch 2 (launch 1 skipped): launch 2 cannot count on launch 0's window.
  chain.on_launch(at(0), std::vector<Span>{{at(0), 64}});
  const auto p = chain.on_launch(at(128), std::vector<Span>{{at(128), 64}});
  expect_spans(p, {{at(192), 64}, {at(0), 64}});
  // The skip is now the recorded order: launch 0's successor is launch 2, whose successor is now
  // launch 0 itself (the walk ends there).
  const auto q = chain.on_launch(at(0), std::vector<Span>{{at(0), 64}});
  expect_spans(q, {{at(128), 64}});
}

TEST(L2PrefetchChainTest, UnalignedOrEmptyWeightsAreSkippedAndSizesRoundDown) {
  L2PrefetchChain chain(1000);  // budget rounds down to 992
  EXPECT_EQ(chain.budget(), 992);
  const std::vector<Launch> seq = {{at(0), 64}, {at(65), 64}, {at(256), 100}, {at(512), 0}};
  pass(chain, seq);
  const auto plans = pass(chain, seq);
  expect_spans(plans[0],
               {{at(256), 96}});  // launch 1's weight is unaligned, launch 3 reads nothing
}

TEST(L2PrefetchChainTest, NoBudgetPlansNothingAndTheKeySetIsBounded) {
  L2PrefetchChain off(0);
  const std::vector<Launch> seq = {{at(0), 64}, {at(64), 64}};
  pass(off, seq);
  for (const auto& p : pass(off, seq)) EXPECT_EQ(p.n, 0);

  L2PrefetchChain small(64, /*max_entries=*/4);
  for (int i = 0; i < 40; ++i) small.on_launch(at(16 * i), std::vector<Span>{{at(16 * i), 16}});
  EXPECT_LE(small.size(), 4u);
}

TEST(L2PrefetchChainTest, AtMostKMaxSpansPiecesAndTheRestIsLeftToTheNextLaunch) {
  L2PrefetchChain chain(4096);
  std::vector<Launch> seq;
  for (int i = 0; i < 8; ++i) seq.push_back({at(256 * i), 32});
  pass(chain, seq);
  const auto plans = pass(chain, seq);
  ASSERT_EQ(plans[0].n, L2PrefetchChain::kMaxSpans);
  EXPECT_EQ(plans[0].spans[0].ptr, at(256));
  EXPECT_EQ(plans[0].spans[3].ptr, at(1024));
  // Launch 1 goes on where launch 0 stopped.
  EXPECT_EQ(plans[1].spans[0].ptr, at(1280));
}

}  // namespace
}  // namespace deepinfer::ops
