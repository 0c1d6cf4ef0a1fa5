// Confidence-scheduled verification: the step-cost fit and the global draft budget (draft_budget.h).
#include "engine/draft_budget.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace deepinfer::engine {

void StepCostModel::observe(int64_t tokens, double seconds) {
  if (!(seconds >= 0.0) || !std::isfinite(seconds) || tokens <= 0) return;
  const double t = static_cast<double>(tokens);
  w_ = decay_ * w_ + 1.0;
  x_ = decay_ * x_ + t;
  y_ = decay_ * y_ + seconds;
  xx_ = decay_ * xx_ + t * t;
  xy_ = decay_ * xy_ + t * seconds;
}

bool StepCostModel::fitted() const {
  // The weighted variance of T: zero while every step seen had the same size.
  return w_ > 0 && xx_ * w_ - x_ * x_ > 1e-9 * std::max(1.0, xx_ * w_);
}

double StepCostModel::fit_slope() const { return (w_ * xy_ - x_ * y_) / (w_ * xx_ - x_ * x_); }

double StepCostModel::slope() const { return fitted() ? std::max(0.0, fit_slope()) : 0.0; }

double StepCostModel::intercept() const {
  if (w_ <= 0) return 0.0;
  if (!fitted()) return y_ / w_;
  return std::max(0.0, (y_ - std::max(0.0, fit_slope()) * x_) / w_);
}

std::vector<int32_t> draft_budget(std::span<const std::vector<double>> survival, int64_t base_tokens,
                                  const StepCostModel& cost, double min_survival) {
  std::vector<int32_t> keep(survival.size(), 0);
  // Every candidate slot (survival, request, index), best first; a request's slots come in order.
  std::vector<std::tuple<double, size_t, int32_t>> slots;
  for (size_t r = 0; r < survival.size(); ++r) {
    for (size_t i = 0; i < survival[r].size() && survival[r][i] >= min_survival; ++i) {
      slots.emplace_back(survival[r][i], r, static_cast<int32_t>(i));
    }
  }
  std::stable_sort(slots.begin(), slots.end(), [](const auto& a, const auto& b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
    return std::get<1>(a) != std::get<1>(b) ? std::get<1>(a) < std::get<1>(b) : std::get<2>(a) < std::get<2>(b);
  });
  size_t budget = slots.size();
  if (cost.fitted() && cost.slope() > 0.0) {
    // Tokens per second for each budget B: (n + sum of the B best survivals) / cost(base + B).
    double tokens = static_cast<double>(survival.size()), best_rate = -1.0;
    for (size_t b = 0; b <= slots.size(); ++b) {
      if (b > 0) tokens += std::get<0>(slots[b - 1]);
      const double rate = tokens / std::max(cost.predict(base_tokens + static_cast<int64_t>(b)), 1e-12);
      if (rate > best_rate) {
        best_rate = rate;
        budget = b;
      }
    }
  }
  for (size_t s = 0; s < budget; ++s) ++keep[std::get<1>(slots[s])];
  return keep;
}

}  // namespace deepinfer::engine
