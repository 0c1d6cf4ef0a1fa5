#include "ops/batch.h"

#include "base/check.h"

namespace deepinfer::ops {

void plan_emissions(const BatchView& batch, int ratio, EmitPlan* plan) {
  DI_CHECK(ratio > 0 && batch.block_tokens % ratio == 0, "ratio {} must divide block_tokens {}", ratio,
           batch.block_tokens);
  plan->ratio = ratio;
  plan->h_token.clear();
  plan->h_group.clear();
  plan->h_dst.clear();
  const int32_t rows_per_block = batch.block_tokens / ratio;
  for (int64_t s = 0; s < batch.n_seqs; ++s) {
    const SeqSpan& seq = batch.h_seqs[s];
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      const int32_t pos = seq.start_pos + i;
      if ((pos + 1) % ratio != 0) continue;
      const int32_t g = pos / ratio;
      int32_t dst = -1;
      if (pos >= seq.n_cached) {  // groups completing before n_cached live in shared blocks
        const int32_t block = batch.h_block_tables[s * batch.max_blocks + g / rows_per_block];
        dst = block * rows_per_block + g % rows_per_block;
      }
      plan->h_token.push_back(seq.token_begin + i);
      plan->h_group.push_back(g);
      plan->h_dst.push_back(dst);
    }
  }
  plan->n_emit = static_cast<int64_t>(plan->h_token.size());
}

void pad_emissions(int64_t capacity, EmitPlan* plan) {
  DI_CHECK(plan->n_emit <= capacity, "emission plan of {} rows exceeds capacity {}", plan->n_emit, capacity);
  // Token `capacity` lies past every row when capacity = n_tokens (the launchers attribute
  // emissions to sequences by token row); dst -1 is never stored.
  plan->h_token.resize(static_cast<size_t>(capacity), static_cast<int32_t>(capacity));
  plan->h_group.resize(static_cast<size_t>(capacity), 0);
  plan->h_dst.resize(static_cast<size_t>(capacity), -1);
  plan->n_emit = capacity;
}

}  // namespace deepinfer::ops
