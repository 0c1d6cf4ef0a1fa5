// CudaOps linear-algebra launchers: the dequantising tensor-core GEMMs (one canonical summation
// order for every M, so a row's result never depends on the batch), the plain F32 path, grouped
// projections.
#include "kernels/common/env_knob.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch_fp8_experts.h"
#include "ops/cuda/launch_fp8_gemm.h"

namespace deepinfer::ops::cuda {

namespace k = deepinfer::kernels;

k::WeightDesc weight_desc(const LinearWeight& w) {
  DI_CHECK(w.weight.device == tensor::Device::kCuda, "linear weight {} is not on the device", w.describe());
  k::WeightDesc d;
  d.w = static_cast<const uint8_t*>(w.weight.data);
  d.block_out = w.block_out;
  d.block_in = w.block_in;
  switch (w.format) {
    case tensor::WeightFormat::kBF16:
      d.fmt = k::WeightFmt::kBF16;
      d.row_bytes = w.in * 2;
      break;
    case tensor::WeightFormat::kFp8Block:
      d.fmt = k::WeightFmt::kFp8Block;
      d.row_bytes = w.in;
      d.scale = static_cast<const uint8_t*>(w.scale.data);
      d.scale_f32 = w.scale.dtype == DType::kF32;
      d.scale_cols = w.scale.shape[1];
      break;
    case tensor::WeightFormat::kFp4Block:
      // The decoders read the device layout and whole 8-code words of a row (fp4_layout.h).
      DI_CHECK(w.fp4_device_layout,
               "FP4 weight {} holds the checkpoint's code order: the CUDA kernels read the device layout "
               "(Ops::to_fp4_device_layout, where the weight reaches the device)",
               w.describe());
      DI_CHECK(w.in % 32 == 0, "FP4 weight {}: in must be a multiple of 32 (one scale per 32 codes)", w.describe());
      d.fmt = k::WeightFmt::kFp4Block;
      d.row_bytes = w.in / 2;
      d.fp4_fold = k::fp8_experts_enabled();  // to_fp4_device_layout wrote the fold layout
      d.scale = static_cast<const uint8_t*>(w.scale.data);
      d.scale_cols = w.scale.shape[1];
      break;
    case tensor::WeightFormat::kF32:
      DI_CHECK(false, "F32 linear weights are not supported on CUDA ({})", w.describe());
  }
  // prepare_linear's copy: BF16 weights' packed blocks, FP8 weights' FP8-order blocks.
  if (!w.prepared.empty()) {
    if (w.format == tensor::WeightFormat::kFp8Block) {
      d.fp8_blocks = static_cast<const uint8_t*>(w.prepared.data);
    } else {
      d.packed = static_cast<const uint8_t*>(w.prepared.data);
    }
  }
  return d;
}

// Bytes of prepared weights a CudaOps keeps (DEEPINFER_GEMM_PREPACK_MB, default 2048; 0 = none: an
// A/B switch, same bits). The LM head of V4-Flash packs to 1.06 GB.
static int64_t prepack_budget_bytes() {
  static const int64_t mb = k::env_switch("DEEPINFER_GEMM_PREPACK_MB") ? k::env_int("DEEPINFER_GEMM_PREPACK_MB", 2048)
                                                                        : 0;
  return mb << 20;
}

// BF16 weights are prepared as the packed GEMM's blocks: the same size, and a launch reading them
// needs no staging for them, so a batch's peak memory does not grow. Without it every large-M launch
// re-packs the whole weight: for the LM head at batch 512 that was 0.5 ms of a 12 ms step (H200,
// session 22 profile), more than its GEMM's share of reading it. FP8 weights, only under the FP8
// order (DEEPINFER_GEMM_FP8_ORDER=1), as the large-M FP8 kernel's blocks: a memory-bound launch of
// 17-127 rows otherwise reads the weight three times (the pack's read and write, the GEMM's).
bool CudaOps::prepare_linear(LinearWeight& w) {
  if (!w.prepared.empty()) return true;
  if (w.weight.device != tensor::Device::kCuda) return false;
  const bool fp8 = w.format == tensor::WeightFormat::kFp8Block;
  if (w.format != tensor::WeightFormat::kBF16 && !fp8) return false;
  const k::WeightDesc d = weight_desc(w);
  const int64_t bytes = fp8 ? k::fp8_order_weight_bytes(d, w.out, w.in) : k::packed_weight_bytes(w.out, w.in);
  if (bytes == 0 || prepared_bytes_ + bytes > prepack_budget_bytes()) return false;
  TensorView packed = alloc_persistent(DType::kU8, {bytes});
  if (fp8) {
    DI_LAUNCH(k::launch_fp8_prepare_weight(d, w.out, w.in, dptr<uint8_t>(packed), stream_));
  } else {
    DI_LAUNCH(k::launch_pack_weight(d, w.out, w.in, dptr<uint8_t>(packed), stream_));
  }
  w.prepared = packed;
  prepared_bytes_ += bytes;
  return true;
}

bool CudaOps::to_fp4_device_layout(const TensorView& codes) {
  DI_CHECK(codes.device == tensor::Device::kCuda && (codes.dtype == DType::kI8 || codes.dtype == DType::kU8),
           "to_fp4_device_layout: FP4 codes must be an I8 tensor on the device ({})", codes.shape_string());
  DI_CHECK(codes.nbytes() % 4 == 0 && codes.shape[codes.rank - 1] % 4 == 0,
           "to_fp4_device_layout: rows of {} bytes are not whole 8-code words", codes.shape[codes.rank - 1]);
  if (k::fp8_experts_enabled()) {  // the FP8-order experts' layout (fp4_fold_layout.h) instead
    DI_CHECK(codes.shape[codes.rank - 1] % k::kFp4FoldBlockBytes == 0,
             "to_fp4_device_layout: DEEPINFER_GEMM_FP8_EXPERTS=1 folds whole 128-code blocks, and rows of {} bytes "
             "are not whole 64-byte blocks",
             codes.shape[codes.rank - 1]);
    DI_LAUNCH(k::launch_fp4_fold_layout(static_cast<uint8_t*>(codes.data), static_cast<int64_t>(codes.nbytes()),
                                        stream_));
    return true;
  }
  DI_LAUNCH(k::launch_fp4_to_device_layout(static_cast<uint8_t*>(codes.data), static_cast<int64_t>(codes.nbytes()),
                                           stream_));
  return true;
}

void CudaOps::linear_impl(const TensorView& x, const LinearWeight& w, const TensorView& y, int n_groups,
                          const LinearOptions& options, const LinearWeight* pair_w, const TensorView* pair_y) {
  const int64_t K = w.in, N = w.out / n_groups;
  const int64_t M = x.numel() / (K * n_groups);
  if (M == 0) return;
  DI_CHECK(x.numel() == M * K * n_groups, "linear: x {} vs weight {}", x.shape_string(), w.describe());
  DI_CHECK(y.numel() == M * N * n_groups, "linear: y {} vs {} rows of weight {}", y.shape_string(), M, w.describe());
  k::GemmParams p;
  p.M = M;
  p.N = N;
  p.K = K;
  p.lda = K * n_groups;
  p.ldc = N * n_groups;
  p.w = weight_desc(w);
  p.n_groups = n_groups;
  if (pair_w != nullptr) {
    p.n_sets = 2;
    p.w1 = weight_desc(*pair_w);
    p.C1 = pair_y->data;
    p.N1 = p.ldc1 = pair_w->out;
  }
  if (x.dtype == DType::kF32 && options.act_quant_block == 0) {
    DI_CHECK(pair_w == nullptr, "linear_impl: plain-numerics pairs go through linear()");
    // Plain numerics: F32 activations, sequential F32 sums (matches the CPU reference).
    TensorView out = y.dtype == DType::kF32 ? y : alloc(DType::kF32, {M, N * n_groups});
    p.A = x.data;
    p.C = out.data;
    DI_LAUNCH(k::launch_f32_gemm(p, stream_));
    if (out.data != y.data) convert(out, y);
    return;
  }
  p.C = y.data;
  p.c_bf16 = act_type(y) == k::ActType::kBF16;
  set_gemm_activations(p, x, options.act_quant_block);
  if (options.act_quant_block == 0) p.a_fp8_block = options.act_fp8_block;
  attach_gemm_workspace(p);
  DI_LAUNCH(k::launch_dequant_gemm(p, stream_));
}

void CudaOps::attach_gemm_workspace(k::GemmParams& p) {
  const int64_t n_partial = k::gemm_partial_floats(p);
  if (n_partial > 0) p.partial = dptr<float>(alloc(DType::kF32, {n_partial}));
  if (n_partial > 0) {
    constexpr int64_t kCounters = int64_t{1} << 16;  // covers N <= 8M columns x groups, or 256 experts x 32K
    // Concurrent launches must not count on the same counters: each side lane has its own set.
    TensorView& counters = side_lane_ < 0 ? gemm_counters_ : side_[side_lane_].counters;
    if (counters.data == nullptr) {
      counters = alloc_persistent(DType::kI32, {kCounters});
      DI_CUDA_CHECK(cudaMemsetAsync(counters.data, 0, counters.nbytes(), stream_));
    }
    if (k::gemm_counter_slots(p) <= kCounters) {
      p.tile_counters = dptr<int32_t>(counters);
      p.n_tile_counters = kCounters;
    }
  }
  if (const int64_t n = k::gemm_staging_bytes(p); n > 0) {
    p.staging = dptr<uint8_t>(alloc(DType::kU8, {n}));
    p.staging_bytes = n;
  }
}

void CudaOps::linear(const TensorView& x, const LinearWeight& w, const TensorView& y, const LinearOptions& options) {
  linear_impl(x, w, y, 1, options);
}

void CudaOps::linear_pair(const TensorView& x, const LinearWeight& w0, const LinearWeight& w1, const TensorView& y0,
                          const TensorView& y1, const LinearOptions& options) {
  // One launch for both when they stream through the same kernel: same inputs, format and blocks,
  // outputs of one type (the tensor-core path; plain F32 numerics keep two launches).
  const k::WeightDesc d0 = weight_desc(w0), d1 = weight_desc(w1);
  const bool plain = x.dtype == DType::kF32 && options.act_quant_block == 0;
  const int64_t M = w0.in > 0 ? x.numel() / w0.in : 0;
  const bool same = w0.in == w1.in && d0.fmt == d1.fmt && d0.block_in == d1.block_in &&
                    d0.block_out == d1.block_out && d0.scale_f32 == d1.scale_f32 && d0.row_bytes == d1.row_bytes &&
                    d0.scale_cols == d1.scale_cols && y0.dtype == y1.dtype && y1.numel() == M * w1.out;
  if (plain || !same) {
    linear(x, w0, y0, options);
    linear(x, w1, y1, options);
    return;
  }
  linear_impl(x, w0, y0, 1, options, &w1, &y1);
}

void CudaOps::linear_grouped(const TensorView& x, const LinearWeight& w, const TensorView& y,
                             const LinearOptions& options) {
  linear_impl(x, w, y, static_cast<int>(x.shape[1]), options);
}

}  // namespace deepinfer::ops::cuda
