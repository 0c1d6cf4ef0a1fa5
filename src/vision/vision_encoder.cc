// The ViT (patch embed, pre-norm blocks, final norm) and the aligner (pixel-unshuffle, Linear,
// erf GELU, Linear) of model_v41_flash.md §8 as op calls, and the span assembly.
#include "vision/vision_encoder.h"

#include <cstring>

#include "tensor/number_formats.h"

namespace deepinfer::vision {
namespace {

constexpr float kNormEps = 1e-6f;  // the ViT's RMSNorms (§8)

bool unquantised(const ops::LinearWeight& w) { return !w.empty() && !w.is_quantized(); }

// Rows [begin, end) of an unquantised weight as a LinearWeight of their own.
ops::LinearWeight row_range(const ops::LinearWeight& w, int64_t begin, int64_t end) {
  ops::LinearWeight v = w;
  v.weight = w.weight.slice0(begin, end);
  v.out = end - begin;
  v.prepared = {};
  return v;
}

// A host view over a vector's storage (the backend's copy() accepts host tensors on either side).
ops::TensorView host_view(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return ops::TensorView::contiguous(v.data(), ops::DType::kF32, shape);
}

}  // namespace

VisionEncoder::VisionEncoder(const loader::ModelConfig& config, const loader::VisionWeights& weights, ops::Ops* ops,
                             model::Numerics numerics)
    : config_(config),
      weights_(weights),
      ops_(ops),
      act_(numerics == model::Numerics::kOfficial ? ops::DType::kBF16 : ops::DType::kF32) {
  const loader::VisionConfig& v = config.vision;
  if (v.num_hidden_layers <= 0 || v.hidden_size <= 0) {
    status_ = failed_precondition("vision encoder: the model has no vision tower");
    return;
  }
  if (v.num_attention_heads <= 0 || v.hidden_size % v.num_attention_heads != 0 ||
      (v.hidden_size / v.num_attention_heads) % 4 != 0) {
    status_ = failed_precondition("vision encoder: hidden_size {} does not split into {} heads of a multiple of 4",
                                  v.hidden_size, v.num_attention_heads);
    return;
  }
  if (static_cast<int64_t>(weights.blocks.size()) != v.num_hidden_layers) {
    status_ = failed_precondition("vision encoder: {} blocks bound for {} layers", weights.blocks.size(),
                                  v.num_hidden_layers);
    return;
  }
  const int64_t I = v.intermediate_size;
  for (const loader::VisionBlockWeights& b : weights.blocks) {
    if (!unquantised(b.wqkv) || !unquantised(b.wo) || !unquantised(b.w1) || !unquantised(b.w2) ||
        b.w1.out != 2 * I) {
      status_ = failed_precondition("vision encoder: block weights must be BF16/F32 with w1 [2*{}, Vd], got w1 {}", I,
                                    b.w1.describe());
      return;
    }
    w1_gate_.push_back(row_range(b.w1, 0, I));
    w1_up_.push_back(row_range(b.w1, I, 2 * I));
  }
  if (!unquantised(weights.patch_embed) || !unquantised(weights.aligner_w1) || !unquantised(weights.aligner_w2)) {
    status_ = failed_precondition("vision encoder: patch_embed and aligner weights must be BF16/F32");
    return;
  }
  if (weights.aligner_w1.in != v.hidden_size * v.downsample_ratio * v.downsample_ratio ||
      weights.aligner_w1.out != config.hidden_size || weights.aligner_w2.out != config.hidden_size) {
    status_ = failed_precondition("vision encoder: aligner {} / {} for Vd {}, ratio {}, D {}",
                                  weights.aligner_w1.describe(), weights.aligner_w2.describe(), v.hidden_size,
                                  v.downsample_ratio, config.hidden_size);
  }
}

Status VisionEncoder::check_image(const PreparedImage& image) const {
  DI_RETURN_IF_ERROR(status_);
  const loader::VisionConfig& v = config_.vision;
  const ImageLayout& l = image.layout;
  const int64_t r = v.downsample_ratio;
  if (image.patch_dim != 3 * v.patch_size * v.patch_size || image.patch_dim != weights_.patch_embed.in)
    return invalid_argument("vision encoder: patches of {} values, the model's patch_embed takes {}", image.patch_dim,
                            weights_.patch_embed.in);
  if (l.grid_h <= 0 || l.grid_w <= 0 ||
      image.patches.size() != static_cast<size_t>(l.grid_h * l.grid_w * image.patch_dim))
    return invalid_argument("vision encoder: {} patch values for a {}x{} grid", image.patches.size(), l.grid_h,
                            l.grid_w);
  if (l.n_llm_h != (l.grid_h + r - 1) / r || l.n_llm_w != (l.grid_w + r - 1) / r)
    return invalid_argument("vision encoder: aligner grid {}x{} does not match the patch grid {}x{}", l.n_llm_h,
                            l.n_llm_w, l.grid_h, l.grid_w);
  if (l.span_len() > v.max_image_tokens)
    return invalid_argument("vision encoder: image span of {} tokens exceeds max_image_tokens {}", l.span_len(),
                            v.max_image_tokens);
  return Status::ok();
}

ops::TensorView VisionEncoder::vit_forward(const PreparedImage& image) {
  const loader::VisionConfig& v = config_.vision;
  const int64_t T = image.layout.grid_h * image.layout.grid_w, Vd = v.hidden_size, I = v.intermediate_size;
  const ops::VisionAttentionParams attn{image.layout.grid_h, image.layout.grid_w, v.num_attention_heads,
                                        static_cast<float>(v.rope_theta)};
  // Patch values are exact in BF16 already (preprocess rounds them), so F32 serves both numerics.
  // [T, 3*p*p]
  const ops::TensorView patches = ops_->upload(image.patches.data(), ops::DType::kF32, {T, image.patch_dim});
  const ops::TensorView x = ops_->alloc(act_, {T, Vd});                    // [T, Vd] residual stream
  const ops::TensorView h = ops_->alloc(act_, {T, Vd});                    // [T, Vd] normed sublayer input
  const ops::TensorView acc = ops_->alloc(ops::DType::kF32, {T, 3 * Vd});  // [T, 3Vd] F32 GEMM out (pre-bias)
  const ops::TensorView qkv = ops_->alloc(act_, {T, 3 * Vd});              // [T, 3Vd] q | k | v
  const ops::TensorView o = ops_->alloc(act_, {T, Vd});                    // [T, Vd] attention / sublayer out
  const ops::TensorView g = ops_->alloc(act_, {T, I}), u = ops_->alloc(act_, {T, I});  // [T, I] gate, up
  // [T, Vd] F32: the first T*Vd values of acc, for the Vd-wide biased GEMMs.
  const ops::TensorView acc_vd = acc.reshape({T * 3, Vd}).slice0(0, T).reshape({T, Vd});
  // Biased Linears: GEMM into F32, then the bias with one rounding to the activation dtype.
  ops_->linear(patches, weights_.patch_embed, acc_vd, {});
  ops_->add_bias(acc_vd, weights_.patch_embed_bias, x);
  for (size_t i = 0; i < weights_.blocks.size(); ++i) {
    const loader::VisionBlockWeights& b = weights_.blocks[i];
    ops_->rms_norm(x, b.norm1, kNormEps, h);
    ops_->linear(h, b.wqkv, acc, {});
    ops_->add_bias(acc, b.wqkv_bias, qkv);
    ops_->vision_attention(qkv, attn, o);            // 2D RoPE + softmax over the image: [T, Vd]
    ops_->linear(o, b.wo, acc_vd, {});
    ops_->add_bias(acc_vd, b.wo_bias, o);
    ops_->add(x, o, x);
    ops_->rms_norm(x, b.norm2, kNormEps, h);
    ops_->linear_pair(h, w1_gate_[i], w1_up_[i], g, u, {});  // [T, I] each
    ops_->swiglu(g, u, 0.0f, g);                             // no clamp in the ViT
    ops_->linear(g, b.w2, o, {});
    ops_->add(x, o, x);
  }
  ops_->rms_norm(x, weights_.norm, kNormEps, h);
  return h;
}

std::vector<float> VisionEncoder::to_host_f32(const ops::TensorView& x) {
  const ops::TensorView f = x.dtype == ops::DType::kF32 ? x : ops_->alloc(ops::DType::kF32, {x.numel()});
  if (x.dtype != ops::DType::kF32) ops_->convert(x, f);
  std::vector<float> out(static_cast<size_t>(x.numel()));
  ops_->copy(f.reshape({x.numel()}), host_view(out, {x.numel()}));
  ops_->synchronize();
  return out;
}

std::vector<float> VisionEncoder::pixel_unshuffle(const std::vector<float>& vit, int64_t grid_h, int64_t grid_w,
                                                  int64_t vd, int64_t r) {
  const int64_t nh = (grid_h + r - 1) / r, nw = (grid_w + r - 1) / r, rr = r * r;
  std::vector<float> out(static_cast<size_t>(nh * nw * vd * rr), 0.0f);  // zero: the padded patches
  for (int64_t cy = 0; cy < nh; ++cy)
    for (int64_t cx = 0; cx < nw; ++cx)
      for (int64_t kh = 0; kh < r; ++kh)
        for (int64_t kw = 0; kw < r; ++kw) {
          const int64_t py = cy * r + kh, px = cx * r + kw;
          if (py >= grid_h || px >= grid_w) continue;
          const float* src = &vit[static_cast<size_t>((py * grid_w + px) * vd)];
          float* dst = &out[static_cast<size_t>((cy * nw + cx) * vd * rr)];
          for (int64_t c = 0; c < vd; ++c) dst[c * rr + kh * r + kw] = src[c];
        }
  return out;
}

Result<std::vector<float>> VisionEncoder::run_vit(const PreparedImage& image) {
  DI_RETURN_IF_ERROR(check_image(image));
  const size_t mark = ops_->workspace_mark();
  std::vector<float> out = to_host_f32(vit_forward(image));
  ops_->workspace_release(mark);
  return out;
}

Result<ImageEmbedding> VisionEncoder::encode(const PreparedImage& image) {
  DI_RETURN_IF_ERROR(check_image(image));
  const loader::VisionConfig& v = config_.vision;
  const ImageLayout& l = image.layout;
  const int64_t D = config_.hidden_size, r = v.downsample_ratio, n_cells = l.n_llm_h * l.n_llm_w;
  const size_t mark = ops_->workspace_mark();
  // The unshuffle runs on the host: a small copy ([T, Vd] out, [cells, Vd*r*r] in) that keeps the
  // op set free of a layout-only op; the GEMMs around it stay on the backend.
  std::vector<float> cells = pixel_unshuffle(to_host_f32(vit_forward(image)), l.grid_h, l.grid_w, v.hidden_size, r);
  // [cells, Vd*r*r]: values of the activation dtype already (the ViT's output), so F32 is exact.
  const ops::TensorView a_in = ops_->upload(cells.data(), ops::DType::kF32, {n_cells, v.hidden_size * r * r});
  const ops::TensorView acc = ops_->alloc(ops::DType::kF32, {n_cells, D});  // [cells, D] F32 GEMM out
  const ops::TensorView h1 = ops_->alloc(act_, {n_cells, D});               // [cells, D] GELU(W1 x + b1)
  const ops::TensorView h2 = ops_->alloc(act_, {n_cells, D});               // [cells, D] W2 h1 + b2
  ops_->linear(a_in, weights_.aligner_w1, acc, {});
  ops_->add_bias(acc, weights_.aligner_b1, h1);
  ops_->gelu_erf(h1, h1);
  ops_->linear(h1, weights_.aligner_w2, acc, {});
  ops_->add_bias(acc, weights_.aligner_b2, h2);
  const std::vector<float> aligned = to_host_f32(h2);  // [n_cells, D]
  // The learned delimiters, read back as stored (BF16) and widened exactly.
  auto learned = [&](const ops::TensorView& t) {
    const ops::TensorView f = ops_->alloc(ops::DType::kF32, {D});  // [D]
    ops_->convert(t, f);
    return to_host_f32(f);
  };
  const std::vector<float> start = learned(weights_.image_start), newline = learned(weights_.image_newline),
                           end = learned(weights_.image_end);
  ops_->workspace_release(mark);

  ImageEmbedding e;
  e.n_llm_h = l.n_llm_h;
  e.n_llm_w = l.n_llm_w;
  e.span_len = l.span_len();
  e.dim = D;
  e.slots = span_tokens(l.n_llm_h, l.n_llm_w);
  e.rows.resize(static_cast<size_t>(e.span_len * D));
  const std::vector<int64_t> source = span_aligner_rows(l.n_llm_h, l.n_llm_w);
  for (int64_t i = 0; i < e.span_len; ++i) {
    const float* src = source[i] >= 0                       ? &aligned[static_cast<size_t>(source[i] * D)]
                       : e.slots[i] == SpanSlot::kStart    ? start.data()
                       : e.slots[i] == SpanSlot::kNewline  ? newline.data()
                                                           : end.data();
    std::memcpy(&e.rows[static_cast<size_t>(i * D)], src, static_cast<size_t>(D) * sizeof(float));
  }
  return e;
}

}  // namespace deepinfer::vision
