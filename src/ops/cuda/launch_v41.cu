// Launch functions of the DeepSeek-V4.1 kernels (kernels/launch_v41.h).
#include "kernels/common/act_dispatch.cuh"
#include "kernels/common/pdl_launch.cuh"
#include "kernels/launch_v41.h"
#include "kernels/v41/attention_v41.cuh"
#include "kernels/v41/residual_v41.cuh"

namespace deepinfer::kernels {
namespace {

// Opts a kernel into `smem` bytes of dynamic shared memory past the 48 KB default (idempotent).
template <typename Kernel>
cudaError_t allow_smem(Kernel kernel, size_t smem) {
  if (smem <= (48u << 10)) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
}

}  // namespace

cudaError_t launch_kv_fake_quant_v41(const KvFakeQuantV41Params& p, cudaStream_t s) {
  const int64_t n = p.rows * p.width;
  if (n == 0) return cudaSuccess;
  with_act(p.type, [&](auto tx) {
    using X = decltype(tx);
    launch_pdl(kv_fake_quant_v41_kernel<X>, grid_for(n), 256, 0, s, static_cast<X*>(p.x), n, p.format);
  });
  return cudaGetLastError();
}

size_t hc_mix_v41_smem(int hc, int64_t D) { return static_cast<size_t>(hc) * D * sizeof(float); }

cudaError_t launch_hc_mix_v41(const HcMixV41Params& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  if (p.hc < 1 || p.hc > 4) return cudaErrorInvalidValue;
  HcPreParams hp;
  hp.D = p.D;
  hp.hc = p.hc;
  hp.sinkhorn_iters = p.sinkhorn_iters;
  hp.hc_eps = p.hc_eps;
  hp.norm_eps = p.norm_eps;
  hp.base = p.base;
  hp.scale = p.scale;
  const size_t smem = hc_mix_v41_smem(p.hc, p.D);
  cudaError_t err = cudaSuccess;
  with_act(p.type, [&](auto tx) {
    using X = decltype(tx);
    err = allow_smem(hc_mix_v41_kernel<X>, smem);
    if (err != cudaSuccess) return;
    launch_pdl(hc_mix_v41_kernel<X>, static_cast<unsigned>(p.T), kHcMixV41Threads, smem, s,
               static_cast<const X*>(p.x), p.fn, hp, p.pre, p.post, p.comb);
  });
  return err != cudaSuccess ? err : cudaGetLastError();
}

cudaError_t launch_hc_collapse_v41(const HcCollapseV41Params& p, cudaStream_t s) {
  const int64_t n = p.T * p.D;
  if (n == 0) return cudaSuccess;
  with_act2(p.x_type, p.u_type, [&](auto tx, auto tu) {
    using X = decltype(tx);
    using U = decltype(tu);
    launch_pdl(hc_collapse_v41_kernel<X, U>, grid_for(n), 256, 0, s, static_cast<const X*>(p.x), p.pre,
               static_cast<U*>(p.u), p.T, p.D, p.hc);
  });
  return cudaGetLastError();
}

cudaError_t launch_engram_gate(const EngramGateParams& p, cudaStream_t s) {
  const int64_t warps = p.T * p.hc;
  if (warps == 0) return cudaSuccess;
  with_act3(p.x_type, p.kv_type, p.out_type, [&](auto tx, auto tk, auto to) {
    using X = decltype(tx);
    using K_ = decltype(tk);
    using O = decltype(to);
    launch_pdl(engram_gate_kernel<X, K_, O>, grid_for(warps * 32), 256, 0, s, static_cast<const X*>(p.x),
               static_cast<const K_*>(p.kv), p.q_weight, p.k_weight, p.live, static_cast<O*>(p.out), p.T, p.D,
               p.hc, p.eps);
  });
  return cudaGetLastError();
}

cudaError_t launch_block_attention(const BlockAttentionParams& p, cudaStream_t s) {
  if (p.T == 0 || p.H == 0) return cudaSuccess;
  const size_t smem = static_cast<size_t>(p.d + p.max_rows) * sizeof(float);
  cudaError_t err = cudaSuccess;
  with_act(p.type, [&](auto tx) {
    using X = decltype(tx);
    err = allow_smem(block_attention_kernel<X>, smem);
    if (err != cudaSuccess) return;
    const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>(p.H));
    launch_pdl(block_attention_kernel<X>, grid, 128, smem, s, static_cast<const X*>(p.q),
               static_cast<const X*>(p.kv_block), static_cast<const X*>(p.window), p.sinks, p.seqs, p.token_seq,
               static_cast<X*>(p.out), p.H, p.d, p.W, p.ring, p.softmax_scale);
  });
  return err != cudaSuccess ? err : cudaGetLastError();
}

size_t indexer_v41_smem(int Hi, int di) { return static_cast<size_t>(indexer_smem_floats(Hi, di)) * sizeof(float); }

cudaError_t launch_indexer_topk_v41(const IndexerV41LaunchParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  const size_t smem = indexer_v41_smem(p.Hi, p.di);
  cudaError_t err = cudaSuccess;
  with_act2(p.q_type, p.k_type, [&](auto tq, auto tk) {
    using Q = decltype(tq);
    using K_ = decltype(tk);
    err = allow_smem(indexer_v41_scores_kernel<Q, K_>, smem);
    if (err != cudaSuccess) return;
    const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>((p.ld + kIdxKeysPerBlock - 1) / kIdxKeysPerBlock));
    launch_pdl(indexer_v41_scores_kernel<Q, K_>, grid, 256, smem, s, static_cast<const Q*>(p.q), p.w,
               static_cast<const K_*>(p.keys), p.positions, p.token_seq, p.block_tables, p.max_blocks, p.ratio,
               p.rows_per_block, p.Hi, p.di, p.score_scale, p.weight_scale, p.candidates, p.cand,
               p.candidate_topk_blocks, p.candidate_block_size, p.scores, p.ld);
  });
  if (err != cudaSuccess) return err;
  launch_pdl(indexer_v41_select_kernel, static_cast<unsigned>(p.T), 256, 0, s, p.scores, p.ld, p.positions, p.ratio,
             p.K, p.candidates, p.cand, p.candidate_topk_blocks, p.candidate_block_size, p.block_max, p.ld_blocks,
             p.idx);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
