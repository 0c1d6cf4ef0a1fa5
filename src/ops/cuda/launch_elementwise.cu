// Launch functions of the elementwise, norm, RoPE, fake-quant and hyper-connection kernels.
#include "kernels/common/act_dispatch.cuh"
#include "kernels/common/env_knob.h"
#include "kernels/common/pdl_launch.cuh"
#include "kernels/gemm/act_quant.cuh"
#include "kernels/launch.h"
#include "kernels/norm/elementwise.cuh"
#include "kernels/norm/hc.cuh"
#include "kernels/norm/hc_cluster.cuh"
#include "kernels/norm/hc_mix_prefill.cuh"
#include "kernels/sample/adjust_logits.cuh"
#include "kernels/sample/argmax.cuh"
#include "kernels/sample/gumbel_sample.cuh"
#include "kernels/sample/logprobs.cuh"
#include "kernels/sample/sample_filter.cuh"

namespace deepinfer::kernels {
namespace {

// Blocks of the row-copy kernels: (row, column chunk).
dim3 row_copy_grid(int64_t rows, int64_t width) {
  return dim3(static_cast<unsigned>(rows), static_cast<unsigned>((width + kRowCopyChunk - 1) / kRowCopyChunk));
}

}  // namespace

cudaError_t launch_embed(const EmbedParams& p, cudaStream_t s) {
  with_act2(p.table_type, p.out_type, [&](auto ti, auto to) {
    using Ti = decltype(ti);
    using To = decltype(to);
    launch_pdl(embed_gather_kernel<Ti, To>, row_copy_grid(p.T, p.D), kRowCopyThreads, 0, s, p.ids, static_cast<const Ti*>(p.table),
               static_cast<To*>(p.out), p.D);
  });
  return cudaGetLastError();
}

cudaError_t launch_broadcast_streams(const BroadcastParams& p, cudaStream_t s) {
  with_act(p.type, [&](auto t) {
    using T = decltype(t);
    launch_pdl(broadcast_streams_kernel<T>, row_copy_grid(p.T, p.D), kRowCopyThreads, 0, s, static_cast<const T*>(p.x),
               static_cast<T*>(p.out), p.D, p.hc);
  });
  return cudaGetLastError();
}

bool rms_norm_fuses_quant(int64_t n, int block) { return block == 128 && n <= kRmsWarpMaxN && n % block == 0; }

cudaError_t launch_rms_norm(const RmsNormParams& p, cudaStream_t s) {
  if (p.quant_block > 0 && !rms_norm_fuses_quant(p.n, p.quant_block)) return cudaErrorInvalidValue;
  with_act3(p.x_type, p.out_type, p.w_type, [&](auto ti, auto to, auto tw) {
    using Ti = decltype(ti);
    using To = decltype(to);
    using Tw = decltype(tw);
    if (p.n <= kRmsWarpMaxN) {
      // With the quantisation, decode-sized launches spread each row's blocks over a block's warps.
      const bool spread = p.quant_block > 0 && p.rows < 64;
      const unsigned grid = static_cast<unsigned>(spread ? p.rows : (p.rows + 7) / 8);
      auto kernel = p.quant_block == 0 ? rms_norm_warp_kernel<Ti, To, Tw, 0>
                    : spread           ? rms_norm_warp_kernel<Ti, To, Tw, 4, true>
                                       : rms_norm_warp_kernel<Ti, To, Tw, 4>;
      launch_pdl(kernel, grid, 256, 0, s, static_cast<const Ti*>(p.x), static_cast<const Tw*>(p.weight),
                 static_cast<To*>(p.out), p.rows, p.n, p.eps);
    } else if (p.n <= kRmsRowMaxN) {
      launch_pdl(rms_norm_row_kernel<Ti, To, Tw>, p.rows, 256, 0, s, static_cast<const Ti*>(p.x),
                 static_cast<const Tw*>(p.weight), static_cast<To*>(p.out), p.n, p.eps);
    } else {
      launch_pdl(rms_norm_kernel<Ti, To, Tw>, p.rows, 256, 0, s, static_cast<const Ti*>(p.x),
                 static_cast<const Tw*>(p.weight), static_cast<To*>(p.out), p.n, p.eps);
    }
  });
  return cudaGetLastError();
}

cudaError_t launch_add(const BinaryParams& p, cudaStream_t s) {
  with_act3(p.a_type, p.b_type, p.out_type, [&](auto ta, auto tb, auto to) {
    using A = decltype(ta);
    using B = decltype(tb);
    using O = decltype(to);
    launch_pdl(add_kernel<A, B, O>, grid_for(p.n), 256, 0, s, static_cast<const A*>(p.a),
               static_cast<const B*>(p.b), static_cast<O*>(p.out), p.n);
  });
  return cudaGetLastError();
}

bool swiglu_fuses_quant(int64_t width, int block, ActType out_type) {
  return block == 128 && width % block == 0 && out_type == ActType::kBF16;
}

cudaError_t launch_swiglu(const BinaryParams& p, cudaStream_t s) {
  if (p.quant_block > 0) {
    // The flat array in whole blocks (its rows are: the caller asked swiglu_fuses_quant).
    if (!swiglu_fuses_quant(p.n, p.quant_block, p.out_type)) return cudaErrorInvalidValue;
    const int64_t blocks = p.n / 128;
    with_act2(p.a_type, p.b_type, [&](auto ta, auto tb) {
      using A = decltype(ta);
      using B = decltype(tb);
      launch_pdl(swiglu_quant_kernel<A, B>, static_cast<unsigned>((blocks + 7) / 8), 256, 0, s,
                 static_cast<const A*>(p.a), static_cast<const B*>(p.b), static_cast<__nv_bfloat16*>(p.out), blocks,
                 p.limit);
    });
    return cudaGetLastError();
  }
  with_act3(p.a_type, p.b_type, p.out_type, [&](auto ta, auto tb, auto to) {
    using A = decltype(ta);
    using B = decltype(tb);
    using O = decltype(to);
    launch_pdl(swiglu_kernel<A, B, O>, grid_for(p.n), 256, 0, s, static_cast<const A*>(p.a),
               static_cast<const B*>(p.b), static_cast<O*>(p.out), p.n, p.limit);
  });
  return cudaGetLastError();
}

cudaError_t launch_convert(const ConvertParams& p, cudaStream_t s) {
  with_act2(p.x_type, p.out_type, [&](auto ti, auto to) {
    using Ti = decltype(ti);
    using To = decltype(to);
    launch_pdl(convert_kernel<Ti, To>, grid_for(p.n), 256, 0, s, static_cast<const Ti*>(p.x),
               static_cast<To*>(p.out), p.n);
  });
  return cudaGetLastError();
}

cudaError_t launch_fill(const FillParams& p, cudaStream_t s) {
  switch (p.kind) {
    case 0:
      launch_pdl(fill_kernel<float>, grid_for(p.n), 256, 0, s, static_cast<float*>(p.out), p.value,
                 p.n);
      break;
    case 1:
      launch_pdl(fill_kernel<__nv_bfloat16>, grid_for(p.n), 256, 0, s,
                 static_cast<__nv_bfloat16*>(p.out), __float2bfloat16_rn(p.value), p.n);
      break;
    default:
      launch_pdl(fill_kernel<int32_t>, grid_for(p.n), 256, 0, s, static_cast<int32_t*>(p.out),
                 static_cast<int32_t>(p.value), p.n);
  }
  return cudaGetLastError();
}

template <bool kScatter>
cudaError_t launch_indexed_rows(const GatherParams& p, cudaStream_t s) {
  with_act2(p.x_type, p.out_type, [&](auto ti, auto to) {
    using Ti = decltype(ti);
    using To = decltype(to);
    launch_pdl(indexed_rows_kernel<kScatter, Ti, To>, row_copy_grid(p.n_rows, p.width), kRowCopyThreads, 0, s,
               static_cast<const Ti*>(p.x), p.rows, static_cast<To*>(p.out), p.width);
  });
  return cudaGetLastError();
}

cudaError_t launch_gather_rows(const GatherParams& p, cudaStream_t s) { return launch_indexed_rows<false>(p, s); }
cudaError_t launch_scatter_rows(const GatherParams& p, cudaStream_t s) { return launch_indexed_rows<true>(p, s); }

int64_t argmax_workspace_slots(int64_t rows, int64_t V) {
  const int S = argmax_slices(rows, V, device_sm_count());
  return S > 1 ? rows * S : 0;
}

int64_t sample_workspace_slots(int64_t rows, int64_t V) {
  const int S = sample_slices(rows, V, device_sm_count());
  return S > 1 ? rows * S : 0;
}

cudaError_t launch_argmax_rows(const ArgmaxParams& p, cudaStream_t s) {
  if (p.rows < 1) return cudaSuccess;
  const int S = argmax_slices(p.rows, p.V, device_sm_count());
  if (S > 1 && (p.part_v == nullptr || p.part_i == nullptr)) return cudaErrorInvalidValue;
  launch_pdl(argmax_rows_kernel, dim3(static_cast<unsigned>(S), static_cast<unsigned>(p.rows)), kArgmaxThreads, 0, s,
             p.logits, p.ld, p.V, p.out, p.part_v, p.part_i);
  if (S > 1) {
    launch_pdl(argmax_merge_kernel, dim3(static_cast<unsigned>(p.rows)), 32, 0, s, p.part_v, p.part_i, S, p.out);
  }
  return cudaGetLastError();
}

// Ops::SampleRow's layout (checked against the same numbers in cuda_ops_elementwise.cc).
static_assert(sizeof(DeviceSampleRow) == 32 && offsetof(DeviceSampleRow, min_p) == 4 &&
              offsetof(DeviceSampleRow, seed) == 8 && offsetof(DeviceSampleRow, position) == 16 &&
              offsetof(DeviceSampleRow, top_k) == 24 && offsetof(DeviceSampleRow, top_p) == 28);

// Top-p rows draw first and filter only when the draw falls outside their cut (sample_filter.cuh;
// DEEPINFER_SAMPLE_DRAW_FIRST=0: every top-p row filters first, as before — an A/B switch, the
// same ids).
static bool draw_first() {
  static const bool on = env_switch("DEEPINFER_SAMPLE_DRAW_FIRST");
  return on;
}

int64_t sample_check_slots(int64_t rows, int64_t V) {
  return draw_first() ? rows * sample_slices(rows, V, device_sm_count()) * kCheckSums : 0;
}

cudaError_t launch_sample_rows(const SampleLaunchParams& p, cudaStream_t s) {
  if (p.rows < 1) return cudaSuccess;
  if (cudaError_t e = launch_argmax_rows({p.logits, p.rows, p.ld, p.V, p.out, p.part_v, p.part_i}, s); e != cudaSuccess) {
    return e;
  }
  const int S = sample_slices(p.rows, p.V, device_sm_count());
  if (S > 1 && (p.part_s == nullptr || p.part_si == nullptr)) return cudaErrorInvalidValue;
  const auto* rows = static_cast<const DeviceSampleRow*>(p.params);
  const dim3 slices(static_cast<unsigned>(S), static_cast<unsigned>(p.rows));
  const bool first = p.filters && draw_first();
  if (first) {
    if (p.pre == nullptr || p.part_check == nullptr) return cudaErrorInvalidValue;
    // The draw over every min-p survivor into pre (rows without top-k), then the mass above it per slice.
    launch_pdl(gumbel_sample_kernel, slices, 1024, 0, s, p.logits, p.ld, p.V, rows, static_cast<const float*>(nullptr),
               static_cast<const int32_t*>(p.out), p.pre, static_cast<const int32_t*>(nullptr), p.part_s, p.part_si, true);
    if (S > 1) {
      launch_pdl(sample_merge_kernel, dim3(static_cast<unsigned>(p.rows)), 32, 0, s, rows,
                 static_cast<const double*>(p.part_s), static_cast<const int32_t*>(p.part_si), S,
                 static_cast<const float*>(nullptr), static_cast<const int32_t*>(nullptr), p.pre);
    }
    launch_pdl(sample_check_kernel, slices, 1024, 0, s, p.logits, p.ld, p.V, rows, static_cast<const int32_t*>(p.out),
               static_cast<const int32_t*>(p.pre), p.part_check);
  }
  if (p.filters) {
    if (p.cut == nullptr) return cudaErrorInvalidValue;
    // A cluster of CTAs per row at small batch (one per row where the device cannot run them).
    static const bool clusters = max_active_clusters(sample_filter_kernel, dim3(kFilterThreads), 0, 8) > 0;
    const int C = clusters ? sample_filter_cluster(p.rows, device_sm_count()) : 1;
    // Clusters keep their share of the row in shared memory when it fits (sample_filter_kernel).
    static const bool big_smem = [] {
      if (cudaFuncSetAttribute(sample_filter_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               kFilterCacheMaxBytes) == cudaSuccess) {
        return true;
      }
      (void)cudaGetLastError();  // not a launch error: the launches run uncached
      return false;
    }();
    const int64_t per = (p.V + C - 1) / C;
    const int64_t cache = C > 1 && big_smem && per * kFilterCacheBytes <= kFilterCacheMaxBytes ? per : 0;
    launch_pdl_cluster(sample_filter_kernel, dim3(static_cast<unsigned>(C), static_cast<unsigned>(p.rows)),
                       dim3(kFilterThreads), static_cast<size_t>(cache * kFilterCacheBytes), s, static_cast<unsigned>(C),
                       p.logits, p.ld, p.V, rows, static_cast<const int32_t*>(p.out), p.cut, cache,
                       static_cast<const unsigned long long*>(first ? p.part_check : nullptr), S);
  }
  // The (second) draw, over each row's survivors; rows whose first draw stands copy it.
  const float* cut = p.filters ? static_cast<const float*>(p.cut) : nullptr;
  const int32_t* pre = first ? static_cast<const int32_t*>(p.pre) : nullptr;
  launch_pdl(gumbel_sample_kernel, slices, 1024, 0, s, p.logits, p.ld, p.V, rows, cut,
             static_cast<const int32_t*>(p.out), p.out, pre, p.part_s, p.part_si, false);
  if (S > 1) {
    launch_pdl(sample_merge_kernel, dim3(static_cast<unsigned>(p.rows)), 32, 0, s, rows,
               static_cast<const double*>(p.part_s), static_cast<const int32_t*>(p.part_si), S, cut, pre, p.out);
  }
  return cudaGetLastError();
}

// Ops::AdjustRow / AdjustEntry's layouts (checked against the same numbers in cuda_ops_elementwise.cc).
static_assert(sizeof(DeviceAdjustRow) == 36 && offsetof(DeviceAdjustRow, mask_row) == 16 &&
              offsetof(DeviceAdjustRow, repetition) == 20 && offsetof(DeviceAdjustRow, frequency) == 28 &&
              offsetof(DeviceAdjustRow, pending) == 32);
static_assert(sizeof(DeviceAdjustEntry) == 16 && offsetof(DeviceAdjustEntry, bias) == 4 &&
              offsetof(DeviceAdjustEntry, seen) == 12);

int64_t adjust_workspace_slots(int64_t rows) { return rows * kAdjustSlices; }

cudaError_t launch_adjust_logits(const AdjustLaunchParams& p, cudaStream_t s) {
  if (p.rows < 1) return cudaSuccess;
  const auto* rows = static_cast<const DeviceAdjustRow*>(p.rows_params);
  launch_pdl(adjust_dense_kernel, dim3(kAdjustSlices, static_cast<unsigned>(p.rows)), kAdjustThreads, 0, s, p.logits,
             p.ld, p.V, rows, p.masks, p.out, p.part_finite);
  launch_pdl(adjust_sparse_kernel, dim3(static_cast<unsigned>(p.rows)), kAdjustThreads, 0, s, p.V, rows,
             static_cast<const DeviceAdjustEntry*>(p.entries), p.stops, p.pending_ids,
             static_cast<const int32_t*>(p.part_finite), p.out);
  return cudaGetLastError();
}

int64_t logprob_workspace_slots(int64_t rows) { return rows * kLogprobSlices; }

cudaError_t launch_logprob_rows(const LogprobLaunchParams& p, cudaStream_t s) {
  if (p.rows < 1) return cudaSuccess;
  if (p.n < 0 || p.n > kLogprobMaxTop) return cudaErrorInvalidValue;
  launch_pdl(logprob_slice_kernel, dim3(kLogprobSlices, static_cast<unsigned>(p.rows)), kLogprobThreads, 0, s, p.logits,
             p.ld, p.V, p.n, p.part_m, p.part_sum, p.part_v, p.part_i);
  launch_pdl(logprob_merge_kernel, dim3(static_cast<unsigned>(p.rows)), 32, 0, s, p.logits, p.ld, p.n, p.part_m,
             p.part_sum, p.part_v, p.part_i, p.tokens, p.logprob, p.top_ids, p.top_lp);
  return cudaGetLastError();
}

cudaError_t launch_token_rank_rows(const TokenRankLaunchParams& p, cudaStream_t s) {
  if (p.rows < 1) return cudaSuccess;
  launch_pdl(token_rank_kernel, dim3(static_cast<unsigned>(p.rows)), kLogprobThreads, 0, s, p.logits, p.ld, p.V,
             p.tokens, p.rank);
  return cudaGetLastError();
}

cudaError_t launch_rope(const RopeLaunchParams& p, cudaStream_t s) {
  with_act(p.type, [&](auto t) {
    using T = decltype(t);
    launch_pdl(rope_kernel<T>,
               dim3(static_cast<unsigned>(p.N),
                    static_cast<unsigned>((p.heads + kRopeHeadsPerBlock - 1) / kRopeHeadsPerBlock)),
               128, 0, s, static_cast<T*>(p.x), p.positions, p.inv_freq, p.heads, p.width, p.n_rope,
               p.sign);
  });
  return cudaGetLastError();
}

bool norm_rope_fusable(const NormRopeParams& p) {
  const bool shape_ok = p.width == kNormRopeWidth && p.n_rope == kNormRopeDims && p.heads > 0;
  const bool quant_ok = p.quant_dims == 0 || (p.quant_block == 64 && p.quant_dims % 64 == 0 && p.quant_dims <= p.width);
  return shape_ok && quant_ok;
}

cudaError_t launch_norm_rope(const NormRopeParams& p, cudaStream_t s) {
  if (!norm_rope_fusable(p)) return cudaErrorInvalidValue;
  const int64_t rows = p.N * p.heads;
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);  // 8 rows (warps) per block
  with_act2(p.type, p.w_type, [&](auto t, auto tw) {
    using T = decltype(t);
    using W = decltype(tw);
    auto launch = [&](auto kernel) {
      launch_pdl(kernel, blocks, 256, 0, s, static_cast<T*>(p.x), static_cast<const W*>(p.weight), rows, p.heads,
                 p.eps, p.positions, p.inv_freq, p.sign, p.quant_dims);
    };
    if (p.quant_dims > 0) {
      launch(norm_rope_kernel<T, W, 2>);
    } else {
      launch(norm_rope_kernel<T, W, 0>);
    }
  });
  return cudaGetLastError();
}

