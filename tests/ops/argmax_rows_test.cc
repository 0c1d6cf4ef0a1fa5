// Ops::argmax_rows on the CPU reference is greedy sampling's choice: for rows with ties, NaN, +inf
// and nothing finite it gives the token the host sampler gives a plain greedy row (and
// sanitize_logits + argmax_lowest_id, the steps it mirrors). The CUDA op is held to this one by
// cuda_ops_test (ArgmaxRowsIsTheCpuChoice); the engine samples plain greedy steps with it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "sample/logits_processors.h"
#include "sample/sampler.h"

namespace deepinfer::ops {
namespace {

using tensor::DType;
using tensor::TensorView;

TEST(ArgmaxRowsTest, IsTheHostSamplersGreedyChoice) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(7);
  cpu::CpuOps ops;
  for (const int64_t V : {int64_t{1}, int64_t{5}, int64_t{300}}) {
    const int64_t R = 40, ld = V + 2;  // padded rows
    TensorView buf = ops.alloc_persistent(DType::kF32, {R, ld});
    float* h = buf.as<float>();
    std::uniform_int_distribution<int> small(-3, 3), kind(0, 9);
    for (int64_t i = 0; i < R * ld; ++i) {
      const int k = kind(rng);  // mostly small integers (ties), some specials
      h[i] = k == 0 ? nan : k == 1 ? -kInf : k == 2 && i % 7 == 0 ? kInf
             : k == 3 && i % 5 == 0 ? std::numeric_limits<float>::max() : static_cast<float>(small(rng));
    }
    for (int64_t i = 0; i < V; ++i) h[0 * ld + i] = nan, h[1 * ld + i] = -kInf;  // nothing finite
    TensorView logits = buf;
    logits.shape[1] = V;  // [R, V], row stride ld
    TensorView ids = ops.alloc_persistent(DType::kI32, {R});
    ops.argmax_rows(logits, ids);

    auto sampler = sample::Sampler::create({.n_vocab = static_cast<int32_t>(V)});
    ASSERT_TRUE(sampler.is_ok());
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    ASSERT_TRUE(sample::is_plain_argmax(greedy, 0, false));
    sample::RowInput row;
    row.params = &greedy;
    for (int64_t r = 0; r < R; ++r) {
      std::vector<float> z(h + r * ld, h + r * ld + V);
      const sample::RowOutput out = sampler->sample_row(z, row);
      EXPECT_EQ(ids.as<int32_t>()[r], out.token) << "V " << V << ", row " << r;
      sample::sanitize_logits(z);
      EXPECT_EQ(ids.as<int32_t>()[r], sample::argmax_lowest_id(z)) << "V " << V << ", row " << r;
    }
    EXPECT_EQ(ids.as<int32_t>()[0], -1);
    EXPECT_EQ(ids.as<int32_t>()[1], -1);
  }
}

}  // namespace
}  // namespace deepinfer::ops
