// Launch functions of the MoE kernels (routing, expert grouping, SwiGLU epilogue, combine).
#include "kernels/common/act_dispatch.cuh"
#include "kernels/common/env_knob.h"
#include "kernels/common/pdl_launch.cuh"
#include "kernels/launch.h"
#include "kernels/moe/moe.cuh"

namespace deepinfer::kernels {

cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t s) {
  constexpr int kWarps = 8;
  launch_pdl(moe_route_kernel, static_cast<unsigned>((p.T + kWarps - 1) / kWarps), 32 * kWarps, 0,
             s, p.logits, p.bias, p.tid2eid, p.ids, p.T, p.E, p.k, p.route_scale, p.sel, p.weights);
  return cudaGetLastError();
}

namespace {
// The one-block grouping kernel for decode-sized batches unless DEEPINFER_MOE_GROUP_SMALL=0 (an A/B
// and test switch: the general path otherwise runs only for prefills of thousands of tokens).
bool moe_group_small() {
  static const bool on = env_switch("DEEPINFER_MOE_GROUP_SMALL");
  return on;
}
// The one-block grouping kernel takes the launch (decode-sized batches).
bool moe_group_one_block(const MoeGroupParams& p) {
  return p.E <= kMoeGroupSmallMaxE && p.n_pairs <= kMoeGroupSmallPairs && moe_group_small();
}
}  // namespace

bool moe_group_quantises(const MoeGroupParams& p) {
  const auto aligned = [](const void* ptr, uintptr_t a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; };
  return moe_group_one_block(p) && p.x != nullptr && p.xq != nullptr && p.x_rows > 0 && p.x_width % 128 == 0 &&
         p.x_rows * (p.x_width / 128) <= kMoeGroupQuantMaxBlocks && aligned(p.x, 16) && aligned(p.xq, 8);
}

cudaError_t launch_moe_group(const MoeGroupParams& p, cudaStream_t s) {
  const bool routes = p.route.logits != nullptr;
  if (routes && p.route.sel != p.sel) return cudaErrorInvalidValue;
  // The one-block grouping routes the batch itself where it is small enough for the block's warps
  // (kMoeRouteGroupMaxTokens) unless DEEPINFER_MOE_ROUTE_GROUP=0 (an A/B and test switch: the
  // routing kernel first; same bits).
  static const bool route_group = env_switch("DEEPINFER_MOE_ROUTE_GROUP");
  const bool fused_route = routes && route_group && moe_group_one_block(p) && p.route.T <= kMoeRouteGroupMaxTokens;
  if (routes && !fused_route) {
    if (const cudaError_t e = launch_moe_route(p.route, s); e != cudaSuccess) return e;
  }
  if (moe_group_one_block(p)) {
    MoeGroupQuant q;
    if (p.xq != nullptr) {
      if (!moe_group_quantises(p)) return cudaErrorInvalidValue;  // the caller asks first
      q = {p.x, p.x_type == ActType::kF32, p.x_rows, p.x_width, static_cast<__nv_bfloat16*>(p.xq)};
    }
    launch_pdl(moe_group_small_kernel, 1, 1024, 0, s, p.sel, p.n_pairs, p.E, p.offsets, p.active, p.perm, q,
               fused_route ? p.route : MoeRouteParams{});
    return cudaGetLastError();
  }
  if (p.xq != nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = cudaMemsetAsync(p.counts, 0, sizeof(int32_t) * p.E, s); e != cudaSuccess) return e;
  launch_pdl(moe_count_kernel, grid_for(p.n_pairs), 256, 0, s, p.sel, p.n_pairs, p.counts);
  launch_pdl(moe_offsets_kernel, 1, 1024, 0, s, p.counts, p.E, p.offsets, p.cursor, p.active);
  launch_pdl(moe_scatter_kernel, grid_for(p.n_pairs), 256, 0, s, p.sel, p.n_pairs, p.cursor,
             p.perm);
  return cudaGetLastError();
}

cudaError_t launch_moe_swiglu_weight(const MoeSwigluParams& p, cudaStream_t s) {
  launch_pdl(moe_swiglu_weight_kernel, grid_for(p.n_pairs * p.F), 256, 0, s, p.g, p.u, p.weights,
             p.n_pairs, p.F, p.limit, p.bf16_round, p.h);
  return cudaGetLastError();
}

bool moe_swiglu_quant_fits(const MoeSwigluParams& p) {
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return p.F % 128 == 0 && aligned16(p.g) && aligned16(p.u);
}

cudaError_t launch_moe_swiglu_quant(const MoeSwigluParams& p, void* hq, cudaStream_t s) {
  if (!moe_swiglu_quant_fits(p) || reinterpret_cast<uintptr_t>(hq) % 8 != 0) return cudaErrorInvalidValue;
  const int64_t blocks = p.n_pairs * p.F / 128;
  launch_pdl(moe_swiglu_quant_kernel, static_cast<unsigned>((blocks + 7) / 8), 256, 0, s, p.g, p.u, p.weights,
             blocks, p.F, p.limit, p.bf16_round, static_cast<__nv_bfloat16*>(hq));
  return cudaGetLastError();
}

cudaError_t launch_moe_combine(const MoeCombineParams& p, cudaStream_t s) {
  // Columns per block (moe_combine_kernel): DEEPINFER_MOE_COMBINE_CHUNK (256 or 1024) below 64
  // tokens, default 256; 1,024 above. Numerically neutral.
  static const int decode_chunk = env_int("DEEPINFER_MOE_COMBINE_CHUNK", 256, {256, 1024});
  const int64_t chunk = p.T < 64 ? decode_chunk : 1024;
  const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>((p.D + chunk - 1) / chunk));
  with_act2(p.addend_type, p.out_type, [&](auto ta, auto to) {
    using Ta = decltype(ta);
    using To = decltype(to);
    launch_pdl(moe_combine_kernel<Ta, To>, grid, 256, 0, s, p.y, p.sel, p.k, p.D, chunk, p.bf16_round,
               static_cast<const Ta*>(p.addend), static_cast<To*>(p.out));
  });
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
