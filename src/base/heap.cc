#include "base/heap.h"

#include <cstdlib>  // defines __GLIBC__ where glibc is the C library

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace deepinfer {

bool release_free_heap_memory() {
#if defined(__GLIBC__)
  // pad 0: keep nothing spare at the top of the main heap; the other arenas' free chunks are
  // released page by page (madvise) since glibc 2.8.
  return malloc_trim(0) != 0;
#else
  return false;
#endif
}

}  // namespace deepinfer
