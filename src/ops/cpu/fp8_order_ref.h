// The FP8 order (src/kernels/gemm/fp8_gemv.cuh's header) on the host: one output's dot product
// of E4M3 weight and activation codes with per-128-input scales, in the order the Hopper kernels
// add it — each 128-input block's four k32 steps chained on the tensor core from zero (`part`),
// promoted as fmaf(part, s_w x s_a, sum) in block order within each canonical K sub-range
// (gemm_subrange), the sub-ranges' sums folded 0 + s_0 + s_1 + ... .
//
// The tensor core does not add a step's products exactly (docs/cuda.md "Session 45"), so a step
// is a model: Fp8MmaModel, the family tools/device/probes/wgmma_fp8_accum_probe.cu scores against
// the hardware bit for bit (the probe includes this header, so the model it confirms is the one
// this reference runs). Which member is Hopper's is the probe's answer: its first run matched
// none of the first family (docs/cuda.md "Session 56"), so CpuOps::linear takes the order only
// with a model named explicitly (fp8_order_model_from_env, CpuOps::set_fp8_order_model).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace deepinfer::ops::cpu {

// How a k32 step adds its 32 products onto the accumulator: in groups of `group` positions (in
// position order, or the A fragment's: 4-position chunks of the two 16-position halves
// interleaved), each group's terms — the exact sums of `chunk` consecutive products (1: the
// products themselves; 2 or 4: a multiplier tree's exact first levels) — aligned to the largest
// exponent E and truncated (toward zero, or toward minus infinity as a two's-complement shifter
// does) to multiples of 2^(E - bits); E is the terms' own largest exponent, or with
// nominal_exponent the largest sum of the operands' exponent fields (a product of significands in
// [1, 4) aligned before it is normalised: E one below the product's exponent where the
// significands' product carries); the accumulator is one of those terms (acc_aligned, its own
// exponent) or added after the group's truncated sum; the sum is rounded to F32 (rounding).
struct Fp8MmaModel {
  enum class Rounding { kTowardZero, kNearestEven, kTowardZeroToBits };  // the last: to bits + extra significant bits
  enum class Truncation { kTowardZero, kFloor };
  int group = 32;
  int chunk = 1;  // divides group
  int bits = 60;  // > ~30: no truncation of E4M3 products (the exact sum, then one rounding)
  bool acc_aligned = true;
  Rounding rounding = Rounding::kNearestEven;
  bool fragment_order = false;
  bool nominal_exponent = false;  // needs the operands' exponents (fp8_mma_step_codes)
  Truncation truncation = Truncation::kTowardZero;
  int extra = 1;  // kTowardZeroToBits keeps bits + extra significant bits
};

// The step position of the model's i-th product.
inline int fp8_mma_position(int i, bool fragment_order) {
  return fragment_order ? ((i >> 3) << 2) + ((i >> 2) & 1) * 16 + (i & 3) : i;
}

namespace fp8_mma_detail {
inline double quantize(double x, int q_exp, Fp8MmaModel::Truncation t) {
  const double s = std::ldexp(x, -q_exp);
  return (t == Fp8MmaModel::Truncation::kFloor ? std::floor(s) : std::trunc(s)) * std::ldexp(1.0, q_exp);
}
inline float round_f32(double s, const Fp8MmaModel& m) {
  using R = Fp8MmaModel::Rounding;
  if (m.rounding == R::kTowardZeroToBits && s != 0)
    s = quantize(s, std::ilogb(s) - (m.bits + m.extra - 1), Fp8MmaModel::Truncation::kTowardZero);
  float f = static_cast<float>(s);  // to nearest even
  if (m.rounding != R::kNearestEven && std::fabs(static_cast<double>(f)) > std::fabs(s)) f = std::nextafter(f, 0.0f);
  return f;
}
// The exponent field's power of an E4M3 code (subnormals: -6, their significand 0.m).
inline int e4m3_nominal_exponent(uint8_t code) {
  const int e = (code >> 3) & 15;
  return e == 0 ? -6 : e - 7;
}
}  // namespace fp8_mma_detail