cudaError_t launch_fp8_fake_quant(const FakeQuantParams& p, cudaStream_t s) {
  // Whole BF16 rows in 128-channel blocks: the vectorised act_quant kernel in place (each lane
  // loads its values before storing them; the same arithmetic) — the one-warp-per-block kernel
  // below, with 2-byte loads, cost 2% of an 8K prefill on wo_b's input.
  if (p.type == ActType::kBF16 && p.n_dims == p.width && p.block == 128 && p.width % 128 == 0 &&
      reinterpret_cast<uintptr_t>(p.x) % 16 == 0) {
    return launch_act_quant_bf16({p.x, ActType::kBF16, p.x, p.rows, p.width, p.block}, s);
  }
  const dim3 grid(static_cast<unsigned>(p.rows), static_cast<unsigned>((p.n_dims + p.block - 1) / p.block));
  with_act(p.type, [&](auto t) {
    using T = decltype(t);
    launch_pdl(fp8_fake_quant_kernel<T>, grid, 32, 0, s, static_cast<T*>(p.x), p.width, p.n_dims,
               p.block);
  });
  return cudaGetLastError();
}

cudaError_t launch_hadamard_fp4(const FakeQuantParams& p, cudaStream_t s, bool warp_rows) {
  static const bool warp_knob = env_switch("DEEPINFER_HADAMARD_WARP");
  const int64_t E = p.width / 32;
  const bool warp = warp_rows && warp_knob && p.width % 32 == 0 && E >= 1 && E <= kHadamardWarpMaxE &&
                    (E & (E - 1)) == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  with_act(p.type, [&](auto t) {
    using T = decltype(t);
    T* x = static_cast<T*>(p.x);
    if (!warp) {
      launch_pdl(hadamard_fp4_kernel<T>, p.rows, 128, p.width * sizeof(float), s, x, static_cast<int>(p.width));
      return;
    }
    const dim3 grid(static_cast<unsigned>((p.rows + kHadamardWarpRows - 1) / kHadamardWarpRows));
    const int threads = 32 * kHadamardWarpRows;
    switch (E) {
      case 1: launch_pdl(hadamard_fp4_warp_kernel<T, 1>, grid, threads, 0, s, x, p.rows); break;
      case 2: launch_pdl(hadamard_fp4_warp_kernel<T, 2>, grid, threads, 0, s, x, p.rows); break;
      case 4: launch_pdl(hadamard_fp4_warp_kernel<T, 4>, grid, threads, 0, s, x, p.rows); break;
      default: launch_pdl(hadamard_fp4_warp_kernel<T, 8>, grid, threads, 0, s, x, p.rows); break;
    }
  });
  return cudaGetLastError();
}

