// Launch functions of the KV-state, indexer and sparse-attention kernels.
#include <algorithm>
#include <type_traits>

#include "kernels/attention/indexer.cuh"
#include "kernels/attention/indexer_mma.cuh"
#include "kernels/attention/kv_state.cuh"
#include "kernels/attention/sparse_attention.cuh"
#include "kernels/attention/sparse_attention_cluster.cuh"
#include "kernels/attention/sparse_attention_mma.cuh"
#include "kernels/attention/sparse_attention_wgmma.cuh"
#include "kernels/common/act_dispatch.cuh"
#include "kernels/common/env_knob.h"
#include "kernels/common/pdl_launch.cuh"
#include "kernels/launch.h"

namespace deepinfer::kernels {

cudaError_t launch_window_store(const WindowStoreParams& p, cudaStream_t s) {
  with_act2(p.kv_type, p.w_type, [&](auto tk, auto tw) {
    using K_ = decltype(tk);
    using W_ = decltype(tw);
    launch_pdl(window_store_kernel<K_, W_>, p.n_seqs, 256, 0, s, static_cast<const K_*>(p.kv),
               p.seqs, static_cast<W_*>(p.window), p.W, p.d);
  });
  return cudaGetLastError();
}

cudaError_t launch_compress(const CompressLaunchParams& p, cudaStream_t s) {
  CompressParamsDev d{p.ratio, p.overlapped, p.dc, p.width, p.n_state, p.ring};
  // Rows first: they read the state as it was on entry; then the state after the chunk.
  if (p.n_emit > 0) {
    const dim3 grid(static_cast<unsigned>(p.n_emit), static_cast<unsigned>((p.dc + 127) / 128));
    launch_pdl(compress_rows_kernel, grid, 128, 0, s, p.kv, p.score, p.ape, p.seqs, p.token_seq,
               p.emit_token, p.n_tokens, d, p.state_kv, p.state_score, p.rows);
  }
  const dim3 grid(static_cast<unsigned>(p.n_seqs), static_cast<unsigned>(p.ring),
                  static_cast<unsigned>((p.width + 127) / 128));
  launch_pdl(compress_state_kernel, grid, 128, 0, s, p.kv, p.score, p.ape, p.seqs, d, p.state_kv,
             p.state_score);
  return cudaGetLastError();
}

cudaError_t launch_store_rows(const StoreRowsParams& p, cudaStream_t s) {
  with_act2(p.rows_type, p.pool_type, [&](auto tr, auto tp) {
    using R = decltype(tr);
    using P = decltype(tp);
    launch_pdl(store_rows_kernel<R, P>, p.n, 128, 0, s, static_cast<const R*>(p.rows), p.dst,
               static_cast<P*>(p.pool), p.width);
  });
  return cudaGetLastError();
}

// Threads per token of the top-k selection: a decode step's few tokens (one block each, a long
// context's 32K scores per token at 128K) take 1,024, prefill-sized launches 256. The selection
// is exact and emitted in index order, so the block size changes no output.
static unsigned topk_threads(int64_t T) { return T < 132 ? 1024u : 256u; }

// The top-k launch: rows of up to threads x kTopkKeysPerThread scores (all of a decode token's
// 32,768 at 128K context) kept in shared memory, longer ones on the strided path
// (DEEPINFER_TOPK_SMEM=0: every row strided, an A/B switch; the same selection either way).
static cudaError_t launch_topk(const IndexerParams& p, cudaStream_t s) {
  static const bool smem_rows = env_switch("DEEPINFER_TOPK_SMEM");
  static const cudaError_t configured =
      cudaFuncSetAttribute(topk_select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(topk_smem_bytes(1024 * kTopkKeysPerThread)));
  if (configured != cudaSuccess) return configured;
  const unsigned threads = topk_threads(p.T);
  const int32_t capacity =
      smem_rows ? static_cast<int32_t>(std::min<int64_t>(p.ld, int64_t{threads} * kTopkKeysPerThread)) : 0;
  launch_pdl(topk_select_kernel, p.T, threads, topk_smem_bytes(capacity), s, p.scores, p.ld, p.positions, p.ratio,
             p.K, capacity, p.idx);
  return cudaGetLastError();
}

cudaError_t launch_indexer_topk(const IndexerParams& p, cudaStream_t s) {
  // BF16 queries and keys take the tensor-core scores (a model property: batch invariant).
  if (p.q_type == ActType::kBF16 && p.k_type == ActType::kBF16 && indexer_mma_supports(p.Hi, p.di)) {
    static const cudaError_t configured =
        cudaFuncSetAttribute(indexer_scores_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(indexer_mma_smem_bytes()));
    if (configured != cudaSuccess) return configured;
    const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>((p.ld + kIdxMmaKeys - 1) / kIdxMmaKeys));
    launch_pdl(indexer_scores_mma_kernel, grid, 128, indexer_mma_smem_bytes(), s,
               static_cast<const __nv_bfloat16*>(p.q), p.w,
               static_cast<const __nv_bfloat16*>(p.keys), p.positions, p.token_seq, p.block_tables,
               p.max_blocks, p.ratio, p.rows_per_block, p.Hi, p.di, p.weight_scale, p.scores, p.ld);
    return launch_topk(p, s);
  }
  const size_t smem = static_cast<size_t>(indexer_smem_floats(p.Hi, p.di)) * sizeof(float);
  cudaError_t err = cudaSuccess;
  with_act2(p.q_type, p.k_type, [&](auto tq, auto tk) {
    using Q = decltype(tq);
    using KK = decltype(tk);
    auto kernel = indexer_scores_kernel<Q, KK>;
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return;
    const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>((p.ld + kIdxKeysPerBlock - 1) / kIdxKeysPerBlock));
    launch_pdl(kernel, grid, 256, smem, s, static_cast<const Q*>(p.q), p.w,
               static_cast<const KK*>(p.keys), p.positions, p.token_seq, p.block_tables,
               p.max_blocks, p.ratio, p.rows_per_block, p.Hi, p.di, p.weight_scale, p.scores, p.ld);
  });
  if (err != cudaSuccess) return err;
  return launch_topk(p, s);
}

