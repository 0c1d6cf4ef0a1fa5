// Public model tooling API: resolving a model (directory, HF cache, repo id, or the embedded demo
// model), writing synthetic checkpoints in the official format, and a single-sequence scorer
// that returns next-token probabilities (what `deepinfer top` prints). Serving goes through
// engine.h; this header is for tools, tests and debugging.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

// The default model id when nothing is given (upstream DeepInfer's default).
inline constexpr const char* kDefaultModelId = "deepseek-ai/DeepSeek-V4.1-Flash-1017";
// The embedded demo model: the tiny synthetic V4-Flash, generated on first use.
inline constexpr const char* kDemoModelName = "demo";
// The embedded V4.1 demo model: tiny-v41 (model_v41_flash.md §13; vocabulary 512, so prompts are
// token ids), generated on first use.
inline constexpr const char* kDemoV41ModelName = "demo-v41";

// Resolves `model` to a checkpoint directory: an existing directory; "demo" (the embedded tiny
// model, generated into the cache dir on first use); a repo id "org/name" looked up in
// $DEEPINFER_HF_MODEL_DIR/<name>, $DEEPINFER_HF_MODEL_DIR/<org>/<name> and the Hugging Face cache
// ($HF_HOME or ~/.cache/huggingface: hub/models--org--name/snapshots/<rev>). The error lists
// every place it looked and how to point at a local copy.
Result<std::string> resolve_model_dir(const std::string& model);

// Where generated data (the demo model) lives: $DEEPINFER_CACHE_DIR, else
// $XDG_CACHE_HOME/deepinfer, else ~/.cache/deepinfer.
std::string cache_dir();

struct SyntheticCheckpointOptions {
  std::string config = "tiny-v4f";  // a test config name (tiny-v4f, tiny-short, micro) or a config.json path
  std::string out_dir;
  uint64_t seed = 0;
  int64_t layers_per_shard = 0;     // 0: all layers in the first shard (tiny layout)
  int64_t override_layers = 0;      // > 0: keep the config's widths, use this many main layers
};
// Writes config.json, sharded safetensors, the index and inference/config.json. Deterministic.
Status write_synthetic_checkpoint(const SyntheticCheckpointOptions& options);

struct TokenProb {
  int32_t id = 0;
  float logit = 0.0f;
  float prob = 0.0f;
};

struct ScorerOptions {
  std::string model = kDemoModelName;
  std::string numerics = "official";  // "official" (reference contract) or "plain" (F32 dequantised)
  std::string device = "cpu";         // "cpu"; "cuda" when built with the CUDA backend
};

// Runs one sequence through the model (chunked as asked) and returns next-token distributions.
class Scorer {
 public:
  static Result<std::unique_ptr<Scorer>> open(const ScorerOptions& options);
  virtual ~Scorer() = default;
  // Full next-token logits after each of the last `n_last` positions of `ids` ([n_last][vocab]).
  // The sequence is processed in chunks of `chunk` tokens (0: one chunk), starting from scratch.
  virtual Result<std::vector<std::vector<float>>> logits(std::span<const int32_t> ids, int64_t n_last,
                                                         int64_t chunk = 0) = 0;
  // The `top_n` most likely next tokens after `ids`, with probabilities (softmax of the logits).
  virtual Result<std::vector<TokenProb>> top_next(std::span<const int32_t> ids, int64_t top_n) = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string model_dir() const = 0;
};

}  // namespace deepinfer

namespace deepinfer {

// A checkpoint tensor as F32 values, quantized formats dequantised exactly (FP8 blocks x scale,
// FP4 codes x scale). `name` is the official parameter name ("layers.0.attn.wq_a.weight").
struct DequantizedTensor {
  std::vector<int64_t> shape;  // logical shape ([out, in] for linears, whatever their storage)
  std::vector<float> values;   // the first `max_rows` rows (all if 0), row-major
};
Result<DequantizedTensor> read_dequantized(const std::string& model_dir, const std::string& name,
                                           int64_t max_rows = 0);

}  // namespace deepinfer
