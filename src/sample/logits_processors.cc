// Single-row sampling steps (contracts in logits_processors.h). Plain loops over the row in id
// order; the only sort is in top-p, over the finite logits, with a total order (logit desc,
// id asc) so equal inputs always give equal outputs.
#include "sample/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace deepinfer::sample {
namespace {

int64_t count_finite(std::span<const float> logits) {
  int64_t n = 0;
  for (float v : logits) n += (v != kNegInf);
  return n;
}

}  // namespace

void sanitize_logits(std::span<float> logits) {
  for (float& v : logits) {
    if (std::isnan(v)) {
      v = kNegInf;
    } else if (v == std::numeric_limits<float>::infinity()) {
      v = std::numeric_limits<float>::max();
    }
  }
}

void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias) {
  const auto n = static_cast<int64_t>(logits.size());
  for (const auto& [id, b] : bias) {
    if (id >= 0 && id < n) logits[id] += b;
  }
}

void apply_token_bitmask(std::span<float> logits, std::span<const uint32_t> bitmask) {
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!bitmask_allows(bitmask, static_cast<int32_t>(i))) logits[i] = kNegInf;
  }
}

void apply_allowed_token_ids(std::span<float> logits, std::span<const int32_t> allowed) {
  if (allowed.empty()) return;
  std::vector<uint8_t> keep(logits.size(), 0);
  for (int32_t id : allowed) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) keep[id] = 1;
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!keep[i]) logits[i] = kNegInf;
  }
}

bool suppress_stop_tokens(std::span<float> logits, std::span<const int32_t> stop_ids) {
  const auto n = static_cast<int64_t>(logits.size());
  std::vector<int32_t> finite_stops;  // distinct stop ids that are still possible
  for (int32_t id : stop_ids) {
    if (id >= 0 && id < n && logits[id] != kNegInf) finite_stops.push_back(id);
  }
  std::sort(finite_stops.begin(), finite_stops.end());
  finite_stops.erase(std::unique(finite_stops.begin(), finite_stops.end()), finite_stops.end());
  if (static_cast<int64_t>(finite_stops.size()) == count_finite(logits)) return false;
  for (int32_t id : finite_stops) logits[id] = kNegInf;
  return true;
}

void apply_penalties(std::span<float> logits, const TokenHistory& history,
                     float repetition_penalty, float presence_penalty, float frequency_penalty) {
  const auto n = static_cast<int64_t>(logits.size());
  if (repetition_penalty != 1.0f) {
    for (int32_t id : history.seen()) {
      if (id < 0 || id >= n) continue;
      float& v = logits[id];
      v = v > 0.0f ? v / repetition_penalty : v * repetition_penalty;
    }
  }
  if (presence_penalty != 0.0f || frequency_penalty != 0.0f) {
    for (const TokenCount& tc : history.output_counts()) {
      if (tc.token < 0 || tc.token >= n) continue;
      float& v = logits[tc.token];
      v -= frequency_penalty * static_cast<float>(tc.count);
      v -= presence_penalty;
    }
  }
}

int32_t argmax_lowest_id(std::span<const float> logits) {
  int32_t best = -1;
  float best_v = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    // Strict '>' while scanning ids upwards keeps the lowest id among equal maxima.
    if (logits[i] > best_v) best_v = logits[i], best = static_cast<int32_t>(i);
  }
  return best;
}

float max_finite(std::span<const float> logits) {
  float m = kNegInf;
  for (float v : logits) m = std::max(m, v);
  return m;
}

bool apply_temperature(std::span<float> logits, float temperature) {
  const float m = max_finite(logits);
  if (m == kNegInf) return false;
  for (float& v : logits) v = (v - m) / temperature;  // -inf stays -inf
  return true;
}

void apply_top_k(std::span<float> logits, int32_t k) {
  if (k <= 0) return;
  thread_local std::vector<float> finite;  // reused: a fresh V-sized vector costs page faults
  finite.clear();
  for (float v : logits) {
    if (v != kNegInf) finite.push_back(v);
  }
  if (static_cast<int64_t>(finite.size()) <= k) return;
  std::nth_element(finite.begin(), finite.begin() + (k - 1), finite.end(), std::greater<float>());
  const float threshold = finite[k - 1];
  for (float& v : logits) {
    if (v < threshold) v = kNegInf;
  }
}

void apply_top_p(std::span<float> logits, float top_p) {
  if (top_p >= 1.0f) return;
  const float m = max_finite(logits);
  if (m == kNegInf) return;
  // The cut is the first token, in the order (logit desc, id asc), at which the running mass
  // reaches top_p * total. Only that order's prefix up to the cut matters, so only the tokens of
  // a prefix that surely holds it are sorted: a coarse histogram of m - logit (bins of 1/4) finds
  // the smallest prefix of bins whose mass reaches the target with a margin far above any
  // difference between summation orders; the bins are monotone in the logit, so those bins'
  // tokens are a prefix of the order, and the running mass over them is the full sort's bit for
  // bit. (A real model's top-p mass sits in a few hundred tokens: 129,280 sorted before.)
  constexpr int kBins = 256;
  auto bin_of = [m](float v) {
    const double d = (static_cast<double>(m) - static_cast<double>(v)) * 4.0;
    return d < kBins - 1 ? static_cast<int>(d) : kBins - 1;
  };
  double bin_mass[kBins] = {};
  double total = 0.0;  // summed in id order, independent of the sort below
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == kNegInf) continue;
    const double p = std::exp(static_cast<double>(logits[i]) - m);
    total += p;
    bin_mass[bin_of(logits[i])] += p;
  }
  const double target = static_cast<double>(top_p) * total;
  int last_bin = kBins - 1;  // the prefix's last bin (all of them when the margin is never reached)
  double prefix = 0.0;
  for (int b = 0; b < kBins - 1; ++b) {
    prefix += bin_mass[b];
    if (prefix >= target * (1.0 + 1e-6)) {
      last_bin = b;
      break;
    }
  }
  thread_local std::vector<int32_t> order;  // reused across calls, see apply_top_k
  order.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != kNegInf && bin_of(logits[i]) <= last_bin) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  double mass = 0.0;
  for (size_t j = 0; j < order.size(); ++j) {
    mass += std::exp(static_cast<double>(logits[order[j]]) - m);
    if (mass >= target) {
      // Tokens tied with the boundary token stay: the cut is a threshold on the logit value.
      const float threshold = logits[order[j]];
      for (float& v : logits) {
        if (v < threshold) v = kNegInf;
      }
      return;
    }
  }
  // Not reached: with every bin in the prefix the running mass is the whole (rounded) total,
  // which the target (top_p < 1 of it) stays below; kept as the full sort's outcome (no cut).
}

void apply_min_p(std::span<float> logits, float min_p) {
  if (min_p <= 0.0f) return;
  const float m = max_finite(logits);
  if (m == kNegInf) return;
  for (float& v : logits) {
    if (v != kNegInf && std::exp(static_cast<double>(v) - m) < static_cast<double>(min_p)) {
      v = kNegInf;
    }
  }
}

}  // namespace deepinfer::sample
