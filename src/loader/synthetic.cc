#include "loader/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numbers>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "loader/engram_layout.h"
#include "loader/inventory.h"
#include "loader/safetensors.h"
#include "tensor/number_formats.h"

namespace deepinfer::loader {
namespace {

using tensor::DType;
using tensor::WeightFormat;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// Uniform in (0, 1] from 53 random bits.
double unit(uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

float standard_normal(uint64_t key, uint64_t index) {
  // Box-Muller on two independent counter-derived uniforms (portable, unlike std distributions).
  const double u1 = unit(splitmix64(key ^ splitmix64(2 * index)));
  const double u2 = unit(splitmix64(key ^ splitmix64(2 * index + 1)));
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

std::vector<float> masters(uint64_t seed, const ParamSpec& p, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  const uint64_t key = splitmix64(seed) ^ fnv1a(p.name);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float z = standard_normal(key, static_cast<uint64_t>(i));
    switch (p.init) {
      case InitKind::kNormWeight:
      case InitKind::kHcScale: v[i] = 1.0f + p.stddev * z; break;
      case InitKind::kNormal:
      case InitKind::kHcBase:
      case InitKind::kTid2eid: v[i] = p.stddev * z; break;
    }
  }
  if (p.init == InitKind::kHcBase) {
    const int64_t h = p.hc_mult;
    for (int64_t j = 0; j < h; ++j) v[2 * h + j * h + j] += 2.0f;  // comb diagonal
  }
  return v;
}

template <typename T>
std::string to_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string encode_plain(const std::vector<float>& v, DType dtype) {
  if (dtype == DType::kF32) return to_bytes(v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = tensor::f32_to_bf16(v[i]);
  return to_bytes(h);
}

// k distinct experts per token id (partial Fisher-Yates keyed by the token id).
std::string tid2eid_bytes(uint64_t seed, const ParamSpec& p) {
  const int64_t n_tokens = p.shape[0], k = p.shape[1];
  const int64_t n_experts = p.n_experts;
  std::vector<int64_t> out(static_cast<size_t>(n_tokens * k));
  const uint64_t key = splitmix64(seed) ^ fnv1a(p.name);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<int64_t> perm(static_cast<size_t>(n_experts));
    for (int64_t e = 0; e < n_experts; ++e) perm[e] = e;
    for (int64_t i = 0; i < k; ++i) {
      const uint64_t r = splitmix64(key ^ splitmix64(static_cast<uint64_t>(t * k + i)));
      const int64_t j = i + static_cast<int64_t>(r % static_cast<uint64_t>(n_experts - i));
      std::swap(perm[i], perm[j]);
      out[t * k + i] = perm[i];
    }
  }
  return to_bytes(out);
}

// FP8 E4M3 with one power-of-two UE8M0 scale per block_out x block_in block.
std::pair<std::string, std::string> quantize_fp8(const std::vector<float>& w, const ParamSpec& p) {
  const int64_t bo = p.block_out, bi = p.block_in;
  const int64_t sr = (p.out + bo - 1) / bo, sc = (p.in + bi - 1) / bi;
  std::vector<uint8_t> q(static_cast<size_t>(p.out * p.in));
  std::vector<uint8_t> s(static_cast<size_t>(sr * sc));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < sr * sc; ++b) {
    const int64_t r0 = (b / sc) * bo, c0 = (b % sc) * bi;
    const int64_t r1 = std::min(p.out, r0 + bo), c1 = std::min(p.in, c0 + bi);
    float amax = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * p.in + c]));
    const int k = tensor::pow2_scale_exponent(std::max(amax, 1e-30f), 448.0f);
    const float inv = std::ldexp(1.0f, -k);
    s[b] = tensor::e8m0_from_exponent(k);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) q[r * p.in + c] = tensor::f32_to_e4m3(w[r * p.in + c] * inv);
  }
  return {to_bytes(q), to_bytes(s)};
}