namespace {
bool aligned_to(const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// The vectorised act_quant kernels when the shapes allow (same results): blocks of 128 channels
// (the model's, model_v4_flash.md §3.2) that tile the rows, or a plain conversion of a multiple
// of 4 elements; anything else takes the one-warp-per-block kernel.
template <typename T>
bool launch_act_quant_vec(const ActQuantParams& p, cudaStream_t s) {
  const T* x = static_cast<const T*>(p.x);
  auto* out = static_cast<__nv_bfloat16*>(p.out_bf16);
  const int64_t n = p.rows * p.width;
  if (p.block <= 0) {
    if (n % 4 != 0 || !aligned_to(x, 4 * sizeof(T)) || !aligned_to(out, 8)) return false;
    launch_pdl(act_to_bf16_vec_kernel<T>, static_cast<unsigned>((n / 4 + 255) / 256), 256, 0, s, x, out, n);
    return true;
  }
  constexpr int V = 4;  // 128 = 32 lanes x 4 channels
  if (p.block != 32 * V || p.width % p.block != 0 || !aligned_to(x, V * sizeof(T)) || !aligned_to(out, 2 * V))
    return false;
  const int64_t blocks = n / p.block;
  launch_pdl(act_quant_bf16_vec_kernel<T, V>, static_cast<unsigned>((blocks + 7) / 8), 256, 0, s, x, out, blocks);
  return true;
}
}  // namespace

cudaError_t launch_act_quant_bf16(const ActQuantParams& p, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(p.rows), p.block > 0 ? static_cast<unsigned>((p.width + p.block - 1) / p.block) : 1u);
  with_act(p.x_type, [&](auto t) {
    using T = decltype(t);
    if (launch_act_quant_vec<T>(p, s)) return;
    launch_pdl(act_quant_bf16_kernel<T>, grid, p.block > 0 ? 32 : 256, 0, s,
               static_cast<const T*>(p.x), static_cast<__nv_bfloat16*>(p.out_bf16), p.width,
               p.block);
  });
  return cudaGetLastError();
}

