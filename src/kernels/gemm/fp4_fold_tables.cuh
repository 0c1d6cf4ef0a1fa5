// The FP8-order expert kernels' step tables (fp4_fold_layout.h: byte i of table d = the E4M3 code
// of E2M1 magnitude i x 2^(6 + d)) for d = 0 .. -kFp4FoldMaxShift, then an all-zero row (every
// code of a 32-block further below its reference rounds to zero), evaluated at compile time into
// constant memory. Each CTA copies them into shared memory, where a warp's lanes look up different
// rows at once (constant memory would serialise them). Computing them per CTA took ~1,000
// dependent instructions per table thread (e4m3_from_scaled's bit search) — a few microseconds
// of every lean-form CTA's prologue (fp8_expert_gemv.cuh, session 52). Then the decode of a
// lane's 128-input block through them, which both expert kernels share.
#pragma once

#include <cstdint>

#include "kernels/gemm/fp4_fold_layout.h"

namespace deepinfer::kernels {

inline constexpr int kFp4FoldTableRows = kFp4FoldMaxShift + 2;

struct Fp4FoldTableSet {
  uint32_t lo[kFp4FoldTableRows], hi[kFp4FoldTableRows];
};
constexpr Fp4FoldTableSet fp4_fold_table_set() {
  Fp4FoldTableSet s{};
  for (int i = 0; i < kFp4FoldTableRows; ++i) {
    const Fp4FoldTable t = fp4_fold_table(-i);  // i = kFp4FoldMaxShift + 1: every code rounds to zero
    s.lo[i] = t.lo;
    s.hi[i] = t.hi;
  }
  return s;
}
static_assert(fp4_fold_table_set().lo[kFp4FoldTableRows - 1] == 0 && fp4_fold_table_set().hi[kFp4FoldTableRows - 1] == 0);

// One copy per translation unit (static: no device linking).
static __constant__ Fp4FoldTableSet kFp4FoldTables = fp4_fold_table_set();

// Thread tid < kFp4FoldTableRows copies its row (the caller's barrier publishes them).
__device__ __forceinline__ void fp4_fold_tables_to_shared(uint2* tables, int tid) {
  if (tid < kFp4FoldTableRows) tables[tid] = make_uint2(kFp4FoldTables.lo[tid], kFp4FoldTables.hi[tid]);
}

// The E4M3 A fragments of a lane's rows (g and g + 8 of its warp's 16) of one 128-input block:
// words of its 16-byte runs decoded with each row's table for the block's 32-block scale codes.
__device__ __forceinline__ void fp8_expert_decode_block(const uint4 (&run)[2], const uint32_t (&word)[2],
                                                        const int (&ref)[2], const uint2* tables, uint32_t byte_sel,
                                                        uint32_t (&f)[4][4]) {
  uint2 tab[2][2];  // [row][window]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int w = 0; w < 2; ++w) {  // lane c's inputs of window w: 32-block 2 w + c / 2
      const int e = static_cast<int>(__byte_perm(word[h], 0u, byte_sel + 2 * w));
      tab[h][w] = tables[min(ref[h] - e, kFp4FoldMaxShift + 1)];
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // step j = 2 w + s: {a0, a1, a2, a3} = {row g lo, row g + 8 lo, row g hi, row g + 8 hi}
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t x = j == 0 ? run[h].x : j == 1 ? run[h].y : j == 2 ? run[h].z : run[h].w;
      Fp4FoldTable t;
      t.lo = tab[h][j / 2].x;
      t.hi = tab[h][j / 2].y;
      fp4_fold_decode(x, t, f[j][h], f[j][2 + h]);
    }
  }
}

}  // namespace deepinfer::kernels
