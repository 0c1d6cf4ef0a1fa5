#include "ops/cpu/host_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "base/check.h"

// Under AddressSanitizer the arena keeps what separate heap blocks gave: a poisoned redzone after
// every allocation and poisoned free space, so an op writing past its tensor is still reported.
#if defined(__SANITIZE_ADDRESS__)
#define DI_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DI_ARENA_ASAN 1
#endif
#endif
#if defined(DI_ARENA_ASAN)
#include <sanitizer/asan_interface.h>
#define DI_ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define DI_ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define DI_ARENA_POISON(p, n) ((void)(p), (void)(n))
#define DI_ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace deepinfer::ops::cpu {
namespace {

constexpr size_t kAlign = 64;
#if defined(DI_ARENA_ASAN)
constexpr size_t kRedzone = 64;
#else
constexpr size_t kRedzone = 0;
#endif
constexpr size_t kGranule = size_t{2} << 20;  // mappings are whole 2 MiB units (huge-page friendly)
constexpr size_t kMinChunk = size_t{4} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

HostArena::~HostArena() { release_memory(); }

void HostArena::add_chunk(size_t min_bytes) {
  // At least double what is mapped, so that a growing step maps O(log) times before reset()
  // merges the mappings into one.
  const size_t size = round_up(std::max({min_bytes, reserved_, kMinChunk}), kGranule);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  DI_CHECK(p != MAP_FAILED, "out of host memory mapping a {} byte workspace", size);
  DI_ARENA_POISON(p, size);
  chunks_.push_back({static_cast<uint8_t*>(p), size, reserved_});
  reserved_ += size;
}

void HostArena::poison(size_t from, size_t to) {
  for (const Chunk& c : chunks_) {
    const size_t lo = std::max(from, c.start), hi = std::min(to, c.start + c.size);
    if (lo < hi) DI_ARENA_POISON(c.base + (lo - c.start), hi - lo);
  }
}

void* HostArena::allocate(size_t bytes) {
  const size_t need = round_up(std::max<size_t>(bytes, 1), kAlign) + kRedzone;
  // The chunk holding pos_, or the first one that starts after it and is large enough: a request
  // that does not fit in the rest of a chunk skips that rest.
  uint8_t* p = nullptr;
  for (const Chunk& c : chunks_) {
    if (c.start + c.size <= pos_) continue;
    const size_t at = std::max(pos_, c.start);
    if (at + need <= c.start + c.size) {
      pos_ = at + need;
      p = c.base + (at - c.start);
      break;
    }
  }
  if (p == nullptr) {
    add_chunk(need);
    pos_ = chunks_.back().start + need;
    p = chunks_.back().base;
  }
  DI_ARENA_UNPOISON(p, bytes);
  std::memset(p, 0, bytes);  // reused memory: zeroed as a fresh allocation is
  return p;
}

void HostArena::release(size_t mark) {
  DI_CHECK(mark <= pos_, "workspace release to {} beyond the position {}", mark, pos_);
  poison(mark, pos_);
  pos_ = mark;
}

void HostArena::reset() {
  poison(0, pos_);
  pos_ = 0;
  if (chunks_.size() <= 1) return;
  const size_t total = reserved_;
  release_memory();
  add_chunk(total);
}

void HostArena::release_memory() {
  for (const Chunk& c : chunks_) {
    DI_ARENA_UNPOISON(c.base, c.size);  // the addresses may be mapped again by anyone
    munmap(c.base, c.size);
  }
  chunks_.clear();
  pos_ = 0;
  reserved_ = 0;
}

}  // namespace deepinfer::ops::cpu