namespace {
int hc_mix_tokens() {
  static const int n = env_int("DEEPINFER_HC_MIX_TOKENS", 32, {1, 2, 4, 32, 64});
  return n;
}
}  // namespace

bool hc_mix_uses_prefill_kernel(int n_mix, int64_t T, int64_t chunk) {
  return hc_mix_tokens() >= 32 && hc_mix_prefill_covers(n_mix, T, chunk);
}

// The prefill mixing kernel with TB tokens per block; false (nothing launched) where the device
// refuses its 105 KB of shared memory (asked once per instantiation).
template <typename X, int TB>
bool launch_hc_mix_prefill(const X* x, const float* fn, float* partial, int64_t T, int64_t K, int n_split,
                           int64_t chunk, cudaStream_t s) {
  static const bool configured = [] {
    if (cudaFuncSetAttribute(hc_mix_prefill_kernel<X, TB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kHcPrefillSmem)) == cudaSuccess)
      return true;
    (void)cudaGetLastError();  // cleared: the caller falls back to the 4-token kernel
    return false;
  }();
  if (!configured) return false;
  const dim3 grid(static_cast<unsigned>((T + TB - 1) / TB), static_cast<unsigned>(n_split), 1);
  launch_pdl(hc_mix_prefill_kernel<X, TB>, grid, kHcMixThreads, kHcPrefillSmem, s, x, fn, partial, K, chunk, T);
  return true;
}

