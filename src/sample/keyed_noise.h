// Counter-based noise for sampling: every random number is a pure function of
// (seed, stream, position, token id), never of a batch slot, a row order, a thread or a sorted
// rank, which is what makes seeded sampling batch-invariant (spec §3.5). The arithmetic is
// written out so a CUDA kernel can reproduce the same bits (64-bit integer ops only, then one
// conversion to double). Also here: how per-sequence seeds are derived from request seeds.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

namespace deepinfer::sample {

// Independent uses of randomness get different streams, so that e.g. the speculative
// acceptance coin at a position is independent of the token noise at that position.
enum class NoiseStream : uint64_t {
  kToken = 1,         // Gumbel noise of ordinary sampling and of the bonus token
  kSpecAccept = 2,    // the uniform coin of rejection-sampling verification
  kSpecResidual = 3,  // Gumbel noise of the residual (correction) token after a rejection
  kSeedDerive = 4,    // deriving per-sequence seeds (n > 1) and unseeded request seeds
  kSpecDraft = 5,     // the seed a drafter samples its proposals with under rejection sampling
};

// The splitmix64 finalizer: a bijection on 64 bits with full avalanche.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// 64 random bits keyed by (seed, stream, position, token). Each key component is folded in
// through its own odd multiplier followed by a full mix, so nearby keys (position p vs p+1,
// token t vs t+1) give unrelated outputs. Negative positions/tokens are folded as their
// two's-complement bits.
constexpr uint64_t noise_bits(uint64_t seed, NoiseStream stream, int64_t position,
                              int32_t token) {
  uint64_t h = mix64(seed ^ (static_cast<uint64_t>(stream) * 0x9E3779B97F4A7C15ull));
  h = mix64(h + static_cast<uint64_t>(position) * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull);
  h = mix64(h + static_cast<uint64_t>(static_cast<uint32_t>(token)) * 0xAEF17502108EF2D9ull +
            0x632BE59BD9B4E019ull);
  return h;
}

// A uniform double in the open interval (0, 1): the top 52 bits, offset by half a step, so the
// extremes are 2^-53 and 1 - 2^-53, both exact doubles (with 53 bits the top value would round
// to 1.0, and 0 or 1 make the Gumbel transform infinite).
constexpr double bits_to_open_unit(uint64_t bits) {
  return (static_cast<double>(bits >> 12) + 0.5) * 0x1.0p-52;
}

inline double noise_uniform(uint64_t seed, NoiseStream stream, int64_t position, int32_t token) {
  return bits_to_open_unit(noise_bits(seed, stream, position, token));
}

// Standard Gumbel(0, 1) noise: -log(-log(u)). argmax_i(z_i + G_i) is distributed as
// softmax(z), and because G is keyed by token id, removing tokens from the support (masks,
// truncation) never shifts the noise of the tokens that remain.
inline double gumbel_noise(uint64_t seed, NoiseStream stream, int64_t position, int32_t token) {
  return -std::log(-std::log(noise_uniform(seed, stream, position, token)));
}

// Seed of sequence `sample_index` of a request with `n` sequences. Sequence 0 keeps the request
// seed itself, so the first of n samples equals the n = 1 result for the same seed; the others
// are hashed so that seeds s and s + 1 do not share sequences.
constexpr uint64_t derive_sequence_seed(uint64_t request_seed, int32_t sample_index) {
  if (sample_index == 0) return request_seed;
  return noise_bits(request_seed, NoiseStream::kSeedDerive, /*position=*/-1, sample_index);
}

// The seed of a sequence's draft proposals under rejection-sampling verification: their noise must
// be independent of the target's (kToken) and of the verification coins, or acceptance would be
// correlated with the draft it judges.
constexpr uint64_t draft_seed(uint64_t sequence_seed) {
  return noise_bits(sequence_seed, NoiseStream::kSpecDraft, /*position=*/-1, /*token=*/-1);
}

// Seed of a request that did not give one: the engine seed mixed with the request id.
constexpr uint64_t unseeded_request_seed(uint64_t engine_seed, uint64_t request_id) {
  return noise_bits(engine_seed, NoiseStream::kSeedDerive, static_cast<int64_t>(request_id),
                    /*token=*/-1);
}

// The seed the sampler should use for sequence `sample_index` of a request.
constexpr uint64_t resolve_sequence_seed(std::optional<uint64_t> request_seed,
                                         uint64_t engine_seed, uint64_t request_id,
                                         int32_t sample_index) {
  const uint64_t base = request_seed ? *request_seed : unseeded_request_seed(engine_seed, request_id);
  return derive_sequence_seed(base, sample_index);
}

}  // namespace deepinfer::sample
