// The Engram hashing constants of a V4.1 config (model_v41_flash.md §4.1): the prime bucket sizes
// (one global "seen" set, layer by layer, n-gram by n-gram, each (layer, n) restarting the search
// at engram_vocab_size - 1), their per-layer offsets, and the hash multipliers
// numpy.random.default_rng(10007 * layer).integers(0, bound, 4) * 2 + 1, reproduced bit for bit
// (SeedSequence + PCG64 + Lemire bounded integers). Pure functions of the config, no tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "loader/model_config.h"

namespace deepinfer::loader {

struct EngramLayout {
  int64_t n_layers = 0;      // Engram layers (engram_layer_ids.size())
  int64_t max_ngram = 0;     // N: n-grams 2..N, look-back shifts 0..N-1
  int64_t n_heads = 0;       // hash heads per n-gram size
  int64_t n_cols() const { return (max_ngram - 1) * n_heads; }  // rows gathered per token and layer
  // [layer][col], col = (n - 2) * n_heads + h: bucket size of n-gram n, head h.
  std::vector<std::vector<int64_t>> primes;
  // [layer][col]: first row of the column's bucket range (running sum of the layer's primes).
  std::vector<std::vector<int64_t>> offsets;
  // [layer][shift], shift = 0..N-1: odd multipliers of the compressed ids.
  std::vector<std::vector<int64_t>> multipliers;
};

// Derives the layout; errors name the config key (e.g. engram_num_embeddings not equal to the
// sum of a layer's primes).
Result<EngramLayout> make_engram_layout(const ModelConfig& config);

// numpy: Generator(PCG64(SeedSequence(seed))).integers(0, high, size=n, dtype=int64). high > 2^32.
std::vector<int64_t> numpy_default_rng_integers(uint64_t seed, int64_t high, int n);

// Trial-division primality (enough for the table sizes: < 2^40).
bool is_prime(int64_t n);

// The synthetic tokenizer sidecar of the generator (model_v41_flash.md §13): token id i maps to
// floor(i * V / vocab) — surjective onto [0, V) in first-seen order, e.g. i / 2 for the tiny model.
std::vector<int32_t> synthetic_engram_token_map(const ModelConfig& config);

// Sidecar file next to the checkpoint carrying what cannot be derived from config.json: the
// tokenizer's compressed token map (plus the derived constants, re-checked on load).
inline constexpr const char* kEngramSidecarFile = "engram_hash.safetensors";

// Writes `<dir>/engram_hash.safetensors`: token_map [vocab] I32, pad_id [1] I64 (compressed),
// primes/offsets [layers, cols] I64, multipliers [layers, N] I64.
Status write_engram_sidecar(const ModelConfig& config, const std::vector<int32_t>& token_map,
                            const std::string& dir);

// What the model needs from the sidecar: the compressed id of every token and of the pad token.
struct EngramTokenMap {
  std::vector<int32_t> token_map;  // [vocab]
  int32_t pad_id = 0;              // token_map[engram_pad_token_id]
};

// Reads and validates the sidecar of `dir` against `config`: vocabulary size, every compressed id
// in [0, engram_compressed_vocab_size) with max + 1 equal to it (the multipliers depend on it),
// and the stored primes / offsets / multipliers equal to the derived ones.
Result<EngramTokenMap> load_engram_sidecar(const ModelConfig& config, const std::string& dir);

}  // namespace deepinfer::loader