// hc_mix_partial with its exact column count: (2 + hc) hc before a sublayer, hc at the head
// (hc <= 4, checked by the caller); 4 columns per block below 64 tokens (numerically neutral).
template <typename X, int N>
void launch_hc_mix_n(const X* x, const float* fn, float* partial, int64_t T, int64_t K, int n_split, int64_t chunk,
                     cudaStream_t s) {
  constexpr int kNarrow = N < 4 ? N : 4;
  if (T < 64) {
    const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(n_split), (N + kNarrow - 1) / kNarrow);
    launch_pdl(hc_mix_partial_kernel<X, N, kNarrow>, grid, kHcMixThreads, 0, s, x, fn, partial, K,
               chunk, T, HcPostFold<X, X>{});
    return;
  }
  // Tokens per block for the V4 mix (N = 24; DEEPINFER_HC_MIX_TOKENS = 1, 2, 4, 32 (default) or 64,
  // tuning only: the bits are the one-token block's). 32 and 64: hc_mix_prefill_kernel (matrix
  // slice in registers, tokens reduced in groups of 4) where it covers the launch. Measured on the
  // H200 (4 full-width layers): 4 vs 1 = +1.2% 8K prefill, +1.4% batch-512 decode; 2 in between;
  // 32 vs 4 = +2.7% 8K prefill, +2.4% batch-512 decode (session 13).
  const int tpb = hc_mix_tokens();
  auto launch = [&](auto kernel, int per_block) {
    const dim3 grid(static_cast<unsigned>((T + per_block - 1) / per_block), static_cast<unsigned>(n_split), 1);
    launch_pdl(kernel, grid, kHcMixThreads, 0, s, x, fn, partial, K, chunk, T, HcPostFold<X, X>{});
  };
  if constexpr (N == 24) {
    if (hc_mix_uses_prefill_kernel(N, T, chunk)) {
      if (tpb == 64 ? launch_hc_mix_prefill<X, 64>(x, fn, partial, T, K, n_split, chunk, s)
                    : launch_hc_mix_prefill<X, 32>(x, fn, partial, T, K, n_split, chunk, s))
        return;
    }
    if (tpb == 4 || tpb >= 32) return launch(hc_mix_partial_kernel<X, N, N, 4>, 4);
    if (tpb == 2) return launch(hc_mix_partial_kernel<X, N, N, 2>, 2);
  }
  launch(hc_mix_partial_kernel<X, N, N, 1>, 1);
}
template <typename X>
void launch_hc_mix(const X* x, const float* fn, float* partial, int64_t T, int64_t K, int n_mix, int n_split,
                   int64_t chunk, cudaStream_t s) {
  switch (n_mix) {
#define DI_HC_MIX_CASE(n) \
  case n: launch_hc_mix_n<X, n>(x, fn, partial, T, K, n_split, chunk, s); break;
    DI_HC_MIX_CASE(1) DI_HC_MIX_CASE(2) DI_HC_MIX_CASE(3) DI_HC_MIX_CASE(4) DI_HC_MIX_CASE(8) DI_HC_MIX_CASE(15)
    DI_HC_MIX_CASE(24)
#undef DI_HC_MIX_CASE
    default: break;  // unreachable: hc <= 4
  }
}

