// Giving freed heap memory back to the operating system.
//
// glibc keeps what a thread frees in that thread's arena for reuse; only the top of each heap is
// ever returned on its own. A step loop that allocates per-step activations (the CPU backend: a
// batch of 200 rows leaves ~130 MB free in the loop thread's arena on the demo model) therefore
// keeps its high-water mark resident forever after a burst. The engine calls this once it has
// been idle for a while, so a server's resident size follows what it holds, not its busiest step.
#pragma once

namespace deepinfer {

// Returns the whole free pages of every malloc arena to the OS (glibc malloc_trim(0)). True when
// memory was released; false when there was none or the C library has no such call. Takes each
// arena's lock in turn: call it off hot paths only.
bool release_free_heap_memory();

}  // namespace deepinfer
