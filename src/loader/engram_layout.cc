// Engram layout derivation (primes, offsets, multipliers) and the token-map sidecar.
#include "loader/engram_layout.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include <fmt/ranges.h>

#include "base/file.h"
#include "loader/safetensors.h"

namespace deepinfer::loader {
namespace {

using u128 = unsigned __int128;

// numpy.random.SeedSequence(entropy).generate_state(n_words, uint64): the entropy's 32-bit words
// hashed into a 4-word pool, then expanded. Constants from numpy's bit_generator.pyx.
std::vector<uint64_t> seed_sequence_state(uint64_t entropy, int n_words64) {
  constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
  constexpr uint32_t kMixL = 0xca01f9dd, kMixR = 0x4973f715;
  std::vector<uint32_t> words;
  for (uint64_t v = entropy; v > 0; v >>= 32) words.push_back(static_cast<uint32_t>(v));
  if (words.empty()) words.push_back(0);
  uint32_t hash_const = kInitA;
  auto hashmix = [&](uint32_t value) {
    value ^= hash_const;
    hash_const *= kMultA;
    value *= hash_const;
    return value ^ (value >> 16);
  };
  auto mix = [](uint32_t x, uint32_t y) {
    uint32_t r = kMixL * x - kMixR * y;
    return r ^ (r >> 16);
  };
  uint32_t pool[4];
  for (size_t i = 0; i < 4; ++i) pool[i] = hashmix(i < words.size() ? words[i] : 0);
  for (size_t src = 0; src < 4; ++src)
    for (size_t dst = 0; dst < 4; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
  for (size_t src = 4; src < words.size(); ++src)
    for (size_t dst = 0; dst < 4; ++dst) pool[dst] = mix(pool[dst], hashmix(words[src]));
  std::vector<uint64_t> out(static_cast<size_t>(n_words64));
  uint32_t h = kInitB;
  for (int i = 0; i < 2 * n_words64; ++i) {
    uint32_t v = pool[i % 4] ^ h;
    h *= kMultB;
    v *= h;
    v ^= v >> 16;
    out[static_cast<size_t>(i / 2)] |= static_cast<uint64_t>(v) << (32 * (i % 2));  // little-endian view
  }
  return out;
}

// numpy's PCG64 (128-bit LCG, XSL-RR output, step before output).
class Pcg64 {
 public:
  Pcg64(u128 seed, u128 inc) : inc_((inc << 1) | 1) {
    step();
    state_ += seed;
    step();
  }
  uint64_t next() {
    step();
    const uint64_t hi = static_cast<uint64_t>(state_ >> 64), lo = static_cast<uint64_t>(state_);
    const uint64_t x = hi ^ lo;
    const unsigned rot = static_cast<unsigned>(hi >> 58);
    return (x >> rot) | (x << ((64 - rot) & 63));
  }

 private:
  void step() {
    const u128 mult = (static_cast<u128>(2549297995355413924ull) << 64) | 4865540595714422341ull;
    state_ = state_ * mult + inc_;
  }
  u128 state_ = 0;
  u128 inc_;
};

}  // namespace

std::vector<int64_t> numpy_default_rng_integers(uint64_t seed, int64_t high, int n) {
  const std::vector<uint64_t> s = seed_sequence_state(seed, 4);
  Pcg64 rng((static_cast<u128>(s[0]) << 64) | s[1], (static_cast<u128>(s[2]) << 64) | s[3]);
  // Lemire's bounded integers over [0, high): numpy's random_bounded_uint64 for ranges > 2^32.
  const uint64_t rng_excl = static_cast<uint64_t>(high);
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    u128 m = static_cast<u128>(rng.next()) * rng_excl;
    uint64_t leftover = static_cast<uint64_t>(m);
    if (leftover < rng_excl) {
      const uint64_t threshold = (std::numeric_limits<uint64_t>::max() - (rng_excl - 1)) % rng_excl;
      while (leftover < threshold) {
        m = static_cast<u128>(rng.next()) * rng_excl;
        leftover = static_cast<uint64_t>(m);
      }
    }
    out.push_back(static_cast<int64_t>(m >> 64));
  }
  return out;
}

bool is_prime(int64_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (int64_t d = 3; d * d <= n; d += 2)
    if (n % d == 0) return false;
  return true;
}

Result<EngramLayout> make_engram_layout(const ModelConfig& c) {
  EngramLayout e;
  e.n_layers = static_cast<int64_t>(c.engram_layer_ids.size());
  e.max_ngram = c.engram_max_ngram_size;
  e.n_heads = c.engram_n_heads;
  if (e.n_layers == 0) return e;
  if (e.max_ngram < 2 || e.n_heads <= 0 || c.engram_vocab_size < 2 || c.engram_compressed_vocab_size <= 0) {
    return invalid_argument("Engram needs engram_max_ngram_size >= 2, engram_n_heads > 0, engram_vocab_size >= 2 "
                            "and engram_compressed_vocab_size > 0");
  }
  std::set<int64_t> seen;
  const int64_t bound = std::numeric_limits<int64_t>::max() / c.engram_compressed_vocab_size / 2;
  if (bound <= (int64_t{1} << 32)) {
    return unimplemented("engram_compressed_vocab_size {} is too large for the multiplier generator",
                         c.engram_compressed_vocab_size);
  }
  for (int64_t l = 0; l < e.n_layers; ++l) {
    std::vector<int64_t> primes;
    for (int64_t n = 2; n <= e.max_ngram; ++n) {
      int64_t current = c.engram_vocab_size - 1;
      for (int64_t h = 0; h < e.n_heads; ++h) {
        do ++current;
        while (!is_prime(current) || seen.count(current));
        seen.insert(current);
        primes.push_back(current);
      }
    }
    std::vector<int64_t> offsets;
    int64_t total = 0;
    for (int64_t p : primes) offsets.push_back(total), total += p;
    if (l < static_cast<int64_t>(c.engram_num_embeddings.size()) && c.engram_num_embeddings[l] != total) {
      return invalid_argument("'engram_num_embeddings'[{}] is {}, but the primes of Engram layer {} sum to {}", l,
                              c.engram_num_embeddings[l], c.engram_layer_ids[l], total);
    }
    std::vector<int64_t> mult = numpy_default_rng_integers(10007u * static_cast<uint64_t>(c.engram_layer_ids[l]),
                                                           bound, static_cast<int>(e.max_ngram));
    for (int64_t& m : mult) m = m * 2 + 1;
    e.primes.push_back(std::move(primes));
    e.offsets.push_back(std::move(offsets));
    e.multipliers.push_back(std::move(mult));
  }
  return e;
}

std::vector<int32_t> synthetic_engram_token_map(const ModelConfig& c) {
  std::vector<int32_t> map(static_cast<size_t>(c.vocab_size));
  for (int64_t i = 0; i < c.vocab_size; ++i) {
    map[i] = static_cast<int32_t>(i * c.engram_compressed_vocab_size / c.vocab_size);
  }
  return map;
}

namespace {

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& m) {
  std::vector<int64_t> out;
  for (const auto& row : m) out.insert(out.end(), row.begin(), row.end());
  return out;
}

}  // namespace

