// The FP8-order expert kernels' step tables (fp4_fold_layout.h: byte i of table d = the E4M3 code
// of E2M1 magnitude i x 2^(6 + d)) for d = 0 .. -kFp4FoldMaxShift, then an all-zero row (every
// code of a 32-block further below its reference rounds to zero), evaluated at compile time into
// constant memory. Each CTA copies them into shared memory, where a warp's lanes look up different
// rows at once (constant memory would serialise them). Computing them per CTA took ~1,000
// dependent instructions per table thread (e4m3_from_scaled's bit search) — a few microseconds
// of every lean-form CTA's prologue (fp8_expert_gemv.cuh, session 52).
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

}  // namespace deepinfer::kernels
