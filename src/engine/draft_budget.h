// Confidence-scheduled verification (model_v41_flash.md §7.3, DSpark's load-aware draft budget;
// upstream DeepInfer's DEEPINFER_ENABLE_MTP_VARLEN): how many of each request's drafts the next
// step verifies. Request r's draft i survives verification with estimated probability
// S[r][i] = prod_{j <= i} c[r][j] (the drafter's per-draft confidences); a step verifying B drafts
// is expected to emit n + (the B largest survivals) tokens (n: its decoding requests, one token
// each whatever happens) and to take cost(base + B) seconds. The budget is the B that maximises
// tokens per second, admitted globally by descending survival — prefix-closed per request, since
// a request's survivals never increase. Plain data: no engine, no model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::engine {

// A step's time as a function of its token count, t(T) = a + b T, fitted by least squares over
// the steps observed so far, older ones weighing less (each observation multiplies the weight of
// those before by `decay`), so the fit follows a changing load.
class StepCostModel {
 public:
  explicit StepCostModel(double decay = 0.97) : decay_(decay) {}
  void observe(int64_t tokens, double seconds);
  // Whether the fit stands: steps of at least two sizes seen.
  bool fitted() const;
  // a and b of the fit, each clamped at 0 (a negative slope means tokens are free).
  double intercept() const;
  double slope() const;
  double predict(int64_t tokens) const { return intercept() + slope() * static_cast<double>(tokens); }

 private:
  double fit_slope() const;
  double decay_;
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;  // decayed sums of 1, T, t, T^2, T t
};

// Drafts kept per request (a prefix of each request's list). survival[r]: request r's survival
// estimates, non-increasing; base_tokens: the next step's tokens without drafts. Before `cost`
// is fitted, and when its slope is 0, every draft is kept. Drafts whose survival is below
// `min_survival` are never kept. Ties go to the lower request index.
std::vector<int32_t> draft_budget(std::span<const std::vector<double>> survival, int64_t base_tokens,
                                  const StepCostModel& cost, double min_survival);

}  // namespace deepinfer::engine