bool hc_pre_folds_norm(int64_t D) { return D > kRmsWarpMaxN && D <= kRmsRowMaxN; }
bool hc_pre_quant_copies(int64_t D, int block) { return hc_pre_folds_norm(D) && block == 128 && D % block == 0; }

bool hc_pre_folds_post(int64_t T, int hc) { return hc == 4 && T < 64; }

namespace {
// f(std::integral_constant<int, c>) for a finalize cluster size c of 2, 4 or 8.
template <typename F>
void with_hc_cluster(int c, F&& f) {
  switch (c) {
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    default: break;
  }
}
// Clusters of C CTAs of the cluster finalize the device runs at once (read once per size).
template <typename X, typename U, int C>
int hc_max_clusters() {
  static const int n = max_active_clusters(hc_pre_finalize_cluster_kernel<X, U, 4, C>, dim3(kHcClusterThreads), 0, C);
  return n;
}
// The decode-sized finalize's cluster size (1: the one-CTA kernel). DEEPINFER_HC_CLUSTER unset or
// "auto": the largest size whose clusters all run at once (plan_hc_cluster) — in the replayed
// batch-1 step's kernel timeline the GPU span is 913-915 us with it against 935-936 us for the
// one-CTA kernel (ABAB, session 27; batch 8 level); "0" / "1": the one-CTA kernel (the suite runs
// the model tests with it); 2 / 4 / 8: that size wherever the shape allows (the suite runs the mHC
// tests with 2 and 4). HcParamsDev::cluster overrides the variable.
template <typename X, typename U>
int hc_finalize_cluster_size(const HcParamsDev& p) {
  if (device_cc_major() < 9) return 1;
  static const int knob = [] {
    const char* v = std::getenv("DEEPINFER_HC_CLUSTER");
    if (v == nullptr || std::strcmp(v, "auto") == 0) return -1;
    return env_int("DEEPINFER_HC_CLUSTER", 1, {1, 2, 4, 8});  // "0" (not positive): 1
  }();
  return plan_hc_cluster(p.T, p.D, p.hc, p.fold_norm, p.cluster >= 0 ? p.cluster : knob, [](int c) {
    int n = 0;
    with_hc_cluster(c, [&](auto tag) { n = hc_max_clusters<X, U, decltype(tag)::value>(); });
    return n;
  });
}
// hc_post folded into the mixing pass before the finalize (HcParamsDev::post_o): the decode-sized
// V4 launch (4 mix columns per block) computes the new streams itself; otherwise hc_post runs
// first. Either way p.x holds the new streams afterwards.
template <typename X, typename O>
void launch_hc_post_then_mix(const HcParamsDev& p, int64_t K, int n_mix, int64_t chunk, cudaStream_t s) {
  const HcPostFold<X, O> fold{static_cast<const O*>(p.post_o), static_cast<const X*>(p.post_x), p.post_in,
                              p.comb_in, static_cast<X*>(const_cast<void*>(p.x)), p.D};
  if (hc_pre_folds_post(p.T, p.hc)) {
    constexpr int N = 24, kNarrow = 4;
    const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>(p.n_split), N / kNarrow);
    launch_pdl(hc_mix_partial_kernel<X, N, kNarrow, 1, O, true>, grid, kHcMixThreads, 0, s,
               static_cast<const X*>(nullptr), p.fn, p.partial, K, chunk, p.T, fold);
    return;
  }
  launch_hc_post({p.post_o, p.post_o_type, p.post_x, const_cast<void*>(p.x), p.x_type, p.post_in, p.comb_in, p.T,
                  p.D, p.hc},
                 s);
  launch_hc_mix<X>(static_cast<const X*>(p.x), p.fn, p.partial, p.T, K, n_mix, p.n_split, chunk, s);
}
}  // namespace

