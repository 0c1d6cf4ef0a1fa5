// release_free_heap_memory: what a worker thread freed in the middle of its arena (kept there by
// glibc, because live chunks above it stop the heap from shrinking) leaves the resident set.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/heap.h"

namespace deepinfer {
namespace {

// VmRSS of this process in kB (Linux /proc), -1 when it cannot be read.
long resident_kb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      long kb = -1;
      status >> kb;
      return kb;
    }
    status.ignore(1 << 12, '\n');
  }
  return -1;
}

TEST(HeapTest, FreedMiddleOfAnArenaLeavesTheResidentSet) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "malloc_trim is glibc's";
#elif defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator is not glibc's";
#else
  if (resident_kb() < 0) GTEST_SKIP() << "no /proc/self/status";
  constexpr int kChunks = 512;
  constexpr size_t kChunkBytes = 96 << 10;  // below glibc's mmap threshold (128 KB at least)
  std::vector<void*> pins;                   // small live chunks between the big ones
  long before_free = 0, after_free = 0;
  // A thread of its own, as the engine's step loop: its allocations come from a non-main arena.
  std::thread worker([&] {
    std::vector<char*> big;
    for (int i = 0; i < kChunks; ++i) {
      auto* p = static_cast<char*>(std::malloc(kChunkBytes));
      for (size_t j = 0; j < kChunkBytes; j += 4096) p[j] = 1;  // touch: resident
      big.push_back(p);
      pins.push_back(std::malloc(64));
    }
    before_free = resident_kb();
    for (char* p : big) std::free(p);
    after_free = resident_kb();
  });
  worker.join();
  const long freed_kb = static_cast<long>(kChunks * kChunkBytes / 1024);
  // Without a release the freed chunks stay resident (glibc cannot shrink below the pins).
  EXPECT_GT(after_free, before_free - freed_kb / 4) << "the C library returned the chunks itself";
  EXPECT_TRUE(release_free_heap_memory());
  const long released = resident_kb();
  EXPECT_LT(released, after_free - freed_kb / 2)
      << "resident " << after_free << " kB -> " << released << " kB after the release";
  for (void* p : pins) std::free(p);
#endif
}

}  // namespace
}  // namespace deepinfer
