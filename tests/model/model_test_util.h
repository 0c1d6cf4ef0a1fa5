// Helpers for model-level tests: loading a synthetic model on the CPU backend and building
// ForwardBatches for one or several sequences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdio>
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
// Logits at `wanted` positions of the prompt `ids` fed to slot 0 of a fresh KV state in chunks of
// `chunk` (block_tokens positions per history block; with_n_prompt: the prompt's length passed on
// every step, as the engine does for V4.1's prefill truncation), copied back through the model's
// ops, so on any backend. capture: the last chunk's hidden states per layer.
inline std::vector<std::vector<float>> run_prompt(engine::LoadedModel& lm, const std::vector<int32_t>& ids,
                                                  int64_t chunk, const std::vector<int32_t>& wanted,
                                                  int32_t block_tokens, bool with_n_prompt,
                                                  model::Capture* capture = nullptr,
                                                  const std::function<void(model::ForwardBatch&, int32_t begin)>& edit = {}) {
  const int32_t n = static_cast<int32_t>(ids.size()), n_blocks = n / block_tokens + 1;
  model::KvState state(lm.config, {1, n_blocks, block_tokens, lm.model->act_dtype()}, lm.ops.get());
  state.reset_slot(0);
  std::vector<std::vector<float>> out;
  const int64_t V = lm.config.vocab_size;
  for (int32_t begin = 0; begin < n; begin += static_cast<int32_t>(chunk)) {
    const int32_t end = std::min<int32_t>(n, begin + static_cast<int32_t>(chunk));
    SeqChunk c{0, std::vector<int32_t>(ids.begin() + begin, ids.begin() + end), begin, iota_blocks(0, n_blocks)};
    for (int32_t p : wanted)
      if (p >= begin && p < end) c.logit_offsets.push_back(p - begin);
    model::ForwardBatch b = make_batch({c});
    if (with_n_prompt) b.n_prompt = {n};
    if (edit) edit(b, begin);
    auto r = lm.model->forward(b, state, capture);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (!r.is_ok()) return out;
    for (int64_t i = 0; i < r->logits.shape[0]; ++i) {
      std::vector<float> row(static_cast<size_t>(V));
      lm.ops->copy(r->logits.slice0(i, i + 1), tensor::TensorView::contiguous(row.data(), tensor::DType::kF32, {1, V}));
      out.push_back(std::move(row));
    }
  }
  return out;
}

// Two runs' logits rows side by side: the largest |a - b| and the rows whose top-1 ids agree.
struct LogitComparison {
  float max_abs_diff = 0.0f;
  int top1_agree = 0;
};
inline LogitComparison compare_logits(const std::vector<std::vector<float>>& a,
                                      const std::vector<std::vector<float>>& b) {
  LogitComparison c;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    for (size_t v = 0; v < a[i].size() && v < b[i].size(); ++v) {
      c.max_abs_diff = std::max(c.max_abs_diff, std::fabs(a[i][v] - b[i][v]));
    }
    c.top1_agree += std::max_element(a[i].begin(), a[i].end()) - a[i].begin() ==
                    std::max_element(b[i].begin(), b[i].end()) - b[i].begin();
  }
  return c;
}

// ||a - b||_2 / ||b||_2 in double (the per-layer checks of the official numerics).
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Official numerics on a device against the CPU reference, per layer of captured hidden states:
// quantiser decisions flip on last-bit differences and compound over layers, so each layer is held
// against the effect of the contract itself (official vs plain on the CPU): within a quarter of it
// after layer 0, closer than plain numerics after every later layer — a skipped or misplaced
// quantiser puts the device on the plain side.
inline void expect_layers_near_official(const model::Capture& device, const model::Capture& cpu,
                                        const model::Capture& cpu_plain) {
  ASSERT_EQ(device.after_layer.size(), cpu.after_layer.size());
  ASSERT_EQ(cpu_plain.after_layer.size(), cpu.after_layer.size());
  ASSERT_FALSE(cpu.after_layer.empty());
  for (size_t l = 0; l < cpu.after_layer.size(); ++l) {
    const double device_vs_cpu = rel_l2(device.after_layer[l], cpu.after_layer[l]);
    const double plain_vs_official = rel_l2(cpu_plain.after_layer[l], cpu.after_layer[l]);
    std::printf("layer %zu: |device - cpu| / |cpu| = %.3g (official vs plain on the CPU: %.3g)\n", l, device_vs_cpu,
                plain_vs_official);
    EXPECT_LT(device_vs_cpu, (l == 0 ? 0.25 : 0.9) * plain_vs_official) << "layer " << l;
  }
}

inline std::vector<std::vector<float>> logits_of(const model::ForwardResult& r) {
  std::vector<std::vector<float>> out;
  const int64_t n = r.logits.shape[0], V = r.logits.shape[1];
  for (int64_t i = 0; i < n; ++i) out.emplace_back(r.logits.as<const float>() + i * V, r.logits.as<const float>() + (i + 1) * V);
  return out;
}

}  // namespace deepinfer::testing