int hc_pre_cluster_size(const HcParamsDev& p) {
  int c = 1;
  with_act2(p.x_type, p.u_type, [&](auto tx, auto tu) { c = hc_finalize_cluster_size<decltype(tx), decltype(tu)>(p); });
  return c;
}

cudaError_t launch_hc_pre(const HcParamsDev& p, cudaStream_t s) {
  const int n_mix = (2 + p.hc) * p.hc;
  const int64_t K = p.hc * p.D, chunk = (K + p.n_split - 1) / p.n_split;
  if (p.fold_norm && !hc_pre_folds_norm(p.D)) return cudaErrorInvalidValue;
  if (p.uq != nullptr && (!p.fold_norm || !hc_pre_quant_copies(p.D, 128))) return cudaErrorInvalidValue;
  HcPreParams fp{p.D, p.hc, p.n_split, p.sinkhorn_iters, p.hc_eps, p.norm_eps, p.base, p.scale};
  fp.fold_norm = p.fold_norm;
  fp.norm = p.norm;
  fp.norm_bf16 = p.norm_type == ActType::kBF16;
  fp.rms_eps = p.rms_eps;
  fp.uq = static_cast<__nv_bfloat16*>(p.uq);
  static const bool sinkhorn_cta = env_switch("DEEPINFER_HC_SINKHORN_CTA");
  fp.sinkhorn_cta = sinkhorn_cta && p.T < 64;
  // The collapse's 16-byte loads (same bits): by default for prefill-sized launches (the 256-thread
  // block: an 8K prefill +0.8%, session 21 ABAB), not for decode-sized ones, whose 1,024 threads
  // would leave half idle on a row's 512 groups of 8 columns (batch 1 and 32 measured level to
  // -0.4%). DEEPINFER_HC_VEC_COLLAPSE=0 / 1: never / always (A/B switch).
  static const int vec_knob = env_tristate("DEEPINFER_HC_VEC_COLLAPSE");
  const int vec_mode = p.vec_collapse >= 0 ? p.vec_collapse : vec_knob;
  const bool vec_collapse = (vec_mode < 0 ? p.T >= 64 : vec_mode == 1) && p.D % 8 == 0 &&
                            reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  with_act2(p.x_type, p.u_type, [&](auto tx, auto tu) {
    using X = decltype(tx);
    using U = decltype(tu);
    if (p.post_o != nullptr) {
      with_act(p.post_o_type, [&](auto to) { launch_hc_post_then_mix<X, decltype(to)>(p, K, n_mix, chunk, s); });
    } else {
      launch_hc_mix<X>(static_cast<const X*>(p.x), p.fn, p.partial, p.T, K, n_mix, p.n_split, chunk, s);
    }
    // The cluster finalize where asked for (the same bits; hc_finalize_cluster_size).
    if (const int cl = hc_finalize_cluster_size<X, U>(p); cl > 1) {
      with_hc_cluster(cl, [&](auto tag) {
        constexpr int C = decltype(tag)::value;
        launch_pdl_cluster(hc_pre_finalize_cluster_kernel<X, U, 4, C>, dim3(C, static_cast<unsigned>(p.T), 2),
                           dim3(kHcClusterThreads), 0, s, C, static_cast<const X*>(p.x), p.partial, fp,
                           static_cast<U*>(p.u), p.post, p.comb);
      });
      return;
    }
    // Numerically neutral: the block size only spreads the collapse over more warps, and the
    // Sinkhorn block takes the serial iterations off the path to u (decode-sized batches, unless
    // DEEPINFER_HC_SINKHORN_CTA=0).
    const dim3 grid(static_cast<unsigned>(p.T), fp.sinkhorn_cta ? 2u : 1u);
    const int threads = p.T < 64 ? kHcFinalizeDecodeThreads : kHcFinalizePrefillThreads;
    launch_pdl(vec_collapse ? hc_pre_finalize_kernel<X, U, true> : hc_pre_finalize_kernel<X, U, false>, grid,
               threads, 0, s, static_cast<const X*>(p.x), p.partial, fp, static_cast<U*>(p.u), p.post, p.comb);
  });
  return cudaGetLastError();
}