// One k32 step: prod[p] = the exact product at step position p (E4M3 x E4M3: exact in double);
// nominal[p] (with nominal_exponent) the sum of its operands' exponent fields.
inline float fp8_mma_step(const double (&prod)[32], float acc, const Fp8MmaModel& m, const int* nominal = nullptr) {
  using fp8_mma_detail::quantize;
  const bool use_nominal = m.nominal_exponent && nominal != nullptr;
  for (int i0 = 0; i0 < 32; i0 += m.group) {
    double term[32];  // the group's chunk sums (exact: E4M3 products span far fewer than 53 bits)
    int term_exp[32];
    const int n_terms = m.group / m.chunk;
    for (int t = 0; t < n_terms; ++t) {
      term[t] = 0;
      term_exp[t] = std::numeric_limits<int>::min();
      for (int i = i0 + t * m.chunk; i < i0 + (t + 1) * m.chunk; ++i) {
        const int p = fp8_mma_position(i, m.fragment_order);
        term[t] += prod[p];
        if (use_nominal && prod[p] != 0) term_exp[t] = std::max(term_exp[t], nominal[p]);
      }
      if (!use_nominal && term[t] != 0) term_exp[t] = std::ilogb(term[t]);
    }
    int emax = std::numeric_limits<int>::min();
    for (int t = 0; t < n_terms; ++t) emax = std::max(emax, term_exp[t]);
    const bool acc_term = m.acc_aligned && acc != 0;
    if (acc_term) emax = std::max(emax, std::ilogb(acc));
    double s = 0;
    if (emax != std::numeric_limits<int>::min()) {
      for (int t = 0; t < n_terms; ++t) s += quantize(term[t], emax - m.bits, m.truncation);
      if (acc_term) s += quantize(acc, emax - m.bits, m.truncation);
    }
    if (!m.acc_aligned) s += acc;
    acc = fp8_mma_detail::round_f32(s, m);
  }
  return acc;
}

// The same step from the operands' E4M3 codes a [32], b [32] (step positions).
float fp8_mma_step_codes(const uint8_t* a, const uint8_t* b, float acc, const Fp8MmaModel& m);

// A model as text ("g=32,n=13,nominal=1,trunc=floor,acc=1,rnd=rz,extra=1,ch=1,lay=0"; omitted keys
// keep their defaults) and back; parse returns false on an unknown key or value.
bool parse_fp8_mma_model(const char* text, Fp8MmaModel& m);
std::string fp8_mma_model_text(const Fp8MmaModel& m);

// The member of the family Hopper's `wgmma.*.e4m3` (F32 accumulator) computes, as the probe
// (tools/device/probes/wgmma_fp8_accum_probe.cu) found it on an H100 in session 58: every one of
// 21 x 2,048 outputs over seven input sets (bench/results/wgmma_fp8_accum_probe_h100_2026-12-07_s58.json) —
// one group of 32 products aligned on the operands' nominal exponent sum, 13 bits kept below the
// largest, truncated toward zero, the accumulator added in that alignment, the sum cut to the
// F32 grid toward zero with one extra bit.
inline constexpr const char* kHopperFp8MmaModel = "g=32,n=13,nominal=1,trunc=zero,acc=1,rnd=rzbits,extra=1,ch=1,lay=0";

// The step model the CPU reference's FP8 order runs when DEEPINFER_GEMM_FP8_ORDER=1: the one
// DEEPINFER_FP8_MMA_MODEL names (parse_fp8_mma_model's text; a clear error when it is not one),
// else kHopperFp8MmaModel. Without the order: none (the reference keeps the exact dot).
std::optional<Fp8MmaModel> fp8_order_model_from_env();

// One output of the FP8 order: a [K] and w [K] E4M3 codes (K a multiple of 128, physical input
// order), a_scale / w_scale [K / 128] their blocks' scales (powers of two).
float fp8_order_dot(const uint8_t* a, const float* a_scale, const uint8_t* w, const float* w_scale, int64_t K,
                    const Fp8MmaModel& model);

}  // namespace deepinfer::ops::cpu
