#include "engine/bench_model.h"

#include <cmath>
#include <ctime>
#include <map>

#include "engine/device_backend.h"
#include "loader/inventory.h"
#include "loader/synthetic.h"
#include "loader/weight_binding.h"
#include "model/model.h"
#ifdef DI_HAVE_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace deepinfer::engine {

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

loader::ModelConfig v4_flash_config(int64_t layers) {
  loader::ModelConfig c = loader::tiny_v4_flash_config();
  c.hidden_size = 4096;
  c.num_attention_heads = 64;
  c.head_dim = 512;
  c.q_lora_rank = 1024;
  c.o_groups = 8;
  c.o_lora_rank = 1024;
  c.n_routed_experts = 256;
  c.num_experts_per_tok = 6;
  c.moe_intermediate_size = 2048;
  c.index_n_heads = 64;
  c.index_topk = 512;
  c.num_hidden_layers = layers;
  c.num_hash_layers = std::min<int64_t>(3, layers);
  c.compress_ratios.clear();
  for (int64_t l = 0; l < layers; ++l) c.compress_ratios.push_back(l < 2 ? 0 : (l % 2 == 0 ? 4 : 128));
  c.n_mtp_layers = 0;
  c.num_nextn_predict_layers = 0;
  return c;
}

namespace {

class DeviceSource final : public loader::TensorSource {
 public:
  std::optional<tensor::TensorView> get(const std::string& name) const override {
    auto it = views_.find(name);
    return it == views_.end() ? std::nullopt : std::optional<tensor::TensorView>(it->second);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [n, v] : views_) out.push_back(n);
    return out;
  }
  bool fp4_device_layout() const override { return true; }  // FP4 codes rewritten after their fill
  std::map<std::string, tensor::TensorView> views_;
};

}  // namespace

#ifdef DI_HAVE_CUDA
namespace {

Status fill(ops::Ops* ops, const tensor::TensorView& v, kernels::RandomKind kind, uint64_t seed, float scale,
            int extra = 0, int row_len = 1) {
  auto* cuda = dynamic_cast<ops::cuda::CudaOps*>(ops);
  if (cuda == nullptr) return unimplemented("synthetic device weights need the CUDA backend");
  const cudaError_t err = kernels::launch_fill_random({v.data, kind, v.numel(), seed, scale, extra, row_len}, cuda->stream());
  if (err != cudaSuccess) return internal_error("fill_random: {}", cudaGetErrorString(err));
  return Status::ok();
}

tensor::TensorView alloc(ops::Ops* ops, tensor::DType dtype, const std::vector<int64_t>& s) {
  switch (s.size()) {
    case 1: return ops->alloc_persistent(dtype, {s[0]});
    case 2: return ops->alloc_persistent(dtype, {s[0], s[1]});
    default: return ops->alloc_persistent(dtype, {s[0], s[1], s[2]});
  }
}

}  // namespace

