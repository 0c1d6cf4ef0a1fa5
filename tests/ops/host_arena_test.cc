// HostArena (the CPU backend's workspace): zeroed, aligned, reused after a release to a mark,
// merged into one mapping at reset, unmapped by release_memory.
#include "ops/cpu/host_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace deepinfer::ops::cpu {
namespace {

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != 0) return false;
  return true;
}

TEST(HostArenaTest, AllocationsAreAlignedZeroedAndDisjoint) {
  HostArena arena;
  auto* a = static_cast<uint8_t*>(arena.allocate(3));
  auto* b = static_cast<uint8_t*>(arena.allocate(1000));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  EXPECT_GE(b, a + 3);
  EXPECT_TRUE(all_zero(a, 3));
  EXPECT_TRUE(all_zero(b, 1000));
  std::memset(a, 0xff, 3);
  std::memset(b, 0xff, 1000);
  EXPECT_EQ(a[2], 0xff);  // writing one did not touch the other
  EXPECT_EQ(b[0], 0xff);
}

TEST(HostArenaTest, ReleaseToAMarkReusesTheMemoryZeroed) {
  HostArena arena;
  arena.allocate(100);
  const size_t mark = arena.mark();
  auto* first = static_cast<uint8_t*>(arena.allocate(4096));
  std::memset(first, 0xab, 4096);
  arena.release(mark);
  EXPECT_EQ(arena.mark(), mark);
  auto* again = static_cast<uint8_t*>(arena.allocate(4096));
  EXPECT_EQ(again, first);
  EXPECT_TRUE(all_zero(again, 4096));
}

TEST(HostArenaTest, GrowthMapsMoreAndResetMergesIntoOneMapping) {
  HostArena arena;
  const size_t big = size_t{6} << 20;  // beyond the first mapping
  auto* a = static_cast<uint8_t*>(arena.allocate(size_t{3} << 20));
  auto* b = static_cast<uint8_t*>(arena.allocate(big));
  std::memset(a, 1, size_t{3} << 20);
  std::memset(b, 2, big);
  const size_t reserved = arena.reserved_bytes();
  EXPECT_GE(reserved, (size_t{3} << 20) + big);
  arena.reset();
  EXPECT_EQ(arena.reserved_bytes(), reserved);  // one mapping of the same total
  EXPECT_EQ(arena.used_bytes(), 0u);
  // One allocation of the whole busy step fits without another mapping: only one mapping holds
  // it (unmerged, the two are 4 and 6 MiB, and it would take a third).
  auto* whole = static_cast<uint8_t*>(arena.allocate((size_t{3} << 20) + big));
  EXPECT_EQ(arena.reserved_bytes(), reserved);
  EXPECT_TRUE(all_zero(whole, (size_t{3} << 20) + big));
}

TEST(HostArenaTest, ReleaseMemoryUnmapsAndTheArenaStillServes) {
  HostArena arena;
  arena.allocate(size_t{5} << 20);
  EXPECT_GT(arena.reserved_bytes(), 0u);
  arena.release_memory();
  EXPECT_EQ(arena.reserved_bytes(), 0u);
  EXPECT_EQ(arena.used_bytes(), 0u);
  auto* p = static_cast<uint8_t*>(arena.allocate(64));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(all_zero(p, 64));
}

TEST(HostArenaTest, ReleasingPastThePositionIsAnError) {
  HostArena arena;
  arena.allocate(64);
  EXPECT_DEATH(arena.release(arena.mark() + 64), "beyond the position");
}

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer (the asan preset) a write past a workspace tensor, or into memory given
// back by a release, is reported as it was with one heap block per tensor.
TEST(HostArenaTest, AddressSanitizerSeesOverflowsAndReleasedMemory) {
  HostArena arena;
  auto* p = static_cast<volatile uint8_t*>(arena.allocate(100));
  p[99] = 1;
  EXPECT_DEATH(p[100] = 1, "use-after-poison");
  const size_t mark = arena.mark();
  auto* q = static_cast<volatile uint8_t*>(arena.allocate(64));
  q[0] = 1;
  arena.release(mark);
  EXPECT_DEATH(q[0] = 2, "use-after-poison");
}
#endif

}  // namespace
}  // namespace deepinfer::ops::cpu
