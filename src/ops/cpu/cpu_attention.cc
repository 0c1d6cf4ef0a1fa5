// CpuOps sparse shared-KV attention with sinks (model_v4_flash.md §4.8): each query attends to
// its sliding window (this step's fresh rows plus earlier rows from the ring) and to compressed
// history rows (the indexer's selection for CSA, every visible row for HCA).
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {
namespace {

// The F32 key/value rows one query attends to, in a fixed order: window (oldest first), then
// compressed rows in ascending group order.
std::vector<float> gather_kv_rows(const TensorView& kv_new, const TensorView& window, const TensorView& comp,
                                  const TensorView& comp_idx, const BatchView& batch, const AttentionParams& params,
                                  int64_t t, int64_t d, int64_t* n_rows_out) {
  const int64_t s = batch.h_token_seq[t];
  const SeqSpan& seq = batch.h_seqs[s];
  const int64_t pos = batch.h_positions[t];
  const int64_t W = params.window, ring = window.shape[1];
  std::vector<float> rows;
  const int64_t first = std::max<int64_t>({0, pos - W + 1, seq.window_floor});
  for (int64_t q = first; q <= pos; ++q) {
    rows.resize(rows.size() + d);
    float* dst = rows.data() + rows.size() - d;
    if (q >= seq.start_pos) {
      read_f32(kv_new, (seq.token_begin + q - seq.start_pos) * d, d, dst);
    } else {
      read_f32(window, (seq.slot * ring + q % ring) * d, d, dst);
    }
  }
  if (params.ratio > 0) {
    auto add_group = [&](int32_t g) {
      const int32_t block = batch.h_block_tables[s * batch.max_blocks + g / params.rows_per_block];
      const int64_t row = static_cast<int64_t>(block) * params.rows_per_block + g % params.rows_per_block;
      rows.resize(rows.size() + d);
      read_f32(comp, row * d, d, rows.data() + rows.size() - d);
    };
    if (params.all_compressed) {
      const int32_t n_avail = static_cast<int32_t>((pos + 1) / params.ratio);
      for (int32_t g = 0; g < n_avail; ++g) add_group(g);
    } else {
      const int64_t K = comp_idx.shape[1];
      const int32_t* idx = comp_idx.as<const int32_t>() + t * K;
      for (int64_t k = 0; k < K; ++k)
        if (idx[k] >= 0) add_group(idx[k]);
    }
  }
  *n_rows_out = static_cast<int64_t>(rows.size()) / d;
  return rows;
}

}  // namespace

void CpuOps::sparse_attention(const TensorView& q, const TensorView& kv_new, const TensorView& window,
                              const TensorView& comp, const TensorView& comp_idx, const TensorView& sinks,
                              const BatchView& batch, const AttentionParams& params, const TensorView& out) {
  check_activation(q, "attention q");
  check_activation(out, "attention out");
  const int64_t T = q.shape[0], H = q.shape[1], d = q.shape[2];
  // Under the official contract (BF16 activations) the probabilities enter the P.V product as
  // BF16, as in the reference kernel.
  const bool round_probs = out.dtype == DType::kBF16;
  const float* sink = sinks.as<const float>();
#pragma omp parallel for schedule(dynamic)
  for (int64_t t = 0; t < T; ++t) {
    int64_t n = 0;
    const std::vector<float> rows = gather_kv_rows(kv_new, window, comp, comp_idx, batch, params, t, d, &n);
    std::vector<float> qh(static_cast<size_t>(d)), z(static_cast<size_t>(n)), o(static_cast<size_t>(d));
    for (int64_t h = 0; h < H; ++h) {
      read_f32(q, (t * H + h) * d, d, qh.data());
      float mx = sink[h];
      for (int64_t j = 0; j < n; ++j) {
        z[j] = dot(qh.data(), &rows[j * d], d) * params.softmax_scale;
        mx = std::max(mx, z[j]);
      }
      float den = std::exp(sink[h] - mx);
      for (int64_t j = 0; j < n; ++j) den += (z[j] = std::exp(z[j] - mx));
      std::fill(o.begin(), o.end(), 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float p = round_probs ? tensor::round_bf16(z[j] / den) : z[j] / den;
        for (int64_t c = 0; c < d; ++c) o[c] += p * rows[j * d + c];
      }
      write_f32(out, (t * H + h) * d, d, o.data());
    }
  }
  if (params.out_rope.n_rope > 0) rope(out, batch.positions, params.out_rope);
}

}  // namespace deepinfer::ops::cpu
