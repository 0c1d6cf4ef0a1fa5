// Helpers for the V4.1 model tests: loading tiny-v41 with prefill options, and running a prompt in
// chunks with the V4.1 batch fields (n_prompt, Engram look-back) filled.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "engine/loaded_model.h"
#include "model_test_util.h"
#include "test_models.h"

namespace deepinfer::testing {

inline std::unique_ptr<engine::LoadedModel> load_v41(model::Numerics numerics,
                                                     model::PrefillMode mode = model::PrefillMode::kExact,
                                                     int32_t keep = 140) {
  engine::LoadOptions o{numerics, "cpu"};
  o.prefill_mode = mode;
  o.keep_tokens = keep;
  auto lm = engine::load_model(synthetic_model_dir("tiny-v41"), o);
  EXPECT_TRUE(lm.is_ok()) << lm.status().to_string();
  return lm.is_ok() ? std::move(lm).value() : nullptr;
}

inline model::KvState make_v41_state(const engine::LoadedModel& lm, int32_t n_slots, int32_t n_blocks,
                                     int32_t block_tokens = 16) {
  model::KvStateOptions so{n_slots, n_blocks, block_tokens, lm.model->act_dtype()};
  model::KvState state(lm.config, so, lm.ops.get());
  for (int32_t s = 0; s < n_slots; ++s) state.reset_slot(s);
  return state;
}

// Logits at `wanted` positions of the prompt `ids` fed in chunks of `chunk` (n_prompt = prompt
// length on every step, as the engine passes it).
inline std::vector<std::vector<float>> run_v41(engine::LoadedModel& lm, model::KvState& state, const std::vector<int32_t>& ids,
                                               int64_t chunk, const std::vector<int32_t>& wanted, int32_t slot = 0,
                                               int32_t first_block = 0) {
  const int32_t n = static_cast<int32_t>(ids.size());
  const int32_t bt = state.options().block_tokens;
  const auto blocks = iota_blocks(first_block, n / bt + 1);
  std::vector<std::vector<float>> out;
  for (int32_t begin = 0; begin < n; begin += static_cast<int32_t>(chunk)) {
    const int32_t end = std::min<int32_t>(n, begin + static_cast<int32_t>(chunk));
    SeqChunk c{slot, std::vector<int32_t>(ids.begin() + begin, ids.begin() + end), begin, blocks};
    for (int32_t p : wanted)
      if (p >= begin && p < end) c.logit_offsets.push_back(p - begin);
    model::ForwardBatch b = make_batch({c});
    b.n_prompt = {n};
    auto r = lm.model->forward(b, state);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (!r.is_ok()) return out;
    for (auto& row : logits_of(*r)) out.push_back(std::move(row));
  }
  return out;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

inline int64_t argmax(const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); }

}  // namespace deepinfer::testing
