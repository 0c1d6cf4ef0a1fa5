// Speculative-decoding verification rules (spec §4.1, §5.3; architecture §1.3 item 8), as plain
// functions over probability rows so they serve both the CPU engine and as the reference for a
// fused CUDA verifier. Randomness comes from keyed_noise.h, keyed by (seed, position, token):
// verification is deterministic and independent of the batch.
// Not here: producing drafts (spec/ Drafter) and the target forward.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "deepinfer/status.h"
#include "sample/keyed_noise.h"

namespace deepinfer::sample {

// Gumbel-max draw from unnormalised non-negative weights w ([n_vocab], e.g. a distribution from
// Sampler::sampling_probs): argmax_i log w_i + G(seed, stream, position, i); -1 if all are 0.
int32_t sample_weights(std::span<const float> w, uint64_t seed, NoiseStream stream, int64_t position);

// What rejection-sampling verification needs of a sequence's pending drafts beside their tokens
// (the engine keeps one per sequence from the step that proposed them to the one verifying them).
struct DraftLaw {
  std::vector<int32_t> tokens;        // the drafts as proposed (verification checks it reads these)
  std::vector<std::vector<float>> q;  // [n][n_vocab] each draft's distribution; an empty row (or
                                      // none): a deterministic proposal, a point mass on the token
  // A draft given up for its value (the grammar forbids it) counts as proposed and rejected: the
  // row at cut_at then draws the residual of q[cut_at] against cut_token rather than a bonus token,
  // since dropping drafts by what they are would otherwise bias the output; -1: none.
  int32_t cut_at = -1;
  int32_t cut_token = -1;
};

struct VerifyResult {
  int32_t n_accepted = 0;       // draft tokens accepted, 0..k
  std::vector<int32_t> tokens;  // the accepted drafts, then one correction or bonus token
};

// Lossless chain rejection sampling (Leviathan et al. 2023; Chen et al. 2023).
//   target_probs: [k + 1, n_vocab] the target's final sampling distribution p_i (Sampler::
//                 sampling_probs) for the token at first_position + i, given drafts[0, i).
//   draft_tokens: [k] the proposed tokens.
//   draft_probs:  [k, n_vocab] the drafter's sampling distribution q_i, or empty for a
//                 deterministic drafter (q_i = point mass on draft_tokens[i]).
// Draft i is accepted iff u_i · q_i(x_i) < p_i(x_i), u_i = noise_uniform(seed, kSpecAccept,
// first_position + i, x_i), i.e. with probability min(1, p/q). At the first rejection the
// correction token is drawn from normalize(max(p_i − q_i, 0)) with Gumbel noise of stream
// kSpecResidual; if every draft is accepted the bonus token is drawn from p_k with stream kToken.
// The emitted tokens are distributed exactly as sampling p step by step. Errors name the
// mismatched size.
Result<VerifyResult> verify_rejection(std::span<const float> target_probs,
                                      std::span<const int32_t> draft_tokens,
                                      std::span<const float> draft_probs, int32_t n_vocab,
                                      uint64_t seed, int64_t first_position);

// One row of the chain above, for callers that build each row's p as they go (the engine: row
// i's sampler input follows the tokens accepted before it). p: [n_vocab] the target's
// distribution at `position`; x: the draft there; q: [n_vocab] the distribution x was drawn from,
// or empty for a deterministic proposal (a point mass on x). Accepted iff u · q(x) < p(x);
// otherwise the correction is drawn from normalize(max(p − q, 0)) (sample_residual).
struct RowVerdict {
  bool accepted = false;
  int32_t token = -1;  // x when accepted, else the correction (-1: p has no support)
};
RowVerdict verify_rejection_row(std::span<const float> p, int32_t x, std::span<const float> q, uint64_t seed,
                                int64_t position);

// The correction token after draft x (drawn from q; empty q: a point mass on x) was rejected at
// `position`: a draw from normalize(max(p − q, 0)) with stream kSpecResidual, from p itself when
// rounding leaves no residual mass (p == q). -1 if p has no support.
int32_t sample_residual(std::span<const float> p, int32_t x, std::span<const float> q, uint64_t seed,
                        int64_t position);

// Match rule: target_tokens[k + 1] are the target's own choices at each position (argmax for
// greedy; the seeded Sampler token otherwise). Drafts are accepted while they equal the target
// token; the first mismatch emits the target token, and full acceptance emits target_tokens[k].
// With greedy targets this is greedy verification; with seeded targets and a drafter that
// samples with the same keyed noise it is Gumbel-coupled ("drafter-invariant") verification:
// the output equals non-speculative seeded decoding for any draft length.
Result<VerifyResult> verify_by_match(std::span<const int32_t> target_tokens,
                                     std::span<const int32_t> draft_tokens);

}  // namespace deepinfer::sample