// FP4 E2M1 packed two per byte (low nibble = even column) with one UE8M0 scale per 32 columns.
std::pair<std::string, std::string> quantize_fp4(const std::vector<float>& w, const ParamSpec& p) {
  const int64_t nb = p.in / 32;
  std::vector<uint8_t> q(static_cast<size_t>(p.out * p.in / 2));
  std::vector<uint8_t> s(static_cast<size_t>(p.out * nb));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < p.out; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* x = &w[r * p.in + b * 32];
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      const int k = tensor::pow2_scale_exponent(std::max(amax, 1e-30f), 6.0f);
      const float inv = std::ldexp(1.0f, -k);
      s[r * nb + b] = tensor::e8m0_from_exponent(k);
      for (int i = 0; i < 32; i += 2) {
        const uint8_t lo = tensor::f32_to_e2m1(x[i] * inv);
        const uint8_t hi = tensor::f32_to_e2m1(x[i + 1] * inv);
        q[(r * p.in + b * 32 + i) / 2] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
  return {to_bytes(q), to_bytes(s)};
}

// Adds a parameter's file tensors to `w`; bytes are produced when the shard is written.
void add_param(SafetensorsWriter* w, const ParamSpec& p, uint64_t seed) {
  const auto files = file_tensors(p);
  if (!p.is_linear) {
    w->add_lazy(p.name, p.dtype, p.shape, [p, seed] {
      if (p.init == InitKind::kTid2eid) return tid2eid_bytes(seed, p);
      int64_t n = 1;
      for (int64_t d : p.shape) n *= d;
      return encode_plain(masters(seed, p, n), p.dtype);
    });
    return;
  }
  if (p.format == WeightFormat::kBF16 || p.format == WeightFormat::kF32) {
    w->add_lazy(p.name, files[0].dtype, files[0].shape,
                [p, seed, dt = files[0].dtype] { return encode_plain(masters(seed, p, p.out * p.in), dt); });
    return;
  }
  // The weight and its scale come from the same masters; the scale producer recomputes them
  // (cheap next to writing) so no state is shared between the two lambdas.
  auto quantize = [p, seed] {
    const auto m = masters(seed, p, p.out * p.in);
    return p.format == WeightFormat::kFp8Block ? quantize_fp8(m, p) : quantize_fp4(m, p);
  };
  w->add_lazy(files[0].name, files[0].dtype, files[0].shape, [quantize] { return quantize().first; });
  w->add_lazy(files[1].name, files[1].dtype, files[1].shape, [quantize] { return quantize().second; });
}

int shard_of(const std::string& name, const ModelConfig& c, int64_t layers_per_shard, int n_layer_shards) {
  if (name.rfind("layers.", 0) == 0) {
    const int64_t layer = std::stoll(name.substr(7, name.find('.', 7) - 7));
    return layers_per_shard <= 0 ? 0 : static_cast<int>(layer / layers_per_shard);
  }
  if (name.rfind("mtp.", 0) == 0) return n_layer_shards + 1;
  if (name == "embed.weight") return 0;
  return n_layer_shards;  // head, norm, hc_head_* (V4.1: also vision, aligner, image_*)
}

std::string inference_config_json(const ModelConfig& c) {
  if (c.family == ModelFamily::kV41) return model_config_v41_inference_json(c);
  nlohmann::ordered_json j;
  j["vocab_size"] = c.vocab_size;
  j["dim"] = c.hidden_size;
  j["moe_inter_dim"] = c.moe_intermediate_size;
  j["n_layers"] = c.num_hidden_layers;
  j["n_hash_layers"] = c.num_hash_layers;
  j["n_mtp_layers"] = c.n_mtp_layers;
  j["n_heads"] = c.num_attention_heads;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["n_activated_experts"] = c.num_experts_per_tok;
  j["score_func"] = "sqrtsoftplus";
  j["route_scale"] = c.routed_scaling_factor;
  j["swiglu_limit"] = c.swiglu_limit;
  j["q_lora_rank"] = c.q_lora_rank;
  j["head_dim"] = c.head_dim;
  j["rope_head_dim"] = c.qk_rope_head_dim;
  j["norm_eps"] = c.rms_norm_eps;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["window_size"] = c.sliding_window;
  j["original_seq_len"] = c.rope_scaling.original_max_position_embeddings;
  j["rope_theta"] = c.rope_theta;
  j["rope_factor"] = c.rope_scaling.factor;
  j["beta_fast"] = c.rope_scaling.beta_fast;
  j["beta_slow"] = c.rope_scaling.beta_slow;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["dtype"] = c.quant.fp8 ? "fp8" : "bf16";
  j["scale_fmt"] = "ue8m0";
  j["expert_dtype"] = c.quant.experts_fp4 ? "fp4" : "fp8";
  j["compress_rope_theta"] = c.compress_rope_theta;
  j["compress_ratios"] = c.compress_ratios;
  return j.dump(2);
}

}  // namespace