cudaError_t launch_hc_head(const HcParamsDev& p, cudaStream_t s) {
  const int64_t K = p.hc * p.D, chunk = (K + p.n_split - 1) / p.n_split;
  HcPreParams fp{p.D, p.hc, p.n_split, 0, p.hc_eps, p.norm_eps, p.base, p.scale};
  with_act2(p.x_type, p.u_type, [&](auto tx, auto tu) {
    using X = decltype(tx);
    using U = decltype(tu);
    launch_hc_mix<X>(static_cast<const X*>(p.x), p.fn, p.partial, p.T, K, p.hc, p.n_split, chunk, s);
    const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>((p.D + kHcHeadChunk - 1) / kHcHeadChunk));
    launch_pdl(hc_head_finalize_kernel<X, U>, grid, kHcHeadThreads, 0, s, static_cast<const X*>(p.x), p.partial,
               fp, static_cast<U*>(p.u));
  });
  return cudaGetLastError();
}

cudaError_t launch_hc_post(const HcPostParams& p, cudaStream_t s) {
  with_act2(p.x_type, p.o_type, [&](auto tx, auto to) {
    using X = decltype(tx);
    using O = decltype(to);
    const O* o = static_cast<const O*>(p.o);
    const X* x = static_cast<const X*>(p.x);
    X* out = static_cast<X*>(p.out);
    const bool vec = p.D % 8 == 0 && p.hc >= 1 && p.hc <= 4 &&
                     (reinterpret_cast<uintptr_t>(o) | reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) % 16 == 0;
    if (vec) {
      const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>((p.D / 8 + kHcPostVecThreads - 1) / kHcPostVecThreads));
      switch (p.hc) {
        case 1:
          launch_pdl(hc_post_vec_kernel<X, O, 1>, grid, kHcPostVecThreads, 0, s, o, x, p.post,
                     p.comb, out, p.D);
          break;
        case 2:
          launch_pdl(hc_post_vec_kernel<X, O, 2>, grid, kHcPostVecThreads, 0, s, o, x, p.post,
                     p.comb, out, p.D);
          break;
        case 3:
          launch_pdl(hc_post_vec_kernel<X, O, 3>, grid, kHcPostVecThreads, 0, s, o, x, p.post,
                     p.comb, out, p.D);
          break;
        default:
          launch_pdl(hc_post_vec_kernel<X, O, 4>, grid, kHcPostVecThreads, 0, s, o, x, p.post,
                     p.comb, out, p.D);
          break;
      }
      return;
    }
    launch_pdl(hc_post_kernel<X, O>, dim3(p.T, p.hc, (p.D + kHcPostChunk - 1) / kHcPostChunk), 256,
               0, s, o, x, p.post, p.comb, out, p.D, p.hc);
  });
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
