// HostArena: the CPU backend's per-step workspace. A bump allocator over a few large anonymous
// mappings that stay mapped from step to step, so a step's hundreds of temporaries cost no
// malloc/free and leave nothing in the C library's arenas: glibc keeps what a thread frees (the
// top of a thread's heap never shrinks once its trim threshold has grown to 64 MB), so per-step
// buffers from malloc left a burst's high-water mark resident after the engine went idle.
// Memory comes back to the OS only through release_memory(), which the engine calls when idle.
// Under AddressSanitizer each allocation gets a poisoned redzone and free space is poisoned, so
// overflows past a workspace tensor are reported as they were with one heap block per tensor.
//
// Not thread-safe: one thread allocates (the model's), as the Ops workspace contract says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepinfer::ops::cpu {

class HostArena {
 public:
  HostArena() = default;
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  // `bytes` of zero-filled memory, 64-byte aligned, valid until release() to a mark taken before
  // it, reset() or release_memory(). Fails (DI_CHECK) when the OS gives no memory.
  void* allocate(size_t bytes);
  // A position to release() back to: everything allocated after it is given back for reuse.
  size_t mark() const { return pos_; }
  void release(size_t mark);
  // Everything is given back for reuse (a new step). Several mappings are merged into one of
  // their total size here, so the steady state is one mapping of the busiest step's size.
  void reset();
  // Unmaps everything (nothing may point into the arena any more): the idle engine's call.
  void release_memory();

  size_t reserved_bytes() const { return reserved_; }
  size_t used_bytes() const { return pos_; }

 private:
  struct Chunk {
    uint8_t* base = nullptr;
    size_t size = 0;
    size_t start = 0;  // position of base: the sizes of the chunks before it
  };
  void add_chunk(size_t min_bytes);
  // Marks positions [from, to) as not allocated for AddressSanitizer (a no-op otherwise).
  void poison(size_t from, size_t to);

  std::vector<Chunk> chunks_;
  size_t pos_ = 0;       // next free position (chunks are laid out one after another)
  size_t reserved_ = 0;  // total size of the mappings
};

}  // namespace deepinfer::ops::cpu
