// CPU reference sampler cost per row at the DeepSeek vocabulary (V = 129,280): greedy, plain
// T = 1, top-k 50 + top-p 0.95 + min-p, top-p alone (full sort), each with and without a
// grammar mask and top-20 logprobs. This is the CPU path; the CUDA kernel has its own bench.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sample/logits_processors.h"
#include "sample/sampler.h"

namespace deepinfer::sample {
namespace {

constexpr int32_t kVocab = 129280;

struct Fixture {
  std::vector<float> logits;
  std::vector<uint32_t> mask;
  TokenHistory history;
  Fixture() : logits(kVocab), mask(bitmask_words(kVocab)) {
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& v : logits) v = normal(rng);
    for (auto& w : mask) w = static_cast<uint32_t>(rng()) | static_cast<uint32_t>(rng());
    std::vector<int32_t> prompt(2000);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % kVocab);
    history = TokenHistory(prompt);
    for (int i = 0; i < 500; ++i) history.append(static_cast<int32_t>(rng() % kVocab));
  }
};

void run(benchmark::State& state, SamplingParams params, bool with_mask) {
  static const Fixture f;
  const Sampler sampler = Sampler::create({.n_vocab = kVocab, .eos_token_ids = {1}}).value();
  RowInput row{.params = &params, .history = &f.history, .n_generated = 500, .position = 2500,
               .seed = 7};
  if (with_mask) row.token_bitmask = f.mask;
  for (auto _ : state) {
    ++row.position;
    benchmark::DoNotOptimize(sampler.sample_row(f.logits, row));
  }
}

SamplingParams greedy() { SamplingParams p; p.temperature = 0.0f; return p; }
SamplingParams plain() { return SamplingParams{}; }
SamplingParams production() {
  SamplingParams p;
  p.temperature = 0.7f, p.top_k = 50, p.top_p = 0.95f, p.min_p = 0.05f;
  p.repetition_penalty = 1.1f, p.presence_penalty = 0.5f, p.frequency_penalty = 0.2f;
  p.logprobs = 20;
  return p;
}
SamplingParams top_p_only() { SamplingParams p; p.top_p = 0.9f; return p; }

BENCHMARK_CAPTURE(run, greedy, greedy(), false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(run, plain_t1, plain(), false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(run, topk50_topp095_minp_pen_lp20, production(), false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(run, topk50_topp095_minp_pen_lp20_mask, production(), true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(run, topp09_full_sort, top_p_only(), false)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace deepinfer::sample

BENCHMARK_MAIN();
