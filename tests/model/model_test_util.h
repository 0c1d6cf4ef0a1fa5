// Helpers for model-level tests: loading a synthetic model on the CPU backend and building
// ForwardBatches for one or several sequences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "test_models.h"

namespace deepinfer::testing {

inline std::unique_ptr<engine::LoadedModel> load(const std::string& config, model::Numerics numerics) {
  auto lm = engine::load_model(synthetic_model_dir(config), engine::LoadOptions{numerics, "cpu"});
  EXPECT_TRUE(lm.is_ok()) << lm.status().to_string();
  return lm.is_ok() ? std::move(lm).value() : nullptr;
}

// Compares the captured residual streams after every layer with a golden [layers, positions, row]
// tensor at the given positions: each row within tol x its own max |value|. Returns the worst
// relative error.
inline float expect_hidden_states_match(const model::Capture& capture, const std::vector<float>& golden,
                                        const std::vector<int32_t>& positions, int64_t row, float tol,
                                        const std::string& label) {
  float worst = 0.0f;
  for (size_t l = 0; l < capture.after_layer.size(); ++l) {
    for (size_t i = 0; i < positions.size(); ++i) {
      const float* ours = &capture.after_layer[l][positions[i] * row];
      const float* theirs = &golden[(l * positions.size() + i) * row];
      float scale = 0.0f, err = 0.0f;
      for (int64_t c = 0; c < row; ++c) {
        scale = std::max(scale, std::fabs(theirs[c]));
        err = std::max(err, std::fabs(ours[c] - theirs[c]));
      }
      worst = std::max(worst, err / scale);
      EXPECT_LT(err, tol * scale) << label << " layer " << l << " position " << positions[i] << ": relative error "
                                  << err / scale;
    }
  }
  return worst;
}

inline std::vector<int32_t> random_ids(int64_t n, uint64_t seed, int32_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(vocab - 3));
  return ids;
}

struct SeqChunk {
  int32_t slot;
  std::vector<int32_t> ids;  // the tokens of this chunk
  int32_t start_pos;
  std::vector<int32_t> blocks;  // history block table
  int32_t n_cached = 0;
  int32_t window_floor = 0;
  std::vector<int32_t> logit_offsets;  // offsets within the chunk that need logits
};

inline model::ForwardBatch make_batch(const std::vector<SeqChunk>& chunks) {
  model::ForwardBatch b;
  size_t max_blocks = 1;
  for (const auto& c : chunks) max_blocks = std::max(max_blocks, c.blocks.size());
  b.max_blocks = static_cast<int32_t>(max_blocks);
  for (const auto& c : chunks) {
    const int32_t begin = static_cast<int32_t>(b.token_ids.size());
    b.seqs.push_back({c.slot, begin, static_cast<int32_t>(c.ids.size()), c.start_pos, c.n_cached, c.window_floor});
    for (size_t i = 0; i < c.ids.size(); ++i) {
      b.token_ids.push_back(c.ids[i]);
      b.positions.push_back(c.start_pos + static_cast<int32_t>(i));
    }
    for (int32_t o : c.logit_offsets) b.logit_rows.push_back(begin + o);
    std::vector<int32_t> table = c.blocks;
    table.resize(max_blocks, -1);
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
  }
  return b;
}

inline std::vector<int32_t> iota_blocks(int32_t first, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Host copy of the logits of a forward result ([rows][vocab]).
inline std::vector<std::vector<float>> logits_of(const model::ForwardResult& r) {
  std::vector<std::vector<float>> out;
  const int64_t n = r.logits.shape[0], V = r.logits.shape[1];
  for (int64_t i = 0; i < n; ++i) out.emplace_back(r.logits.as<const float>() + i * V, r.logits.as<const float>() + (i + 1) * V);
  return out;
}

}  // namespace deepinfer::testing
