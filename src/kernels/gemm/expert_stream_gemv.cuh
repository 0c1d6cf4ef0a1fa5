// Streamed FP4 expert GEMM for decode (MoE expert launches of at most 8 tokens): a persistent
// kernel, one CTA per SM (geometry: expert_stream_plan.h).
//   * An item is 16 output columns (kStreamCols: the transposed mma's m16) of one weight set of
//     one active expert, over all of K: 16 weight rows of K / 2 bytes and their 16 scale rows of
//     K / 32 codes, contiguous in the checkpoint layout. Items are numbered (slot, set, tile) and
//     handed out in stride order (CTA b: b, b + grid, ...) or, with the counter switch, through a
//     global counter (GemmParams::tile_counters[0]; the last CTA to finish re-arms it and the
//     finish count [1]), so that a CTA which starts late takes fewer.
//   * The producer warp copies an item into a ring stage with one bulk copy per row (cp.async.bulk:
//     the rows land padded, kStreamRowPad, so a lane quad's rows g and g + 8 fall in different bank
//     groups) and completes them on the stage's `full` barrier; it refills a stage once the team
//     that took it has read it (`empty`, P arrivals).
//   * Consumer warps work in teams of P (gemm_n_subranges(K)), one warp per canonical K sub-range:
//     the lean kernel's window loop (lean_gemv.cuh) on the same mma.m16n8k16 steps in the same
//     order — weights as the A operand decoded from the stage, the expert's rows as B (a lane's
//     share of its row in a ring of SLOTS windows' registers, the first ones read from global
//     memory as soon as the producer announces the item, so their L2 round trip overlaps the item
//     before's fold and the weights' copy) — then the canonical fold
//     ((0 + s_0) + s_1) + ... of the team's sub-range sums in shared memory. The same bits as
//     every other GEMM kernel for these rows.
// Why: the lean kernel's per-lane register ring keeps ~48 KB per SM in flight and every one of
// its CTAs waits for the routing before its first load; at batch 1 its FP4 gate/up launch read 50
// MB at ~1.6 TB/s. Here a stage of ~36 KB is one instruction per row, several stages are always in
// flight, and the routing wait and expert lookups are paid once per SM.
#pragma once

#include "kernels/common/bulk_copy.cuh"
#include "kernels/gemm/expert_stream_plan.h"
#include "kernels/gemm/gemm_common.cuh"

namespace deepinfer::kernels {

// An item as the producer hands it to a team: (slot, set, tile) packed, or -1 when no more come.
__device__ __forceinline__ int32_t stream_item_pack(int slot, int set, int tile) {
  return (slot << 24) | (set << 23) | tile;
}

__device__ __forceinline__ void stream_team_sync(int team, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(team + 1), "r"(threads) : "memory");
}

// The producer's announcement of item `packed` as this CTA's j-th (the tag written last), made
// when it starts the item's copy.
__device__ __forceinline__ void stream_announce(int32_t* item, int32_t* tag, int32_t packed, int j) {
  *reinterpret_cast<volatile int32_t*>(item) = packed;
  __threadfence_block();
  *reinterpret_cast<volatile int32_t*>(tag) = j;
}
// A team's wait for the announcement of its j-th item, and the item. The producer announces in
// stream order and needs only stages that every team released before it waits here, so this ends.
__device__ __forceinline__ int32_t stream_announced(const int32_t* item, const int32_t* tag, int j) {
  while (*reinterpret_cast<const volatile int32_t*>(tag) != j) {
  }
  __threadfence_block();
  return *reinterpret_cast<const volatile int32_t*>(item);
}

// Registers: a CTA's warps are spread over the SM's four sub-partitions, each with a quarter of
// the register file (16K), so 17 warps put 5 on one of them and get at most 96 registers per
// thread (16384 / (5 x 32) rounded down to the allocation step of 8) — not 65536 / 544 = 120:
// session 36's __maxnreg__(120) form did not launch ("too many resources requested"). The launch
// bounds make ptxas keep to 96: a 3-window activation ring fits (95, no spills), 4 would spill.

