// CpuOps V4.1 indexer (model_v41_flash.md §3.2): per-query scores over the visible entries of the
// group's shared index keys, the two-level candidate blocks (publish at the candidate source,
// restrict at later Reindex layers) and the ascending top-k. Ties go to the lower index/block.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace deepinfer::ops::cpu {
namespace {

using Cand = IndexerV41Params::Candidates;

// Indices of the `k` largest scores among `ids` (ties: lower id first), in ascending id order.
std::vector<int32_t> top_ascending(std::vector<int32_t> ids, const std::vector<float>& score, int64_t k) {
  k = std::min<int64_t>(k, static_cast<int64_t>(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return score[a] != score[b] ? score[a] > score[b] : a < b;
  });
  ids.resize(static_cast<size_t>(k));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The candidate source's blocks: block maxima over visible entries, the newest entry's block pinned.
std::vector<int32_t> candidate_blocks(const std::vector<float>& scores, int32_t n_vis, const IndexerV41Params& p) {
  const int32_t bs = p.candidate_block_size;
  const int32_t n_blocks = (n_vis + bs - 1) / bs;
  std::vector<float> bmax(static_cast<size_t>(n_blocks), -std::numeric_limits<float>::infinity());
  for (int32_t g = 0; g < n_vis; ++g) bmax[g / bs] = std::max(bmax[g / bs], scores[g]);
  if (n_blocks > 0) bmax[(n_vis - 1) / bs] = std::numeric_limits<float>::infinity();
  std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  return top_ascending(std::move(ids), bmax, p.candidate_topk_blocks);
}

}  // namespace

void CpuOps::indexer_topk_v41(const TensorView& q, const TensorView& w, const TensorView& keys, const BatchView& batch,
                              const IndexerV41Params& p, const TensorView& candidates, const TensorView& idx) {
  const int64_t T = q.shape[0], Hi = q.shape[1], di = q.shape[2], K = idx.shape[1];
  DI_CHECK(p.candidates == Cand::kNone || (candidates.shape[0] == T && candidates.shape[1] == p.candidate_topk_blocks),
           "indexer_topk_v41: candidates {} for {} rows", candidates.shape_string(), T);
  int32_t* out = idx.as<int32_t>();
#pragma omp parallel for schedule(dynamic)
  for (int64_t t = 0; t < T; ++t) {
    const int64_t s = batch.h_token_seq[t];
    const int32_t n_vis = (batch.h_positions[t] + 1) / p.ratio;
    std::vector<float> qv(static_cast<size_t>(Hi * di)), wv(static_cast<size_t>(Hi)), key(static_cast<size_t>(di));
    read_f32(q, t * Hi * di, Hi * di, qv.data());
    read_f32(w, t * Hi, Hi, wv.data());
    std::vector<float> scores(static_cast<size_t>(n_vis));
    for (int32_t g = 0; g < n_vis; ++g) {
      const int32_t block = batch.h_block_tables[s * batch.max_blocks + g / p.rows_per_block];
      read_f32(keys, (static_cast<int64_t>(block) * p.rows_per_block + g % p.rows_per_block) * di, di, key.data());
      float acc = 0.0f;
      for (int64_t h = 0; h < Hi; ++h) {
        acc += (std::max(0.0f, dot(&qv[h * di], key.data(), di)) * p.score_scale) * (wv[h] * p.weight_scale);
      }
      scores[g] = acc;
    }
    std::vector<int32_t> allowed;
    if (p.candidates == Cand::kRestrict) {
      const int32_t* cand = candidates.as<const int32_t>() + t * p.candidate_topk_blocks;
      for (int32_t g = 0; g < n_vis; ++g) {
        const int32_t b = g / p.candidate_block_size;
        if (std::find(cand, cand + p.candidate_topk_blocks, b) != cand + p.candidate_topk_blocks) allowed.push_back(g);
      }
    } else {
      allowed.resize(static_cast<size_t>(n_vis));
      std::iota(allowed.begin(), allowed.end(), 0);
    }
    if (p.candidates == Cand::kPublish) {
      const std::vector<int32_t> blocks = candidate_blocks(scores, n_vis, p);
      int32_t* cand = candidates.as<int32_t>() + t * p.candidate_topk_blocks;
      for (int32_t i = 0; i < p.candidate_topk_blocks; ++i) {
        cand[i] = i < static_cast<int32_t>(blocks.size()) ? blocks[i] : -1;
      }
    }
    const std::vector<int32_t> picked = top_ascending(std::move(allowed), scores, K);
    for (int64_t k = 0; k < K; ++k) out[t * K + k] = k < static_cast<int64_t>(picked.size()) ? picked[k] : -1;
  }
}

}  // namespace deepinfer::ops::cpu