bool attention_folds_rope(const AttentionLaunchParams& p) {
  return p.type == ActType::kBF16 && p.round_probs && mma_attention_supports(p.d);
}

// Launches of at least DEEPINFER_ATTN_WGMMA_MIN_TOKENS tokens (default 128; 0 = never, an A/B
// switch) whose rows take the tensor-core path take its wgmma form (sparse_attention_wgmma.cuh: 64
// heads per CTA) where the head_dim allows and the build and GPU have wgmma. The same bits as the
// mma.sync kernel, so the choice may depend on the batch. Measured on the H200 (4 full-width
// layers, ABAB, session 21, decode tuning record): 8K prefill +9.5%, decode batch 512 at 4K
// context +4.9%; an earlier form at threshold 64: batch 128 +0.4%, 256 +1.1% (below 128 not
// measured: those keep the mma.sync kernel).
int attention_wgmma_min_tokens() {
  static const int n =
      env_switch("DEEPINFER_ATTN_WGMMA_MIN_TOKENS") ? env_int("DEEPINFER_ATTN_WGMMA_MIN_TOKENS", 128) : 0;
  return n;
}
bool attention_takes_wgmma(const AttentionLaunchParams& p) {
#ifndef DI_CUDA_WGMMA
  (void)p;
  return false;
#else
  static const bool hopper = device_cc_major() == 9;
  const int min_tokens = attention_wgmma_min_tokens();
  return hopper && min_tokens > 0 && p.T >= min_tokens && wgmma_attention_supports(p.d);
#endif
}

namespace {
// The cluster kernel at (D, C) as compile-time constants for f(d_tag, c_tag), for the sizes
// cluster_attention_supports allows (f is not called for others).
template <typename F>
void with_cluster_kernel(int64_t d, int c, F&& f) {
  auto with_d = [&](auto d_tag) {
    constexpr int D = decltype(d_tag)::value;
    auto with_c = [&](auto c_tag) {
      if constexpr (cluster_attention_supports(D, decltype(c_tag)::value)) {
        if (c == decltype(c_tag)::value) f(d_tag, c_tag);
      }
    };
    with_c(std::integral_constant<int, 8>{});
    with_c(std::integral_constant<int, 4>{});
    with_c(std::integral_constant<int, 2>{});
  };
  switch (d) {
    case 128: with_d(std::integral_constant<int, 128>{}); break;
    case 256: with_d(std::integral_constant<int, 256>{}); break;
    case 512: with_d(std::integral_constant<int, 512>{}); break;
    default: break;
  }
}
// The cluster kernel at (D, C) opted in to its dynamic shared memory (once).
template <int D, int C>
cudaError_t cluster_kernel_configured() {
  static const cudaError_t err = cudaFuncSetAttribute(sparse_attention_cluster_kernel<D, C>,
                                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                      static_cast<int>(mma_attention_smem_bytes(D)));
  return err;
}
// Clusters of c CTAs of the cluster kernel at head_dim d the device runs at once (read once per
// size; 0 where it cannot run them).
int attention_max_clusters(int64_t d, int c) {
  int n = 0;
  with_cluster_kernel(d, c, [&](auto d_tag, auto c_tag) {
    constexpr int D = decltype(d_tag)::value, C = decltype(c_tag)::value;
    static const int max_n = [] {
      if (cluster_kernel_configured<D, C>() != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
      }
      return max_active_clusters(sparse_attention_cluster_kernel<D, C>, dim3(32 * kMmaAttnWarps),
                                 mma_attention_smem_bytes(D), C);
    }();
    n = max_n;
  });
  return n;
}
}  // namespace