Result<std::unique_ptr<loader::TensorSource>> synthetic_device_weights(const loader::ModelConfig& config, ops::Ops* ops,
                                                                       uint64_t seed) {
  auto src = std::make_unique<DeviceSource>();
  using kernels::RandomKind;
  uint64_t k = seed;
  for (const loader::ParamSpec& p : loader::param_inventory(config)) {
    const auto files = loader::file_tensors(p);
    for (const loader::FileTensorSpec& f : files) {
      tensor::TensorView v = alloc(ops, f.dtype, f.shape);
      src->views_[f.name] = v;
      ++k;
      const int log_fan = static_cast<int>(std::lround(std::log2(std::sqrt(static_cast<double>(std::max<int64_t>(p.in, 1))))));
      switch (f.dtype) {
        case tensor::DType::kF32: DI_RETURN_IF_ERROR(fill(ops, v, RandomKind::kF32Normal, k, p.stddev > 0 ? p.stddev : 0.1f)); break;
        case tensor::DType::kBF16:
          DI_RETURN_IF_ERROR(fill(ops, v, RandomKind::kBF16Normal, k, p.stddev > 0 ? p.stddev : 1.0f));
          break;
        case tensor::DType::kF8E4M3: DI_RETURN_IF_ERROR(fill(ops, v, RandomKind::kFp8Code, k, 1.0f)); break;
        case tensor::DType::kI8:
          DI_RETURN_IF_ERROR(fill(ops, v, RandomKind::kFp4Byte, k, 1.0f));
          if (!ops->to_fp4_device_layout(v)) {
            return internal_error("{}: FP4 codes not rewritten into the device layout", f.name);
          }
          break;
        case tensor::DType::kF8E8M0: {
          // FP8 codes ~N(0, 64): scale 2^-6 / sqrt(in); FP4 codes |x| <= 6: scale 2^-2 / sqrt(in).
          const int e = p.format == tensor::WeightFormat::kFp4Block ? 127 - 2 - log_fan : 127 - 6 - log_fan;
          DI_RETURN_IF_ERROR(fill(ops, v, RandomKind::kE8M0Const, k, 1.0f, e));
          break;
        }
        case tensor::DType::kI64:
          DI_RETURN_IF_ERROR(fill(ops, v, RandomKind::kI64Experts, k, 1.0f, static_cast<int>(config.n_routed_experts),
                                  static_cast<int>(config.num_experts_per_tok)));
          break;
        default: return unimplemented("synthetic weights: dtype {} of {}", tensor::dtype_name(f.dtype), f.name);
      }
    }
  }
  ops->synchronize();
  return std::unique_ptr<loader::TensorSource>(std::move(src));
}

Status randomize_kv(model::KvState& state, ops::Ops* ops, uint64_t seed) {
  using kernels::RandomKind;
  for (int64_t l = 0; l < state.n_layers(); ++l) {
    model::LayerState& s = state.layer(l);
    for (const tensor::TensorView* v : {&s.window, &s.comp_rows, &s.idx_keys, &s.comp.kv, &s.comp.score,
                                        &s.idx_comp.kv, &s.idx_comp.score}) {
      if (v->empty()) continue;
      const auto kind = v->dtype == tensor::DType::kF32 ? RandomKind::kF32Normal : RandomKind::kBF16Normal;
      DI_RETURN_IF_ERROR(fill(ops, *v, kind, ++seed, 0.5f));
    }
  }
  ops->synchronize();
  return Status::ok();
}
#else
Result<std::unique_ptr<loader::TensorSource>> synthetic_device_weights(const loader::ModelConfig&, ops::Ops*, uint64_t) {
  return unimplemented("synthetic device weights need a build with the CUDA backend");
}
Status randomize_kv(model::KvState&, ops::Ops*, uint64_t) {
  return unimplemented("randomize_kv needs a build with the CUDA backend");
}
#endif

int64_t kv_bytes_estimate(const loader::ModelConfig& c, int64_t n_slots, int64_t n_blocks, int32_t block_tokens) {
  int64_t per_slot = 0, per_block = 0;
  for (int64_t l = 0; l < c.num_hidden_layers + c.n_mtp_layers; ++l) {
    const int m = c.ratio(l);
    per_slot += c.sliding_window * c.head_dim * 2;
    if (m > 0) {
      const int64_t width = (m == 4 ? 2 : 1) * c.head_dim, n_state = m == 4 ? 8 : m;
      per_slot += 2 * n_state * width * 4;
      per_block += block_tokens / m * c.head_dim * 2;
    }
    if (m == 4) {
      per_slot += 2 * 8 * 2 * c.index_head_dim * 4;
      per_block += block_tokens / 4 * c.index_head_dim * 2;
    }
  }
  return per_slot * n_slots + per_block * n_blocks;
}

