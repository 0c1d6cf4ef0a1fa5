// Scorer (include/deepinfer/model.h): one sequence through the model, for tools and tests.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "deepinfer/model.h"
#include "engine/loaded_model.h"
#include "loader/synthetic.h"
#include "model/kv_state.h"

namespace deepinfer {
namespace {

class ScorerImpl final : public Scorer {
 public:
  explicit ScorerImpl(std::unique_ptr<engine::LoadedModel> lm) : lm_(std::move(lm)) {}

  int64_t vocab_size() const override { return lm_->config.vocab_size; }
  std::string model_dir() const override { return lm_->dir; }

  Result<std::vector<std::vector<float>>> logits(std::span<const int32_t> ids, int64_t n_last,
                                                 int64_t chunk) override {
    const int64_t n = static_cast<int64_t>(ids.size());
    if (n == 0) return invalid_argument("logits: empty token sequence");
    if (n_last < 1 || n_last > n) return invalid_argument("logits: n_last {} outside [1, {}]", n_last, n);
    if (chunk <= 0) chunk = n;
    model::KvStateOptions so;
    so.n_slots = 1;
    so.block_tokens = std::max(256, lm_->config.max_ratio());
    so.n_blocks = static_cast<int32_t>(n / so.block_tokens + 1);
    so.kv_dtype = lm_->model->act_dtype();
    model::KvState state(lm_->config, so, lm_->ops.get());
    state.reset_slot(0);
    std::vector<int32_t> table(static_cast<size_t>(so.n_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::vector<std::vector<float>> out;
    for (int64_t begin = 0; begin < n; begin += chunk) {
      const int64_t end = std::min(n, begin + chunk);
      model::ForwardBatch b;
      b.token_ids.assign(ids.begin() + begin, ids.begin() + end);
      for (int64_t p = begin; p < end; ++p) b.positions.push_back(static_cast<int32_t>(p));
      b.seqs.push_back(ops::SeqSpan{0, 0, static_cast<int32_t>(end - begin), static_cast<int32_t>(begin), 0, 0});
      b.max_blocks = so.n_blocks;
      b.block_tables = table;
      for (int64_t p = std::max(begin, n - n_last); p < end; ++p) b.logit_rows.push_back(static_cast<int32_t>(p - begin));
      DI_ASSIGN_OR_RETURN(model::ForwardResult r, lm_->model->forward(b, state));
      const int64_t V = lm_->config.vocab_size;
      for (size_t i = 0; i < b.logit_rows.size(); ++i) {
        std::vector<float> row(static_cast<size_t>(V));
        lm_->ops->copy(r.logits.slice0(static_cast<int64_t>(i), static_cast<int64_t>(i) + 1),
                       tensor::TensorView::contiguous(row.data(), tensor::DType::kF32, {1, V}));
        out.push_back(std::move(row));
      }
    }
    return out;
  }

  Result<std::vector<TokenProb>> top_next(std::span<const int32_t> ids, int64_t top_n) override {
    DI_ASSIGN_OR_RETURN(auto rows, logits(ids, 1, 0));
    const std::vector<float>& z = rows[0];
    const float mx = *std::max_element(z.begin(), z.end());
    double den = 0.0;
    for (float v : z) den += std::exp(static_cast<double>(v - mx));
    std::vector<int32_t> order(z.size());
    std::iota(order.begin(), order.end(), 0);
    top_n = std::clamp<int64_t>(top_n, 1, static_cast<int64_t>(z.size()));
    std::partial_sort(order.begin(), order.begin() + top_n, order.end(),
                      [&](int32_t a, int32_t b) { return z[a] != z[b] ? z[a] > z[b] : a < b; });
    std::vector<TokenProb> out;
    for (int64_t i = 0; i < top_n; ++i) {
      const int32_t id = order[i];
      out.push_back({id, z[id], static_cast<float>(std::exp(static_cast<double>(z[id] - mx)) / den)});
    }
    return out;
  }

 private:
  std::unique_ptr<engine::LoadedModel> lm_;
};

}  // namespace

Result<std::unique_ptr<Scorer>> Scorer::open(const ScorerOptions& options) {
  DI_ASSIGN_OR_RETURN(const std::string dir, resolve_model_dir(options.model));
  DI_ASSIGN_OR_RETURN(const model::Numerics numerics, engine::parse_numerics(options.numerics));
  DI_ASSIGN_OR_RETURN(auto lm, engine::load_model(dir, engine::LoadOptions{numerics, options.device}));
  return std::unique_ptr<Scorer>(new ScorerImpl(std::move(lm)));
}

Status write_synthetic_checkpoint(const SyntheticCheckpointOptions& options) {
  if (options.out_dir.empty()) return invalid_argument("synthetic checkpoint: no output directory given");
  loader::ModelConfig config;
  auto named = loader::named_test_config(options.config);
  if (named.is_ok()) {
    config = std::move(named).value();
  } else {
    auto file = loader::load_model_config(options.config);  // a directory holding config.json
    if (!file.is_ok()) {
      return invalid_argument("synthetic checkpoint: '{}' is neither a test config name (tiny-v4f, tiny-short, "
                              "micro) nor a directory with a valid config.json ({})",
                              options.config, file.status().message());
    }
    config = std::move(file).value();
  }
  if (options.override_layers > 0) {
    const int64_t n_mtp = config.n_mtp_layers;
    std::vector<int> ratios(config.compress_ratios.begin(),
                            config.compress_ratios.begin() + std::min<int64_t>(options.override_layers, config.num_hidden_layers));
    while (static_cast<int64_t>(ratios.size()) < options.override_layers) ratios.push_back(ratios.size() % 2 ? 128 : 4);
    for (int64_t j = 0; j < n_mtp; ++j) ratios.push_back(0);
    config.num_hidden_layers = options.override_layers;
    config.num_hash_layers = std::min(config.num_hash_layers, options.override_layers);
    config.compress_ratios = ratios;
  }
  loader::SyntheticOptions so;
  so.seed = options.seed;
  so.layers_per_shard = options.layers_per_shard;
  return loader::write_synthetic_checkpoint(config, options.out_dir, so);
}

}  // namespace deepinfer
