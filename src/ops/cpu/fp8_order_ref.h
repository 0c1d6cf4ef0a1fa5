// The FP8 order (src/kernels/gemm/fp8_gemv.cuh's header) on the host: one output's dot product
// of E4M3 weight and activation codes with per-128-input scales, in the order the Hopper kernels
// add it — each 128-input block's four k32 steps chained on the tensor core from zero (`part`),
// promoted as fmaf(part, s_w x s_a, sum) in block order within each canonical K sub-range
// (gemm_subrange), the sub-ranges' sums folded 0 + s_0 + s_1 + ... .
//
// The tensor core does not add a step's products exactly (docs/cuda.md "Session 45"), so a step
// is a model: Fp8MmaModel, the family tools/device/probes/wgmma_fp8_accum_probe.cu scores against
// the hardware bit for bit (the probe includes this header, so the model it confirms is the one
// this reference runs). Which member is Hopper's is the probe's answer (docs/cuda.md
// "Session 55"): until it has run, nothing uses this reference for a GPU comparison.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace deepinfer::ops::cpu {

// How a k32 step adds its 32 products onto the accumulator: in groups of `group` positions (in
// position order, or the A fragment's: 4-position chunks of the two 16-position halves
// interleaved), each group's terms — the exact sums of `chunk` consecutive products (1: the
// products themselves; 2 or 4: a multiplier tree's exact first levels) — aligned to its largest
// exponent E and truncated toward zero to multiples of 2^(E - bits); the accumulator is one of those
// terms (acc_aligned) or added after the group's truncated sum; the sum is rounded to F32
// (rounding).
struct Fp8MmaModel {
  enum class Rounding { kTowardZero, kNearestEven, kTowardZeroToBits };  // the last: to bits + 1 significant bits
  int group = 32;
  int chunk = 1;  // divides group
  int bits = 60;  // > ~30: no truncation of E4M3 products (the exact sum, then one rounding)
  bool acc_aligned = true;
  Rounding rounding = Rounding::kNearestEven;
  bool fragment_order = false;
};

// The step position of the model's i-th product.
inline int fp8_mma_position(int i, bool fragment_order) {
  return fragment_order ? ((i >> 3) << 2) + ((i >> 2) & 1) * 16 + (i & 3) : i;
}

namespace fp8_mma_detail {
inline double trunc_to(double x, int q_exp) { return std::trunc(std::ldexp(x, -q_exp)) * std::ldexp(1.0, q_exp); }
inline float round_f32(double s, Fp8MmaModel::Rounding r, int bits) {
  if (r == Fp8MmaModel::Rounding::kTowardZeroToBits && s != 0) s = trunc_to(s, std::ilogb(s) - bits);
  float f = static_cast<float>(s);  // to nearest even
  if (r != Fp8MmaModel::Rounding::kNearestEven && std::fabs(static_cast<double>(f)) > std::fabs(s))
    f = std::nextafter(f, 0.0f);
  return f;
}
}  // namespace fp8_mma_detail

// One k32 step: prod[p] = the exact product at step position p (E4M3 x E4M3: exact in double).
inline float fp8_mma_step(const double (&prod)[32], float acc, const Fp8MmaModel& m) {
  using fp8_mma_detail::trunc_to;
  for (int i0 = 0; i0 < 32; i0 += m.group) {
    double term[32];  // the group's chunk sums (exact: E4M3 products span far fewer than 53 bits)
    const int n_terms = m.group / m.chunk;
    for (int t = 0; t < n_terms; ++t) {
      term[t] = 0;
      for (int i = i0 + t * m.chunk; i < i0 + (t + 1) * m.chunk; ++i) term[t] += prod[fp8_mma_position(i, m.fragment_order)];
    }
    int emax = std::numeric_limits<int>::min();
    for (int t = 0; t < n_terms; ++t)
      if (term[t] != 0) emax = std::max(emax, std::ilogb(term[t]));
    const bool acc_term = m.acc_aligned && acc != 0;
    if (acc_term) emax = std::max(emax, std::ilogb(acc));
    double s = 0;
    if (emax != std::numeric_limits<int>::min()) {
      for (int t = 0; t < n_terms; ++t) s += trunc_to(term[t], emax - m.bits);
      if (acc_term) s += trunc_to(acc, emax - m.bits);
    }
    if (!m.acc_aligned) s += acc;
    acc = fp8_mma_detail::round_f32(s, m.rounding, m.bits);
  }
  return acc;
}

// One output of the FP8 order: a [K] and w [K] E4M3 codes (K a multiple of 128, physical input
// order), a_scale / w_scale [K / 128] their blocks' scales (powers of two).
float fp8_order_dot(const uint8_t* a, const float* a_scale, const uint8_t* w, const float* w_scale, int64_t K,
                    const Fp8MmaModel& model);

}  // namespace deepinfer::ops::cpu