float synthetic_master_value(uint64_t seed, const std::string& name, uint64_t index, float stddev) {
  return stddev * standard_normal(splitmix64(seed) ^ fnv1a(name), index);
}

Status write_synthetic_checkpoint(const ModelConfig& config, const std::string& dir,
                                  const SyntheticOptions& options) {
  namespace fs = std::filesystem;
  DI_RETURN_IF_ERROR(validate_model_config(config, "synthetic config"));
  DI_RETURN_IF_ERROR(make_directories((fs::path(dir) / "inference").string()));
  const int64_t lps = options.layers_per_shard;
  const int n_layer_shards =
      lps <= 0 ? 1 : static_cast<int>((config.num_hidden_layers + lps - 1) / lps);
  const int n_shards = n_layer_shards + 1 + (config.n_mtp_layers > 0 ? 1 : 0);
  std::vector<SafetensorsWriter> shards(static_cast<size_t>(n_shards));
  for (const ParamSpec& p : param_inventory(config)) {
    add_param(&shards[static_cast<size_t>(shard_of(p.name, config, lps, n_layer_shards))], p, options.seed);
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  std::map<std::string, std::string> sorted_map;
  for (int i = 0; i < n_shards; ++i) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n_shards);
    DI_RETURN_IF_ERROR(shards[i].write((fs::path(dir) / file).string()));
    for (const std::string& name : shards[i].names()) sorted_map[name] = file;
    total += shards[i].data_bytes();
  }
  for (const auto& [name, file] : sorted_map) weight_map[name] = file;
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  index["weight_map"] = weight_map;
  DI_RETURN_IF_ERROR(write_file_atomic((fs::path(dir) / "model.safetensors.index.json").string(), index.dump(2)));
  DI_RETURN_IF_ERROR(write_file_atomic((fs::path(dir) / "config.json").string(), model_config_to_json(config)));
  DI_RETURN_IF_ERROR(write_file_atomic((fs::path(dir) / "inference" / "config.json").string(),
                                       inference_config_json(config)));
  if (config.family == ModelFamily::kV41 && !config.engram_layer_ids.empty()) {
    // The tokenizer-derived compressed token map is not part of config.json (§4.1, §13).
    DI_RETURN_IF_ERROR(write_engram_sidecar(config, synthetic_engram_token_map(config), dir));
  }
  nlohmann::ordered_json gen = {{"bos_token_id", config.bos_token_id}, {"eos_token_id", config.eos_token_id},
                                {"do_sample", true}, {"temperature", 1.0}, {"top_p", 1.0}};
  DI_RETURN_IF_ERROR(write_file_atomic((fs::path(dir) / "generation_config.json").string(), gen.dump(2)));
  nlohmann::ordered_json prov = {{"generator", "deepinfer synthetic checkpoint v1"}, {"seed", options.seed},
                                 {"layers_per_shard", options.layers_per_shard}};
  return write_file_atomic((fs::path(dir) / "deepinfer_synthetic.json").string(), prov.dump(2));
}

}  // namespace deepinfer::loader
