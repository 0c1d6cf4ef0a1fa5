// Test-only statistics: Pearson chi-square against expected probabilities, with the critical
// value for significance 0.001 from the Wilson–Hilferty approximation. Draws in the tests come
// from fixed seeds, so every test is deterministic: the threshold is checked once, forever.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::sample::testing {

struct ChiSquare {
  double statistic = 0.0;
  int df = 0;
  double critical = 0.0;         // chi-square quantile at 1 - 0.001 for df
  int64_t outside_support = 0;  // draws of a token whose expected probability is 0
  bool pass() const { return outside_support == 0 && statistic <= critical; }
  std::string describe() const {
    return "chi2 = " + std::to_string(statistic) + " (df " + std::to_string(df) +
           ", critical at p = 0.001: " + std::to_string(critical) +
           "), draws outside the support: " + std::to_string(outside_support);
  }
};

// Wilson–Hilferty: chi2_q(df) ~= df (1 - 2/(9 df) + z_q sqrt(2/(9 df)))^3, z_0.999 = 3.0902.
inline double chi_square_critical_0001(int df) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + 3.0902 * std::sqrt(a), 3.0);
}

inline ChiSquare chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  ChiSquare r;
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0.0) {
      r.outside_support += counts[i];
      continue;
    }
    const double expected = probs[i] * static_cast<double>(n);
    r.statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++cells;
  }
  r.df = std::max(cells - 1, 1);
  r.critical = chi_square_critical_0001(r.df);
  return r;
}

}  // namespace deepinfer::sample::testing
