// Split-K planning of the pipelined GEMM (plain C++, no CUDA: tested on the CPU). A launch whose
// output tiles do not fill the GPU splits K into groups of whole canonical sub-ranges — each
// sub-range sum is written and folded in order, so the split is numerically neutral — and the
// count is the one with the least time, modelled as waves x sub-ranges per CTA, the fewest
// splits on ties (less partial traffic).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

// Splits for `tiles` output tiles of a K with `n_subranges` canonical sub-ranges on a GPU with
// `resident` CTA slots (SMs x CTAs per SM). Every split holds ceil(P / splits) sub-ranges but the
// last, and every split holds at least one.
inline int plan_k_splits(int n_subranges, int64_t tiles, int64_t resident) {
  const int P = n_subranges;
  if (P <= 1 || tiles <= 0 || tiles >= resident) return 1;
  int best = 1;
  int64_t best_cost = P;  // one wave of P sub-ranges
  for (int spc = P - 1; spc >= 1; --spc) {
    const int splits = (P + spc - 1) / spc;
    const int64_t cost = (tiles * splits + resident - 1) / resident * spc;
    if (cost < best_cost) best = splits, best_cost = cost;
  }
  return best;
}

}  // namespace deepinfer::kernels