namespace {

// Weight bytes of one layer split into dense (read once per step) and per-expert parts.
void layer_bytes(const loader::ModelConfig& c, int64_t layer, double* dense, double* expert) {
  *dense = 0;
  *expert = 0;
  for (const loader::ParamSpec& p : loader::param_inventory(c)) {
    const std::string prefix = loader::layer_prefix(layer);
    if (p.name.rfind(prefix, 0) != 0) continue;
    double bytes = 0;
    for (const auto& f : loader::file_tensors(p)) {
      double n = 1;
      for (int64_t d : f.shape) n *= static_cast<double>(d);
      bytes += n * static_cast<double>(tensor::dtype_size(f.dtype));
    }
    if (p.name.find(".ffn.experts.") != std::string::npos) {
      *expert += bytes / static_cast<double>(c.n_routed_experts);
    } else if (p.name.find("tid2eid") == std::string::npos) {
      *dense += bytes;  // hash tables are read one row per token: negligible
    }
  }
}

}  // namespace

StepCost decode_step_cost(const loader::ModelConfig& c, int64_t batch, int64_t context) {
  StepCost cost;
  const double E = static_cast<double>(c.n_routed_experts), k = static_cast<double>(c.num_experts_per_tok);
  const double touched = E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(batch)));  // uniform routing
  double active_params = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    double dense = 0, expert = 0;
    layer_bytes(c, l, &dense, &expert);
    cost.weight_bytes += dense + touched * expert;
    const int m = c.ratio(l);
    const double W = static_cast<double>(c.sliding_window), d = static_cast<double>(c.head_dim);
    double rows = W;
    if (m == 4) {
      const double n_avail = std::floor((context + 1) / 4.0);
      rows += std::min<double>(c.index_topk, n_avail);
      cost.kv_bytes += batch * n_avail * c.index_head_dim * 2;
      cost.flops += batch * 2.0 * n_avail * c.index_n_heads * c.index_head_dim;
    } else if (m == 128) {
      rows += std::floor((context + 1) / 128.0);
    }
    cost.kv_bytes += batch * rows * d * 2;
    cost.flops += batch * 4.0 * rows * d * c.num_attention_heads;
  }
  const double head = static_cast<double>(c.vocab_size) * c.hidden_size * 2;
  cost.weight_bytes += head;
  // Matmul FLOPs: 2 per active weight element per token; weight bytes approximate elements
  // (FP8: 1 byte, FP4: 0.5, BF16: 2) -> count elements from the inventory instead.
  for (const loader::ParamSpec& p : loader::param_inventory(c)) {
    if (!p.is_linear) continue;
    const bool expert = p.name.find(".ffn.experts.") != std::string::npos;
    active_params += static_cast<double>(p.out) * p.in * (expert ? k / E : 1.0);
  }
  cost.flops += 2.0 * active_params * batch;
  return cost;
}

StepCost prefill_cost(const loader::ModelConfig& c, int64_t n) {
  StepCost cost = decode_step_cost(c, 1, n / 2);  // average context of the prompt
  cost.flops *= static_cast<double>(n);
  cost.kv_bytes *= static_cast<double>(n);
  return cost;
}

Result<std::unique_ptr<LoadedModel>> synthetic_loaded_model(int64_t layers, const std::string& device,
                                                            model::Numerics numerics, uint64_t seed, bool mtp) {
  auto lm = std::make_unique<LoadedModel>();
  lm->config = v4_flash_config(layers);
  if (mtp) {
    lm->config.n_mtp_layers = 1;
    lm->config.num_nextn_predict_layers = 1;
    lm->config.compress_ratios.push_back(0);  // the MTP block is window-only
  }
  lm->dir = fmt::format("synthetic V4-Flash ({} layers)", layers);
  DI_ASSIGN_OR_RETURN(lm->ops, make_ops(device));
  DI_ASSIGN_OR_RETURN(lm->synthetic, synthetic_device_weights(lm->config, lm->ops.get(), seed));
  DI_ASSIGN_OR_RETURN(loader::ModelWeights weights, loader::bind_weights(lm->config, *lm->synthetic));
  lm->model = std::make_unique<model::Model>(lm->config, std::move(weights), lm->ops.get(),
                                             model::ModelOptions{numerics});
  return lm;
}

}  // namespace deepinfer::engine