Status write_engram_sidecar(const ModelConfig& c, const std::vector<int32_t>& token_map, const std::string& dir) {
  DI_ASSIGN_OR_RETURN(EngramLayout e, make_engram_layout(c));
  if (static_cast<int64_t>(token_map.size()) != c.vocab_size) {
    return invalid_argument("Engram token map has {} entries for a vocabulary of {}", token_map.size(), c.vocab_size);
  }
  SafetensorsWriter w;
  w.add("token_map", tensor::DType::kI32, {c.vocab_size}, bytes_of(token_map));
  const std::vector<int64_t> pad = {token_map[static_cast<size_t>(c.engram_pad_token_id)]};
  w.add("pad_id", tensor::DType::kI64, {1}, bytes_of(pad));
  w.add("primes", tensor::DType::kI64, {e.n_layers, e.n_cols()}, bytes_of(flatten(e.primes)));
  w.add("offsets", tensor::DType::kI64, {e.n_layers, e.n_cols()}, bytes_of(flatten(e.offsets)));
  w.add("multipliers", tensor::DType::kI64, {e.n_layers, e.max_ngram}, bytes_of(flatten(e.multipliers)));
  return w.write((std::filesystem::path(dir) / kEngramSidecarFile).string());
}

Result<EngramTokenMap> load_engram_sidecar(const ModelConfig& c, const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kEngramSidecarFile).string();
  if (!file_exists(path)) {
    return not_found("{}: missing; V4.1 Engram needs the tokenizer's compressed token map (a sidecar the "
                     "checkpoint generator writes; for a real checkpoint derive it from tokenizer.json, "
                     "docs/v41.md)", path);
  }
  DI_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
  DI_ASSIGN_OR_RETURN(EngramLayout e, make_engram_layout(c));
  auto get = [&](const char* name, tensor::DType dtype, std::vector<int64_t> shape) -> Result<const uint8_t*> {
    const TensorInfo* info = f.find(name);
    if (info == nullptr) return data_loss("{}: lacks tensor '{}'", path, name);
    if (info->dtype != dtype || info->shape != shape) {
      return data_loss("{}: tensor '{}' has dtype {} shape [{}], expected {} [{}]", path, name,
                       tensor::dtype_name(info->dtype), fmt::join(info->shape, ", "), tensor::dtype_name(dtype),
                       fmt::join(shape, ", "));
    }
    return f.data(*info);
  };
  DI_ASSIGN_OR_RETURN(const uint8_t* tm, get("token_map", tensor::DType::kI32, {c.vocab_size}));
  EngramTokenMap out;
  out.token_map.resize(static_cast<size_t>(c.vocab_size));
  std::memcpy(out.token_map.data(), tm, out.token_map.size() * sizeof(int32_t));
  int32_t max_id = -1;
  for (size_t i = 0; i < out.token_map.size(); ++i) {
    const int32_t v = out.token_map[i];
    if (v < 0 || v >= c.engram_compressed_vocab_size) {
      return data_loss("{}: token_map[{}] = {} is outside [0, engram_compressed_vocab_size = {})", path, i, v,
                       c.engram_compressed_vocab_size);
    }
    max_id = std::max(max_id, v);
  }
  if (max_id + 1 != c.engram_compressed_vocab_size) {
    return data_loss("{}: the token map yields a compressed vocabulary of {}, config says "
                     "engram_compressed_vocab_size = {} (every hash multiplier depends on it)",
                     path, max_id + 1, c.engram_compressed_vocab_size);
  }
  out.pad_id = out.token_map[static_cast<size_t>(c.engram_pad_token_id)];
  auto check = [&](const char* name, const std::vector<std::vector<int64_t>>& want) -> Status {
    const std::vector<int64_t> flat = flatten(want);
    const int64_t cols = want.empty() ? 0 : static_cast<int64_t>(want[0].size());
    DI_ASSIGN_OR_RETURN(const uint8_t* p, get(name, tensor::DType::kI64, {e.n_layers, cols}));
    if (std::memcmp(p, flat.data(), flat.size() * sizeof(int64_t)) != 0) {
      return data_loss("{}: '{}' differs from the values derived from config.json", path, name);
    }
    return Status::ok();
  };
  DI_RETURN_IF_ERROR(check("primes", e.primes));
  DI_RETURN_IF_ERROR(check("offsets", e.offsets));
  DI_RETURN_IF_ERROR(check("multipliers", e.multipliers));
  DI_ASSIGN_OR_RETURN(const uint8_t* pad, get("pad_id", tensor::DType::kI64, {1}));
  int64_t pad_id = 0;
  std::memcpy(&pad_id, pad, sizeof(pad_id));
  if (pad_id != out.pad_id) {
    return data_loss("{}: pad_id {} is not token_map[engram_pad_token_id = {}] = {}", path, pad_id,
                     c.engram_pad_token_id, out.pad_id);
  }
  return out;
}

}  // namespace deepinfer::loader