// A decode-sized tensor-core launch leaves most SMs idle (4 CTAs for a batch-1 token's 64 heads),
// each walking its token's rows serially: the cluster kernel (sparse_attention_cluster.cuh) spreads
// a (token, 16 heads) CTA's work over C SMs with the same bits. Automatic: the largest C whose
// clusters all run at once (the device's max active clusters of that size, read once), else the
// one-CTA kernel. DEEPINFER_ATTN_CLUSTER=0 (or 1): never; 2 / 4 / 8: that C for every launch the
// head_dim allows (the GPU suite's way to run each size on every test); AttentionLaunchParams::
// cluster overrides both.
int attention_cluster_size(const AttentionLaunchParams& p) {
  if (device_cc_major() < 9 || !attention_folds_rope(p) || attention_takes_wgmma(p)) return 1;
  // "0" / "1": never; "2" / "4" / "8": that size; unset or anything else: automatic.
  static const int knob = [] {
    const int off = env_tristate("DEEPINFER_ATTN_CLUSTER");
    return off >= 0 ? 0 : env_int("DEEPINFER_ATTN_CLUSTER", -1, {2, 4, 8});
  }();
  const int64_t groups = p.T * ((p.H + kMmaAttnHeads - 1) / kMmaAttnHeads);
  return plan_attention_cluster(p.d, groups, p.cluster >= 0 ? p.cluster : knob,
                                [&](int c) { return attention_max_clusters(p.d, c); });
}