// The kernel's static shared memory, which ExpertStreamKnobs::static_smem must cover.
inline constexpr size_t kStreamStaticSmem =
    sizeof(float) * 2 * kStreamConsumerWarps * kStreamMaxRows * kStreamCols +
    kStreamMaxSlots * (2 * (2 * sizeof(void*) + 2 * sizeof(int64_t)) + (kStreamMaxRows + 1) * sizeof(int32_t));
static_assert(kStreamStaticSmem <= ExpertStreamKnobs{}.static_smem);

// SLOTS: 128-element windows of activations a lane holds (2 or 3; DEEPINFER_GEMV_EXPERT_STREAM_SLOTS).
template <int SLOTS>
__global__ void __launch_bounds__((kStreamConsumerWarps + 1) * 32, 1)
    expert_stream_kernel(GemmParams p, ExpertStreamPlan plan) {
  static_assert(SLOTS >= 2 && SLOTS <= kStreamMaxWindows);
  constexpr WeightFmt F = WeightFmt::kFp4Block;
  constexpr int L = run_elems(F), W = 4 * L;  // elements per lane run (32) and per window (128)
  constexpr int kWindowBytes = W / 2;         // of one weight row
  extern __shared__ __align__(128) uint8_t smem[];
  const int S = plan.stages;
  uint8_t* ring = smem;  // [S][16 weight rows of w_stride bytes, then 16 scale rows of s_stride]
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + static_cast<size_t>(S) * plan.stage_bytes);
  uint64_t* empty = full + S;
  // The producer announces stage s's item (packed) and then its index j in this CTA's stream (a
  // tag) when it starts the copy, so the team that takes it requests its activation rows while
  // it still folds the item before and the weights are in flight.
  int32_t* stage_item = reinterpret_cast<int32_t*>(empty + S);
  int32_t* stage_tag = stage_item + S;
  // Each consumer warp's sub-range sums of an item, double-buffered by the team's item parity:
  // [2][warp][row][column].
  __shared__ float red[2][kStreamConsumerWarps][kStreamMaxRows][kStreamCols];
  // The active experts, resolved once per CTA: weight and scale rows of set 0 and 1, rows.
  __shared__ const uint8_t* s_w[kStreamMaxSlots][2];
  __shared__ const uint8_t* s_scale[kStreamMaxSlots][2];
  __shared__ int64_t s_row_bytes[kStreamMaxSlots][2], s_scale_cols[kStreamMaxSlots][2];
  __shared__ int32_t s_crow[kStreamMaxSlots][kStreamMaxRows];  // output rows (pairs)
  __shared__ int32_t s_rows[kStreamMaxSlots];

  griddep_launch_dependents();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], plan.P);
      stage_tag[s] = -1;
    }
    mbar_init_fence();
  }
  griddep_wait();  // the routing's tables and the activations come from the kernels before
  const int n_active = p.active[p.n_experts];
  for (int i = threadIdx.x; i < n_active; i += blockDim.x) {
    const int e = p.active[i];
    const int32_t rb = p.offsets[e];
    const int rows = min(static_cast<int>(p.offsets[e + 1] - rb), kStreamMaxRows);
    for (int set = 0; set < p.n_sets; ++set) {
      const WeightDesc& d = p.experts[set * p.n_experts + e];
      s_w[i][set] = d.w;
      s_scale[i][set] = d.scale;
      s_row_bytes[i][set] = d.row_bytes;
      s_scale_cols[i][set] = d.scale_cols;
    }
    for (int r = 0; r < kStreamMaxRows; ++r) s_crow[i][r] = r < rows ? p.perm[rb + r] : -1;
    s_rows[i] = rows;
  }
  __syncthreads();
  const int tpe = plan.tiles0 + plan.tiles1;  // items per active expert
  const int n_items = n_active * tpe;
  const int64_t K = p.K;

  if (warp == plan.consumer_warps) {  // the producer
    int32_t* counter = p.tile_counters;
    // The next item: the counter's (or, with static items, this CTA's next in stride order).
    auto grab = [&](int issued) {
      if (plan.static_items) return static_cast<int>(blockIdx.x) + (issued + 1) * static_cast<int>(gridDim.x);
      return lane == 0 ? atomicAdd(counter, 1) : 0;
    };
    int item = plan.static_items ? static_cast<int>(blockIdx.x) : __shfl_sync(0xffffffffu, grab(-1), 0);
    int s = 0, phase = 0, j = 0;  // stage, its occupancy's parity, items issued
    const uint32_t tx = static_cast<uint32_t>(expert_stream_copy_bytes(K));
    while (item < n_items) {
      const int next = grab(j);  // in flight during the copies
      if (j >= S) mbar_wait(&empty[s], phase ^ 1);              // the team before is done with it
      const int slot = item / tpe, rem = item - slot * tpe;
      const int set = rem >= plan.tiles0 ? 1 : 0, tile = rem - set * plan.tiles0;
      if (lane == 0) {
        stream_announce(stage_item + s, stage_tag + s, stream_item_pack(slot, set, tile), j);
        mbar_arrive_expect_tx(&full[s], tx);
      }
      __syncwarp();
      uint8_t* st = ring + static_cast<size_t>(s) * plan.stage_bytes;
      const int64_t row = static_cast<int64_t>(tile) * kStreamCols + (lane & 15);
      if (lane < kStreamCols) {
        bulk_copy_g2s(st + lane * plan.w_stride, s_w[slot][set] + row * s_row_bytes[slot][set],
                      static_cast<uint32_t>(K / 2), &full[s]);
      } else {
        bulk_copy_g2s(st + kStreamCols * plan.w_stride + (lane - kStreamCols) * plan.s_stride,
                      s_scale[slot][set] + row * s_scale_cols[slot][set], static_cast<uint32_t>(K / 32), &full[s]);
      }
      item = __shfl_sync(0xffffffffu, next, 0);
      ++j;
      if (++s == S) s = 0, phase ^= 1;
    }
    // One end mark per team (each team takes every teams-th item, so each meets one).
    for (int t = 0; t < plan.teams; ++t) {
      if (j >= S) mbar_wait(&empty[s], phase ^ 1);
      if (lane == 0) {
        stream_announce(stage_item + s, stage_tag + s, -1, j);
        mbar_arrive(&full[s]);
      }
      __syncwarp();
      ++j;
      if (++s == S) s = 0, phase ^= 1;
    }
    // Every CTA's last grab is done once all have counted themselves here: the last re-arms.
    if (!plan.static_items && lane == 0 && atomicAdd(counter + 1, 1) == static_cast<int>(gridDim.x) - 1) {
      counter[0] = 0;
      counter[1] = 0;
    }
    return;
  }

  // Consumers: team `team` takes items team, team + teams, ... of this CTA's stream.
  const int P = plan.P, team = warp / P, sub = warp - team * P;
  const int g = lane >> 2, c = lane & 3;
  const int k0 = sub * plan.R;
  const int nw = static_cast<int>(min64(plan.R, K - k0)) / W;  // windows of the sub-range (<= 4)
  const int k_byte = (k0 + c * L) / 2, k_code = (k0 + c * L) / 32;
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.A);
  // This lane's activations (row g of the item's expert, its run of each window of the
  // sub-range) in a ring of SLOTS windows: windows 0 .. SLOTS - 1 requested at the item's
  // announcement, window w + SLOTS - 1 into the slot window w - 1 freed.
  uint4 x[SLOTS][4];
  const __nv_bfloat16* a_lane = A;
  bool has_row = false;  // row g of the B operand holds data (else zeros: its outputs are dropped)
  auto load_window = [&](int w) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      x[w % SLOTS][q] = has_row ? __ldg(reinterpret_cast<const uint4*>(a_lane + w * W + 8 * q)) : make_uint4(0, 0, 0, 0);
    }
  };
  auto load_rows = [&](int32_t packed) {
    if (packed < 0) return;
    const int slot = packed >> 24;
    has_row = g < s_rows[slot];
    if (has_row) a_lane = A + static_cast<int64_t>(s_crow[slot][g] / p.a_div) * p.lda + k0 + c * L;
#pragma unroll
    for (int w = 0; w < SLOTS; ++w) {
      if (w < nw) load_window(w);
    }
  };
  int j = team, s = team, phase = 0;  // this team's item: its index in the CTA's stream, its stage
  int32_t packed = stream_announced(stage_item + s, stage_tag + s, j);
  load_rows(packed);
  for (int it = 0; packed >= 0; ++it) {
    const int slot = packed >> 24, set = (packed >> 23) & 1, tile = packed & ((1 << 23) - 1);
    const int rows = s_rows[slot];
    mbar_wait(&full[s], phase);
    const uint8_t* st = ring + static_cast<size_t>(s) * plan.stage_bytes;
    const uint8_t* w_lo = st + g * plan.w_stride + k_byte;  // rows g and g + 8 of the item
    const uint8_t* w_hi = w_lo + 8 * plan.w_stride;
    const uint8_t* c_lo = st + kStreamCols * plan.w_stride + g * plan.s_stride + k_code;
    const uint8_t* c_hi = c_lo + 8 * plan.s_stride;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < kStreamMaxWindows; ++w) {
      if (w >= nw) break;  // warp-uniform
      if (w >= 1 && w + SLOTS - 1 < nw) load_window(w + SLOTS - 1);
      // Window w's weights and codes, read from the stage where they are used (shared-memory
      // latency, hidden by the other warps).
      const uint4 cur[2] = {*reinterpret_cast<const uint4*>(w_lo + w * kWindowBytes),
                            *reinterpret_cast<const uint4*>(w_hi + w * kWindowBytes)};
      const uint8_t c0 = c_lo[w * (W / 32)], c1 = c_hi[w * (W / 32)];
      if (w + 1 == nw) {  // every read of the stage is issued: the producer may refill it
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
      }
      // One window's mma steps with the weights decoded by `decode(t, q, b0, b1)` (row tile t):
      // one 16-byte activation read serves two steps, as in lean_gemv_kernel.
      auto window = [&](auto decode) {
#pragma unroll
        for (int q = 0; q < L / 4; q += 2) {
          transposed_mma_pair(acc, decode, q, x[w % SLOTS][q / 2]);
        }
      };
      // Warp-uniform (the lanes of an mma.sync run the same instruction).
      if (__all_sync(0xffffffffu, quad_scale_exact<F>(c0) && quad_scale_exact<F>(c1))) {
        const uint32_t s0 = quad_scale<F>(c0), s1 = quad_scale<F>(c1);
        window([&](int t, int q, uint32_t& b0, uint32_t& b1) { decode_quad_scaled<F>(cur[t], t ? s1 : s0, q, b0, b1); });
      } else {
        window([&](int t, int q, uint32_t& b0, uint32_t& b1) { decode_quad<F>(cur[t], t ? c1 : c0, q, b0, b1); });
      }
    }
    // acc element e: row 2c + (e & 1), column (e >= 2 ? 8 : 0) + g of the item.
    float (*my_red)[kStreamCols] = red[it & 1][warp];
#pragma unroll
    for (int e = 0; e < 4; ++e) my_red[2 * c + (e & 1)][(e >= 2 ? 8 : 0) + g] = acc[e];
    // The team's next item, its rows requested before the fold (red is double-buffered by it).
    j += plan.teams;
    s += plan.teams;
    if (s >= S) s -= S, phase ^= 1;
    packed = stream_announced(stage_item + s, stage_tag + s, j);
    load_rows(packed);
    stream_team_sync(team, P * 32);
    // The fold: each output is ((0 + s_0) + s_1) + ... over the team's sub-range warps.
    void* const C = set == 0 ? p.C : p.C1;
    const int64_t ldc = set == 0 ? p.ldc : p.ldc1;
    for (int i = sub * 32 + lane; i < rows * kStreamCols; i += P * 32) {
      const int r = i / kStreamCols, col = i % kStreamCols;
      float total = 0.0f;
      for (int q = 0; q < P; ++q) total += red[it & 1][team * P + q][r][col];
      store_out(C, p.c_bf16, s_crow[slot][r] * ldc + static_cast<int64_t>(tile) * kStreamCols + col, total);
    }
  }
}

}  // namespace deepinfer::kernels
