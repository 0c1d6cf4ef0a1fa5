// Separable bicubic resampling: a horizontal pass into an F32 buffer, then a vertical pass,
// rounding to 8 bits (clamped) once at the end.
#include "vision/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace deepinfer::vision {
namespace {

// Keys' cubic convolution kernel with a = -0.5 (support 2).
double cubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

// For each output sample i of an axis resampled from n_in to n_out: the first input index and the
// normalised weights of the inputs it reads. Sample centres are aligned (pixel (i + 0.5) * scale);
// when shrinking, the kernel is stretched by the scale so every input pixel contributes.
struct AxisTaps {
  std::vector<int64_t> first;
  std::vector<std::vector<float>> weights;
};
AxisTaps axis_taps(int64_t n_in, int64_t n_out) {
  const double scale = static_cast<double>(n_in) / static_cast<double>(n_out);
  const double stretch = std::max(scale, 1.0), support = 2.0 * stretch;
  AxisTaps taps;
  taps.first.resize(static_cast<size_t>(n_out));
  taps.weights.resize(static_cast<size_t>(n_out));
  for (int64_t i = 0; i < n_out; ++i) {
    const double centre = (static_cast<double>(i) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(std::floor(centre - support + 0.5)));
    const int64_t hi = std::min<int64_t>(n_in, static_cast<int64_t>(std::floor(centre + support + 0.5)));
    std::vector<double> w;
    double sum = 0.0;
    for (int64_t j = lo; j < hi; ++j) {
      w.push_back(cubic((static_cast<double>(j) - centre + 0.5) / stretch));
      sum += w.back();
    }
    taps.first[i] = lo;
    for (double v : w) taps.weights[i].push_back(static_cast<float>(sum != 0.0 ? v / sum : 0.0));
  }
  return taps;
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& src, int64_t width, int64_t height) {
  if (width == src.width && height == src.height) return src;
  const AxisTaps tx = axis_taps(src.width, width), ty = axis_taps(src.height, height);
  // Horizontal pass: [src.height, width, 3] F32.
  std::vector<float> mid(static_cast<size_t>(src.height * width * 3));
  for (int64_t y = 0; y < src.height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        float acc = 0.0f;
        for (size_t k = 0; k < tx.weights[x].size(); ++k) acc += tx.weights[x][k] * src.at(y, tx.first[x] + k, c);
        mid[(y * width + x) * 3 + c] = acc;
      }
    }
  }
  RgbImage out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<size_t>(width * height * 3));
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        float acc = 0.0f;
        for (size_t k = 0; k < ty.weights[y].size(); ++k)
          acc += ty.weights[y][k] * mid[((ty.first[y] + static_cast<int64_t>(k)) * width + x) * 3 + c];
        out.rgb[(y * width + x) * 3 + c] = static_cast<uint8_t>(std::clamp(std::lround(acc), 0L, 255L));
      }
    }
  }
  return out;
}

}  // namespace deepinfer::vision
