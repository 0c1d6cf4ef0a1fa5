// The FP8 order's dot product on the host (fp8_order_ref.h): the Hopper kernels' block, sub-range
// and fold structure around a model of the tensor core's k32 step.
#include "ops/cpu/fp8_order_ref.h"

#include <algorithm>
#include <cstdlib>

#include "base/check.h"
#include "kernels/common/env_knob.h"
#include "kernels/gemm/canonical_k.h"
#include "kernels/gemm/fp8_order_layout.h"
#include "tensor/number_formats.h"

namespace deepinfer::ops::cpu {

std::optional<Fp8MmaModel> fp8_order_model_from_env() {
  if (kernels::env_tristate("DEEPINFER_GEMM_FP8_ORDER") != 1) return std::nullopt;
  const char* env = std::getenv("DEEPINFER_FP8_MMA_MODEL");
  if (env == nullptr) env = kHopperFp8MmaModel;
  Fp8MmaModel m;
  DI_CHECK(parse_fp8_mma_model(env, m),
           "DEEPINFER_FP8_MMA_MODEL='{}' is not a step model (e.g. g=32,n=13,nominal=1,trunc=zero,acc=1,rnd=rz)", env);
  return m;
}

float fp8_order_dot(const uint8_t* a, const float* a_scale, const uint8_t* w, const float* w_scale, int64_t K,
                    const Fp8MmaModel& model) {
  constexpr int kBlock = 128;
  DI_CHECK(K > 0 && K % kBlock == 0, "fp8_order_dot: K {} is not whole 128-input blocks", K);
  const int64_t R = kernels::gemm_subrange(K);  // a multiple of 128
  float total = 0.0f;
  for (int64_t r0 = 0; r0 < K; r0 += R) {
    float sum = 0.0f;  // the sub-range's blocks, promoted in order
    for (int64_t b0 = r0; b0 < std::min(K, r0 + R); b0 += kBlock) {
      uint8_t sa[4][32], sw[4][32];  // [step][position]: input k of the block sits where fp8_step_pos puts it
      for (int k = 0; k < kBlock; ++k) {
        const kernels::Fp8StepPos sp = kernels::fp8_step_pos(k);
        sa[sp.step][sp.pos] = a[b0 + k];
        sw[sp.step][sp.pos] = w[b0 + k];
      }
      float part = 0.0f;  // the block's four steps chained, the first from zero
      for (int s = 0; s < 4; ++s) part = fp8_mma_step_codes(sw[s], sa[s], part, model);
      sum = std::fmaf(part, w_scale[b0 / kBlock] * a_scale[b0 / kBlock], sum);
    }
    total = total + sum;  // 0 + s_0 + s_1 + ...: the clusters' fold (one sub-range: s_0 itself)
  }
  return total;
}

}  // namespace deepinfer::ops::cpu