cudaError_t launch_sparse_attention(const AttentionLaunchParams& p, cudaStream_t s) {
  AttentionParamsDev d;
  d.H = p.H;
  d.d = p.d;
  d.W = p.W;
  d.ring = p.ring > 0 ? p.ring : p.W;
  d.ratio = p.ratio;
  d.all_compressed = p.all_compressed;
  d.rows_per_block = p.rows_per_block;
  d.max_blocks = p.max_blocks;
  d.K = p.K;
  d.softmax_scale = p.softmax_scale;
  d.round_probs = p.round_probs;
  d.rope_inv_freq = p.rope_inv_freq;
  d.rope_n = p.rope_n;
  d.rope_sign = p.rope_sign;
  // BF16 rows under the official contract take the tensor-core kernel; the choice depends on the
  // model (dtype, head_dim, numerics), never on the batch, so results stay batch invariant.
  if (attention_folds_rope(p) && attention_takes_wgmma(p)) {
    cudaError_t err = cudaSuccess;
    auto launch_wg = [&](auto d_tag, auto nwg_tag) {
      constexpr int D = decltype(d_tag)::value, NWG = decltype(nwg_tag)::value;
      const size_t smem = wgmma_attention_smem_bytes(D);
      static const cudaError_t configured = cudaFuncSetAttribute(
          sparse_attention_wgmma_kernel<D, NWG>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      if (configured != cudaSuccess) {
        err = configured;
        return;
      }
      const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>((p.H + kWgAttnHeads - 1) / kWgAttnHeads));
      launch_pdl(sparse_attention_wgmma_kernel<D, NWG>, grid, kWgAttnThreads<NWG>, smem, s,
                 static_cast<const __nv_bfloat16*>(p.q), static_cast<const __nv_bfloat16*>(p.kv_new),
                 static_cast<const __nv_bfloat16*>(p.window), static_cast<const __nv_bfloat16*>(p.comp), p.comp_idx,
                 p.sinks, p.positions, p.token_seq, p.seqs, p.block_tables, d, static_cast<__nv_bfloat16*>(p.out));
    };
    // Four warpgroups per CTA (DEEPINFER_ATTN_WGMMA_WARPGROUPS=4; head_dim 512): 16 warps per SM for
    // the same shared memory. Written in session 21, not yet run on a GPU: off by default.
    static const bool four = env_int("DEEPINFER_ATTN_WGMMA_WARPGROUPS", 2, {2, 4}) == 4;
    if (four) {  // (p.d == 512: wgmma_attention_supports)
      launch_wg(std::integral_constant<int, 512>{}, std::integral_constant<int, 4>{});
    } else {
      launch_wg(std::integral_constant<int, 512>{}, std::integral_constant<int, 2>{});
    }
    return err != cudaSuccess ? err : cudaGetLastError();
  }
  if (attention_folds_rope(p)) {
    cudaError_t err = cudaSuccess;
    const int cluster = attention_cluster_size(p);
    if (cluster > 1) {
      with_cluster_kernel(p.d, cluster, [&](auto d_tag, auto c_tag) {
        constexpr int D = decltype(d_tag)::value, C = decltype(c_tag)::value;
        if ((err = cluster_kernel_configured<D, C>()) != cudaSuccess) return;
        const dim3 grid(static_cast<unsigned>(p.T * C),
                        static_cast<unsigned>((p.H + kMmaAttnHeads - 1) / kMmaAttnHeads));
        err = launch_pdl_cluster(sparse_attention_cluster_kernel<D, C>, grid, 32 * kMmaAttnWarps,
                                 mma_attention_smem_bytes(D), s, C, static_cast<const __nv_bfloat16*>(p.q),
                                 static_cast<const __nv_bfloat16*>(p.kv_new),
                                 static_cast<const __nv_bfloat16*>(p.window),
                                 static_cast<const __nv_bfloat16*>(p.comp), p.comp_idx, p.sinks, p.positions,
                                 p.token_seq, p.seqs, p.block_tables, d, static_cast<__nv_bfloat16*>(p.out));
      });
      return err != cudaSuccess ? err : cudaGetLastError();
    }
    auto launch_mma = [&](auto d_tag) {
      constexpr int D = decltype(d_tag)::value;
      const size_t smem = mma_attention_smem_bytes(D);
      static const cudaError_t configured = cudaFuncSetAttribute(
          sparse_attention_mma_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      if (configured != cudaSuccess) {
        err = configured;
        return;
      }
      const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>((p.H + kMmaAttnHeads - 1) / kMmaAttnHeads));
      launch_pdl(sparse_attention_mma_kernel<D>, grid, 32 * kMmaAttnWarps, smem, s,
                 static_cast<const __nv_bfloat16*>(p.q),
                 static_cast<const __nv_bfloat16*>(p.kv_new),
                 static_cast<const __nv_bfloat16*>(p.window),
                 static_cast<const __nv_bfloat16*>(p.comp), p.comp_idx, p.sinks, p.positions,
                 p.token_seq, p.seqs, p.block_tables, d, static_cast<__nv_bfloat16*>(p.out));
    };
    switch (p.d) {
      case 64: launch_mma(std::integral_constant<int, 64>{}); break;
      case 128: launch_mma(std::integral_constant<int, 128>{}); break;
      case 256: launch_mma(std::integral_constant<int, 256>{}); break;
      default: launch_mma(std::integral_constant<int, 512>{}); break;
    }
    return err != cudaSuccess ? err : cudaGetLastError();
  }
  if (p.rope_inv_freq != nullptr) return cudaErrorInvalidValue;  // the scalar kernel folds no RoPE
  // Heads per block: one for few tokens (parallelism), more for many (each row read once per
  // group). Numerically neutral: a head's arithmetic does not depend on its group.
  auto launch = [&](auto g_tag) {
    constexpr int G = decltype(g_tag)::value;
    const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>((p.H + G - 1) / G));
    const size_t smem = static_cast<size_t>(kAttnWarps) * G * p.d * sizeof(float);
    with_act(p.type, [&](auto t) {
      using T = decltype(t);
      static bool configured = false;  // opt in to > 48 KiB of dynamic shared memory once
      if (!configured) {
        cudaFuncSetAttribute(sparse_attention_kernel<T, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kAttnWarps * G * 512 * sizeof(float)));
        configured = true;
      }
      launch_pdl(sparse_attention_kernel<T, G>, grid, 32 * kAttnWarps, smem, s,
                 static_cast<const T*>(p.q), static_cast<const T*>(p.kv_new),
                 static_cast<const T*>(p.window), static_cast<const T*>(p.comp), p.comp_idx,
                 p.sinks, p.positions, p.token_seq, p.seqs, p.block_tables, d,
                 static_cast<T*>(p.out));
    });
  };
  if (p.T <= 16) {
    launch(std::integral_constant<int, 1>{});
  } else {
    launch(std::integral_constant<int, 2>{});  // 512 threads: G <= 2 keeps q, acc, rows in 128 registers
  }
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
