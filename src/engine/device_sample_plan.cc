// DeviceSamplePlan (see device_sample_plan.h): the host sampler's steps 1-4 as sparse device inputs.
// Each mirrors Sampler::preprocess (sampler.cc) and sample/logits_processors.cc: ids outside the
// vocabulary are ignored as there, stop ids deduplicated as suppress_stop_tokens does, and the
// penalties' token sets are TokenHistory's (seen: prompt and output; output counts).
#include "engine/device_sample_plan.h"

#include <algorithm>

#include "sample/logits_processors.h"

namespace deepinfer::engine {
namespace {

bool penalties_active(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

}  // namespace

void DeviceSamplePlan::add(size_t row, const sample::RowInput& in, const sample::SamplerConfig& config,
                           int32_t pending) {
  const SamplingParams& p = *in.params;
  if (rows.size() <= row) rows.resize(row + 1);
  rows[row] = ops::Ops::SampleRow{p.temperature, p.min_p, in.seed, in.position, p.top_k, p.top_p};
  if (p.logprobs.has_value()) n_top = std::max(n_top, *p.logprobs);
  const bool suppress = in.n_generated < p.min_tokens;
  const bool masked = !p.allowed_token_ids.empty() || !in.token_bitmask.empty();
  if (p.logit_bias.empty() && !masked && !suppress && !penalties_active(p)) return;
  if (adjust_rows.size() <= row) adjust_rows.resize(row + 1);
  ops::Ops::AdjustRow a;
  a.repetition = p.repetition_penalty;
  a.presence = p.presence_penalty;
  a.frequency = p.frequency_penalty;
  if (penalties_active(p)) a.pending = pending;  // bias, masks and stops do not read the history
  const int32_t V = config.n_vocab;
  // Entries: one per distinct token the bias or the penalties touch. `at` maps a token to its
  // entry while this row is built (thread-local: the vocabulary-sized index is reused).
  thread_local std::vector<int32_t> at;
  if (at.size() < static_cast<size_t>(V)) at.assign(static_cast<size_t>(V), -1);
  a.entry_begin = static_cast<int32_t>(entries.size());
  auto entry = [&](int32_t token) -> ops::Ops::AdjustEntry& {
    if (at[token] < 0) {
      at[token] = static_cast<int32_t>(entries.size());
      entries.push_back(ops::Ops::AdjustEntry{token, 0.0f, 0, 0});
    }
    return entries[static_cast<size_t>(at[token])];
  };
  for (const auto& [id, b] : p.logit_bias) {
    if (id >= 0 && id < V) entry(id).bias = b;
  }
  if (p.repetition_penalty != 1.0f) {
    for (int32_t id : in.history->seen()) {
      if (id >= 0 && id < V) entry(id).seen = 1;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    for (const sample::TokenCount& tc : in.history->output_counts()) {
      if (tc.token >= 0 && tc.token < V) entry(tc.token).output_count = tc.count;
    }
  }
  a.entry_end = static_cast<int32_t>(entries.size());
  for (int32_t e = a.entry_begin; e < a.entry_end; ++e) at[entries[static_cast<size_t>(e)].token] = -1;
  // Stops: distinct ids in the vocabulary (suppress_stop_tokens' set).
  a.stop_begin = static_cast<int32_t>(stops.size());
  if (suppress) {
    std::vector<int32_t> ids = p.stop_token_ids;
    if (!p.ignore_eos) ids.insert(ids.end(), config.eos_token_ids.begin(), config.eos_token_ids.end());
    std::erase_if(ids, [&](int32_t id) { return id < 0 || id >= V; });
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    stops.insert(stops.end(), ids.begin(), ids.end());
  }
  a.stop_end = static_cast<int32_t>(stops.size());
  // The token mask: the grammar's bitmask ANDed with allowed_token_ids (both only clear tokens).
  if (masked) {
    const auto words = static_cast<size_t>(sample::bitmask_words(V));
    a.mask_row = static_cast<int32_t>(masks.size() / words);
    const size_t base = masks.size();
    if (in.token_bitmask.empty()) {
      masks.resize(base + words, ~0u);
    } else {
      masks.insert(masks.end(), in.token_bitmask.begin(), in.token_bitmask.end());
    }
    if (!p.allowed_token_ids.empty()) {
      std::vector<uint32_t> allowed(words, 0u);
      for (int32_t id : p.allowed_token_ids) {
        if (id >= 0 && id < V) allowed[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
      }
      for (size_t w = 0; w < words; ++w) masks[base + w] &= allowed[w];
    }
  }
  adjust_rows[row] = a;
}

void DeviceSamplePlan::clear() {
  rows.clear();
  n_top = -1;
  adjust_rows.clear();
  entries.clear();
  stops.clear();
  masks.clear();
  pending_ids = {};
}

void DeviceSamplePlan::finish(size_t n_rows) {
  rows.resize(std::max(rows.size(), n_rows));
  // Rows never added (ended in flight) or without adjustments keep AdjustRow's identity defaults.
  if (adjusts()) adjust_rows.resize(std::max(adjust_rows.size(), n_rows));
}

}  // namespace deepinfer::engine
