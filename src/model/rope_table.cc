#include "model/rope_table.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace deepinfer::model {

std::vector<float> rope_inv_freq(double base, int64_t n_rope, const loader::RopeScaling& scaling, bool yarn) {
  const int64_t half = n_rope / 2;
  std::vector<float> out(static_cast<size_t>(half));
  const float fbase = static_cast<float>(base);
  for (int64_t i = 0; i < half; ++i) {
    const float pos_freq = std::pow(fbase, static_cast<float>(2 * i) / static_cast<float>(n_rope));
    out[i] = 1.0f / pos_freq;
  }
  if (!yarn || !scaling.yarn) return out;
  // Correction range: dims whose wavelength fits fewer than beta rotations in the original
  // context keep their frequency (extrapolate); the rest are divided by `factor` (interpolate).
  auto correction_dim = [&](double n_rot) {
    return (static_cast<double>(n_rope) *
            std::log(static_cast<double>(scaling.original_max_position_embeddings) / (n_rot * 2 * std::numbers::pi))) /
           (2 * std::log(base));
  };
  double low = std::floor(correction_dim(scaling.beta_fast));
  double high = std::ceil(correction_dim(scaling.beta_slow));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(n_rope - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  const float factor = static_cast<float>(scaling.factor);
  for (int64_t i = 0; i < half; ++i) {
    const float ramp = std::clamp(static_cast<float>((static_cast<double>(i) - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;  // weight of the original frequency
    const float pos_freq = 1.0f / out[i];
    out[i] = (1.0f / (factor * pos_freq)) * (1.0f - extrapolation) + (1.0f / pos_freq) * extrapolation;
  }
  return out;
}

std::vector<float> layer_inv_freq(const loader::ModelConfig& c, int ratio) {
  if (ratio == 0) return rope_inv_freq(c.rope_theta, c.qk_rope_head_dim, c.rope_scaling, /*yarn=*/false);
  return rope_inv_freq(c.compress_rope_theta, c.qk_rope_head_dim, c.rope_scaling, /*yarn=*/true);
}

}  // namespace deepinfer::model
