// CpuOps DSpark block attention (model_v41_flash.md §7.2): each draft row attends to its stage's
// ring of target-derived entries below the block and to every row of its own block, with sinks.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {

void CpuOps::block_attention(const TensorView& q, const TensorView& kv_block, const TensorView& window,
                             const TensorView& sinks, const BatchView& batch, const AttentionParams& params,
                             const TensorView& out) {
  check_activation(q, "block_attention q");
  check_activation(out, "block_attention out");
  const int64_t T = q.shape[0], H = q.shape[1], d = q.shape[2], W = params.window, ring = window.shape[1];
  const bool round_probs = out.dtype == DType::kBF16;
  const float* sink = sinks.as<const float>();
#pragma omp parallel for schedule(dynamic)
  for (int64_t t = 0; t < T; ++t) {
    const SeqSpan& seq = batch.h_seqs[batch.h_token_seq[t]];
    // Key/value rows: ring positions [start - W, start) above the floor, then the block rows.
    std::vector<float> rows;
    for (int64_t p = std::max<int64_t>({0, seq.start_pos - W, seq.window_floor}); p < seq.start_pos; ++p) {
      rows.resize(rows.size() + d);
      read_f32(window, (seq.slot * ring + p % ring) * d, d, rows.data() + rows.size() - d);
    }
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      rows.resize(rows.size() + d);
      read_f32(kv_block, (seq.token_begin + i) * d, d, rows.data() + rows.size() - d);
    }
    const int64_t n = static_cast<int64_t>(rows.size()) / d;
    std::vector<float> qh(static_cast<size_t>(d)), z(static_cast<size_t>(n)), o(static_cast<size_t>(d));
    for (int64_t h = 0; h < H; ++h) {
      read_f32(q, (t * H + h) * d, d, qh.data());
      float mx = sink[h];
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, z[j] = dot(qh.data(), &rows[j * d], d) * params.softmax_scale);
      float den = std::exp(sink[h] - mx);
      for (int64_t j = 0; j < n; ++j) den += (z[j] = std::exp(z[j] - mx));
      std::fill(o.begin(), o.end(), 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float pj = round_probs ? tensor::round_bf16(z[j] / den) : z[j] / den;
        for (int64_t c = 0; c < d; ++c) o[c] += pj * rows[j * d + c];
      }
      write_f32(out, (t * H + h) * d, d, o.data());
    }
  }
}

}  // namespace deepinfer::ops::cpu
