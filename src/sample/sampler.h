// Sampler: turns one row of fp32 logits per sequence into a token, its logprob and top-N
// logprobs. CPU reference for the fused CUDA kernel; the contract below is what both follow.
//
// Order of operations for each row (the API contract; docs/sampling.md explains the choices):
//   0. sanitize: NaN -> -inf, +inf -> FLT_MAX; raw logprobs are taken here (LogprobsMode::kRaw)
//   1. logit_bias                          (additive)
//   2. allowed_token_ids and grammar bitmask -> -inf
//   3. min_tokens: EOS (unless ignore_eos) and stop_token_ids -> -inf while
//      n_generated < min_tokens, skipped if nothing else would remain
//   4. penalties: repetition (prompt ∪ output), frequency, presence (output)
//   5. temperature == 0: greedy = argmax, lowest id on ties (processed logprobs = step 4 row)
//   6. temperature: z = (l - max) / T
//   7. top-k, 8. top-p (over the top-k-renormalised mass), 9. min-p
//   10. sample: argmax_i (z_i + Gumbel(seed, position, i)), lowest id on ties
//   11. logprobs of the chosen token and the top-N (raw: step 0 row; processed: step 9 row)
// Steps 1-3 commute (they only add finite values or write -inf), so the order between them is
// cosmetic; bias before penalties is not (vLLM order).
//
// Determinism: a row's result is a function of that row's logits and RowInput only (no
// cross-row reduction, fp64 accumulations in id order, noise keyed by token id), so it does not
// depend on the batch, the row order or the thread count. Thread-safety: const methods may be
// called concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "deepinfer/sampling.h"
#include "deepinfer/status.h"
#include "sample/keyed_noise.h"
#include "sample/token_history.h"
#include "tensor/tensor.h"

namespace deepinfer::sample {

// Token value of a row whose support was empty (every token masked); the engine should end
// that sequence with an error naming the request.
inline constexpr int32_t kNoToken = -1;

struct SamplerConfig {
  int32_t n_vocab = 0;                 // logits columns (the model's vocabulary rows)
  std::vector<int32_t> eos_token_ids;  // suppressed by min_tokens unless ignore_eos
};

// Everything a row needs besides its logits. Pointers are borrowed for the call only.
struct RowInput {
  const SamplingParams* params = nullptr;  // required; validated at submit time
  // Prompt + generated ids; required when any penalty is active, else may be null.
  const TokenHistory* history = nullptr;
  int32_t n_generated = 0;  // tokens this sequence has generated before this one (min_tokens)
  int64_t position = 0;     // absolute position the sampled token will occupy (noise key)
  uint64_t seed = 0;        // per-sequence seed from resolve_sequence_seed (keyed_noise.h)
  // Grammar mask: bitmask_words(n_vocab) words, bit i set = token i allowed; empty = no mask.
  std::span<const uint32_t> token_bitmask;
};

struct RowOutput {
  int32_t token = kNoToken;
  // Of `token`, in params->logprobs_mode, when params->logprobs is set (else not computed: 0, or
  // -inf with no token).
  float logprob = 0.0f;
  // 1-based rank of `token` in the distribution `logprob` describes (ties to the lower id, so a
  // token at index j of top_logprobs has rank j + 1); 0 when no logprobs are asked or no token.
  int32_t rank = 0;
  std::vector<TokenLogprob> top_logprobs;  // params->logprobs entries (empty if none asked)
};

class Sampler {
 public:
  // Fails if n_vocab <= 0 or an EOS id is outside the vocabulary.
  static Result<Sampler> create(SamplerConfig config);

  // logits: [n_rows, n_vocab] F32 on the CPU, unit column stride (rows may be padded).
  // rows and out have n_rows entries; out[i] is overwritten. Errors name the row at fault
  // (shape, missing params/history, wrong bitmask size); on error `out` is unspecified.
  Status sample(const tensor::TensorView& logits, std::span<const RowInput> rows,
                std::span<RowOutput> out) const;

  // One row; `row` must already be checked (sample() does it).
  RowOutput sample_row(std::span<const float> logits, const RowInput& row) const;
  // The RowOutput of a token chosen elsewhere (speculative verification's accepted draft or
  // correction): its logprob and top list as sample_row reports them. `row` must be checked.
  RowOutput output_for(std::span<const float> logits, const RowInput& row, int32_t token) const;
  // sample_row for each of n rows: logits[i] (n_vocab floats) with rows[i] into out[i], rows
  // spread over threads (OpenMP). Rows are independent, so the thread count never changes a
  // result. Rows must already be checked.
  void sample_rows(std::span<const float* const> logits, std::span<const RowInput> rows,
                   std::span<RowOutput> out) const;

  // The final sampling distribution of a row as probabilities (steps 0-9, then softmax in fp64),
  // written to probs[n_vocab]; greedy rows give a point mass on the argmax. This is the p (or q)
  // of speculative verification. Returns false if the support is empty.
  bool sampling_probs(std::span<const float> logits, const RowInput& row,
                      std::span<float> probs) const;

  // Steps 0-4 (into `processed`), then 6-9 unless greedy. Returns whether any logit is finite.
  bool process_row(std::span<const float> logits, const RowInput& row,
                   std::span<float> processed) const;

  const SamplerConfig& config() const { return config_; }

  // Checks one row's inputs against this sampler's vocabulary.
  Status check_row(const RowInput& row, size_t index) const;

 private:
  explicit Sampler(SamplerConfig config) : config_(std::move(config)) {}

  // out->logprob and out->top_logprobs of out->token when the row asks for logprobs; `processed`
  // holds the processed logits unless the mode is raw (then it may be empty).
  void add_logprobs(std::span<const float> logits, std::span<const float> processed, const RowInput& row,
                    RowOutput* out) const;
  // Steps 0-4 on a copy of the logits.
  void preprocess(std::span<const float> logits, const RowInput& row,
                  std::span<float> processed) const;

  SamplerConfig config_;
};

// Whether a row's sample is the plain argmax of its raw logits — sanitised, lowest id among the
// maxima: what Ops::argmax_rows computes where the logits are — and nothing else of its RowOutput
// is read: greedy, no logprobs, and none of steps 1-4 changes a logit (no logit bias, allowed
// ids, grammar mask (`has_mask`), penalties, nor min_tokens' stop suppression at n_generated).
// The engine samples a step whose rows all are this way on the model's device.
bool is_plain_argmax(const SamplingParams& p, int32_t n_generated, bool has_mask);
// Whether a row is sampled whole where its logits are (the engine then copies back its token,
// not its logits): steps 1-4 by Ops::adjust_logits, greedy by Ops::argmax_rows, temperature,
// top-k, top-p and min-p by Ops::sample_rows, raw logprobs by Ops::logprob_rows. Only logprobs of
// the processed distribution (LogprobsMode::kProcessed) need the host sampler.
bool is_device_sampleable(const SamplingParams& p);
// Whether a repetition, presence or frequency penalty changes the logits (step 4).
bool penalties_active(const SamplingParams& p);

// Gumbel-max over a processed row (step 10): the finite entry maximising z_i + G_i in fp64,
// G_i = gumbel_noise(seed, stream, position, i); lowest id on ties; kNoToken if none is finite.
int32_t gumbel_argmax(std::span<const float> z, uint64_t seed, NoiseStream stream,
                      int64_t position);

}  // namespace deepinfer::sample
