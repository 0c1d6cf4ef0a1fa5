// VisionEncoder: the DeepSeek-V4.1 vision tower (model_v41_flash.md §8) — ViT + aligner — written
// against ops::Ops, producing one image's rows of the LLM sequence as host F32.
//
// The engine prepares an image (vision/preprocess.h), encodes it here, and overwrites the token
// embeddings of the image's span with ImageEmbedding::rows (delimiters included); see
// vision/image_span.h for the slot layout.
//
// Backends: the vision ops (add_bias, gelu_erf, vision_attention) exist on the CPU reference only;
// on a backend without them the first one stops the process (Ops' default bodies), so until CUDA
// kernels exist the engine must give the encoder a CpuOps over host-resident vision weights.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "loader/model_config.h"
#include "loader/weights_v41.h"
#include "model/forward_batch.h"  // model::Numerics (an enum; nothing of di_model is linked)
#include "ops/ops.h"
#include "vision/image_span.h"
#include "vision/preprocess.h"

namespace deepinfer::vision {

// One image's span rows: [span_len, dim] host F32 in sequence order (span_tokens(n_llm_h, n_llm_w)).
struct ImageEmbedding {
  int64_t n_llm_h = 0, n_llm_w = 0;
  int64_t span_len = 0;            // n_llm_h * (n_llm_w + 1) + 2
  int64_t dim = 0;                 // the text model's hidden size D
  std::vector<SpanSlot> slots;     // [span_len]
  std::vector<float> rows;         // [span_len, dim]
  const float* row(int64_t i) const { return rows.data() + i * dim; }
};

class VisionEncoder {
 public:
  // `config` and `weights` must outlive the encoder; `ops` runs every op (the CPU reference or a
  // device backend). Official numerics keep activations in BF16 between ops, plain ones in F32;
  // the math inside every op is F32 either way.
  VisionEncoder(const loader::ModelConfig& config, const loader::VisionWeights& weights, ops::Ops* ops,
                model::Numerics numerics);

  // Whether this config and these weights can run (a vision tower present, shapes consistent,
  // unquantised weights); encode() returns this error too.
  const Status& status() const { return status_; }

  // The span rows of one prepared image. Errors: a bad encoder (status()), or an image that does
  // not match this model's vision config (patch size, grid, token budget).
  Result<ImageEmbedding> encode(const PreparedImage& image);

  // The ViT alone: final-normed patch features, host F32 [grid_h * grid_w, Vd] (values of the
  // activation dtype). For tests and debugging; encode() runs the same code.
  Result<std::vector<float>> run_vit(const PreparedImage& image);

  // The aligner's input for ViT features `vit` [grid_h * grid_w, Vd]: the grid zero-padded
  // bottom/right to multiples of r (downsample_ratio), then r x r pixel-unshuffle, channel-major:
  // out [n_llm_h * n_llm_w, Vd * r * r] with out[cell][c * r*r + kh * r + kw] = vit[(cell_row * r +
  // kh) * grid_w + cell_col * r + kw][c]. Pure host function.
  static std::vector<float> pixel_unshuffle(const std::vector<float>& vit, int64_t grid_h, int64_t grid_w,
                                            int64_t vd, int64_t r);

 private:
  Status check_image(const PreparedImage& image) const;
  // ViT on the backend: returns the final-normed features [T, Vd] in the workspace.
  ops::TensorView vit_forward(const PreparedImage& image);
  std::vector<float> to_host_f32(const ops::TensorView& x);

  const loader::ModelConfig& config_;
  const loader::VisionWeights& weights_;
  ops::Ops* ops_;
  ops::DType act_;
  Status status_;
  // The fused MLP w1 [2I, Vd] split into its gate and up halves (views of contiguous row ranges).
  std::vector<ops::LinearWeight> w1_gate_, w1_up_;
};

}  // namespace deepinfer::vision
