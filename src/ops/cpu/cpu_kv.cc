// CpuOps KV state: window rings, the streaming compressor (§4.6), history-row stores and the
// lightning indexer's top-k (§4.7).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {
namespace {

int32_t history_row(const BatchView& batch, int64_t seq, int32_t group, int32_t rows_per_block) {
  const int32_t block = batch.h_block_tables[seq * batch.max_blocks + group / rows_per_block];
  return block * rows_per_block + group % rows_per_block;
}

}  // namespace

void CpuOps::window_store(const TensorView& kv, const BatchView& batch, const TensorView& window) {
  const int64_t W = window.shape[1], d = window.shape[2];
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t s = 0; s < batch.n_seqs; ++s) {
    const SeqSpan& seq = batch.h_seqs[s];
    for (int32_t i = std::max<int32_t>(0, seq.n_tokens - static_cast<int32_t>(W)); i < seq.n_tokens; ++i) {
      const int64_t pos = seq.start_pos + i;
      read_f32(kv, (seq.token_begin + i) * d, d, row.data());
      write_f32(window, (seq.slot * W + pos % W) * d, d, row.data());
    }
  }
}

void CpuOps::compress(const TensorView& kv, const TensorView& score, const TensorView& ape, const BatchView& batch,
                      const EmitPlan& plan, const CompressParams& params, const TensorView& state_kv,
                      const TensorView& state_score, const TensorView& rows) {
  const int m = params.ratio;
  const int64_t dc = params.dc;
  const int64_t width = params.overlapped ? 2 * dc : dc;  // channels per token (kappa * dc)
  const int64_t n_cand = params.overlapped ? 2 * m : m;   // positions an emission reads
  const int64_t ring = state_kv.shape[1];                 // position p at slot p % ring
  DI_CHECK(kv.shape[1] == width && ring >= n_cand && state_kv.shape[2] == width,
           "compress: kv {} state {}", kv.shape_string(), state_kv.shape_string());
  const float* pk = kv.as<const float>();
  const float* ps = score.as<const float>();
  const float* pa = ape.as<const float>();
  float* out = rows.as<float>();
  size_t emit = 0;
  for (int64_t s = 0; s < batch.n_seqs; ++s) {
    const SeqSpan& seq = batch.h_seqs[s];
    float* sk = state_kv.as<float>() + static_cast<int64_t>(seq.slot) * ring * width;
    float* ss = state_score.as<float>() + static_cast<int64_t>(seq.slot) * ring * width;
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      const int64_t t = seq.token_begin + i;
      const int64_t pos = seq.start_pos + i;
      const int64_t slot = pos % ring;
      for (int64_t c = 0; c < width; ++c) {
        sk[slot * width + c] = pk[t * width + c];
        ss[slot * width + c] = ps[t * width + c] + pa[(pos % m) * width + c];
      }
      if ((pos + 1) % m != 0) continue;
      DI_CHECK(emit < plan.h_token.size() && plan.h_token[emit] == t, "compress: emit plan out of step at row {}", t);
      float* dst = out + static_cast<int64_t>(emit) * dc;
      const int64_t first = pos + 1 - n_cand;  // candidate k is position first + k
      for (int64_t j = 0; j < dc; ++j) {
        // Candidates: overlapped = previous group's tokens in the first half of the channels, the
        // current group's in the second half.
        float mx = -std::numeric_limits<float>::infinity();
        auto cand = [&](int64_t k, float* val) {
          const int64_t p = first + k;
          if (p < 0) {
            *val = 0.0f;
            return -std::numeric_limits<float>::infinity();
          }
          const int64_t c = params.overlapped && k >= m ? dc + j : j;
          *val = sk[(p % ring) * width + c];
          return ss[(p % ring) * width + c];
        };
        float val;
        for (int64_t k = 0; k < n_cand; ++k) mx = std::max(mx, cand(k, &val));
        float den = 0.0f, acc = 0.0f;
        for (int64_t k = 0; k < n_cand; ++k) {
          const float sc = cand(k, &val);
          const float e = sc == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(sc - mx);
          den += e;
          acc += e * val;
        }
        dst[j] = acc / den;
      }
      ++emit;
    }
  }
  // Entries past the emitted ones may only be padding (pad_emissions): rows that emit nothing.
  for (size_t e = emit; e < plan.h_token.size(); ++e) {
    DI_CHECK(plan.h_token[e] >= batch.n_tokens && plan.h_dst[e] < 0, "compress: emitted {} rows, plan has {}", emit,
             plan.h_token.size());
  }
}

void CpuOps::store_rows(const TensorView& rows, const EmitPlan& plan, const TensorView& pool) {
  const int64_t width = row_width(pool);
  std::vector<float> v(static_cast<size_t>(width));
  for (int64_t i = 0; i < plan.n_emit; ++i) {
    if (plan.h_dst[i] < 0) continue;
    read_f32(rows, i * width, width, v.data());
    write_f32(pool, static_cast<int64_t>(plan.h_dst[i]) * width, width, v.data());
  }
}

void CpuOps::indexer_topk(const TensorView& q, const TensorView& w, const TensorView& keys, const BatchView& batch,
                          int ratio, int32_t rows_per_block, float weight_scale, const TensorView& idx) {
  const int64_t T = q.shape[0], Hi = q.shape[1], di = q.shape[2], K = idx.shape[1];
  int32_t* out = idx.as<int32_t>();
#pragma omp parallel for schedule(dynamic)
  for (int64_t t = 0; t < T; ++t) {
    const int64_t s = batch.h_token_seq[t];
    const int32_t n_avail = (batch.h_positions[t] + 1) / ratio;
    std::vector<float> qv(static_cast<size_t>(Hi * di)), wv(static_cast<size_t>(Hi)), key(static_cast<size_t>(di));
    read_f32(q, t * Hi * di, Hi * di, qv.data());
    read_f32(w, t * Hi, Hi, wv.data());
    for (int64_t h = 0; h < Hi; ++h) wv[h] *= weight_scale;
    std::vector<float> scores(static_cast<size_t>(n_avail));
    for (int32_t g = 0; g < n_avail; ++g) {
      read_f32(keys, static_cast<int64_t>(history_row(batch, s, g, rows_per_block)) * di, di, key.data());
      float acc = 0.0f;
      for (int64_t h = 0; h < Hi; ++h) acc += wv[h] * std::max(0.0f, dot(&qv[h * di], key.data(), di));
      scores[g] = acc;
    }
    std::vector<int32_t> order(static_cast<size_t>(n_avail));
    std::iota(order.begin(), order.end(), 0);
    const int64_t n_sel = std::min<int64_t>(K, n_avail);
    std::partial_sort(order.begin(), order.begin() + n_sel, order.end(), [&](int32_t a, int32_t b) {
      return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
    });
    std::sort(order.begin(), order.begin() + n_sel);
    for (int64_t k = 0; k < K; ++k) out[t * K + k] = k < n_sel ? order[k] : -1;
  }
}

}  // namespace deepinfer::ops::cpu
