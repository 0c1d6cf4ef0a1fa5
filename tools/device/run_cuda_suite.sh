#!/usr/bin/env bash
# The CUDA test suite on the device machine, one command (after tools/device/pack.sh, with
# .carry/ carried): every op against the CPU reference, the bitwise batch-invariance checks, the
# whole model against the golden fixtures and the CPU engine. The GEMM/MoE tests run again
# under other settings: with several K sub-ranges per CTA (DEEPINFER_GEMV_MAX_SPC=8, the small-M kernel's
# non-default path), with the lean decode kernel off (DEEPINFER_GEMV_LEAN=0 and
# DEEPINFER_GEMV_LEAN_EXPERTS=0: its launches then take the general small-M kernel), with it taking
# every small-M expert launch (DEEPINFER_GEMV_LEAN_EXPERTS=512: rows per expert in chunks of 8),
# with one, four and six column groups per lean warp (DEEPINFER_GEMV_LEAN_TILES=1 / 4 / 6, six also in
# the compact 96-register form, DEEPINFER_GEMV_LEAN_WIDE_COMPACT=1; default
# auto), with the mma.sync large-M kernel instead of the wgmma one (DEEPINFER_GEMM_KERNEL=mma), with
# every large-M launch on the packed path (DEEPINFER_GEMM_PACKED_ROWS=1, _MIN_TILES=1; the model
# tests too), the MoE tests without the packed expert kernels
# (DEEPINFER_GEMM_PACKED_EXPERTS=0), on the producer-warpgroup expert kernel instead of the swapped
# one (DEEPINFER_GEMM_EXPERT_SWAP=0, with two and with one producer warpgroup), with the small-M
# expert launches on the swapped kernel's 32-pair tiles (DEEPINFER_GEMM_EXPERT_SWAP_SMALL=1; the MoE and model
# tests again with those tiles at one CTA per SM, DEEPINFER_GEMM_EXPERT_SWAP_CTAS=1, and the MoE tests with whole
# token tiles, DEEPINFER_GEMM_EXPERT_TRIM=0) and with SwiGLU and the
# down projection's quantisation as two launches (DEEPINFER_MOE_SWIGLU_QUANT=0) and with the
# small-M expert activations quantised in every CTA's staging instead of once (DEEPINFER_MOE_QUANT_ONCE=0), with
# the untransposed small-M tiles (DEEPINFER_GEMV_TRANSPOSED=0), with sparse expert launches in
# 32-row chunks on the general small-M kernel (DEEPINFER_GEMV_EXPERT_CHUNK=32 DEEPINFER_GEMV_LEAN_EXPERTS=0),
# with split-K launches folded by their tiles' last CTAs instead of the fold kernel
# (DEEPINFER_GEMM_SPLIT_FOLD=tile DEEPINFER_GEMV_SPLIT_FOLD=tile)
# and with the activation quantisation folded into the small-M kernel's staging for up to 32 rows
# instead of 4 (DEEPINFER_GEMV_FUSE_QUANT=32: the 5- and 20-row batch-invariance checks then
# compare the fold with the separate kernel too) and with 2 and 4 column tiles per CTA
# (DEEPINFER_GEMV_TILES_PER_CTA); the mHC tests with the 1-, 2- and 4-token prefill mixing blocks
# instead of the prefill kernel, and that kernel with 64-token blocks (DEEPINFER_HC_MIX_TOKENS=1, 2,
# 4, 64; default 32); the MoE tests once more with the
# general (multi-kernel) pair grouping (DEEPINFER_MOE_GROUP_SMALL=0); the op and model tests with
# the session-16 launch choices off (DEEPINFER_HC_SINKHORN_CTA=0: Sinkhorn in warp 0 of the collapse's block;
# DEEPINFER_MOE_COMBINE_CHUNK=1024; DEEPINFER_GEMM_PREQUANT=0: wo_b quantises its own input);
# then both test binaries run
# again with every kernel launched plainly instead of as a programmatic dependent
# (DEEPINFER_CUDA_PDL=0), and the indexer tests with every top-k row on the strided path
# (DEEPINFER_TOPK_SMEM=0), the attention and model tests with the wgmma attention kernel taking every
# launch of 2+ tokens (DEEPINFER_ATTN_WGMMA_MIN_TOKENS=2), with two and with four warpgroups per CTA
# (DEEPINFER_ATTN_WGMMA_WARPGROUPS=4), and on the cluster attention kernel at two CTAs per token and 16
# heads for every launch below that threshold (DEEPINFER_ATTN_CLUSTER=2) and never (=0), the mHC
# tests with the decode-sized finalize on clusters of two and four CTAs (DEEPINFER_HC_CLUSTER=2, 4)
# and the model tests on the one-CTA finalize (=0; the default is the automatic size), the
# step-graph model tests with one copy node per upload (DEEPINFER_CUDA_ONE_UPLOAD=0), the engine
# and step-graph tests with the uploads and copies back on the main stream
# (DEEPINFER_CUDA_COPY_STREAMS=0), and the
# model tests with the shared expert joined before the routed experts' grouping instead of just
# before their combine (DEEPINFER_MOE_SHARED_LATE_JOIN=0) and the routing in a kernel of its own
# (DEEPINFER_MOE_ROUTE_GROUP=0), so every kernel and launch mode stays verified (runs under a kernel
# setting leave out the tests that setting cannot change: MODEL_RUN, GEMM_RUN, MOE_RUN below).
# SUITE_JOBS=N runs N of these at once on the one GPU (default 1: one after another), each with
# nproc / N OpenMP threads unless OMP_NUM_THREADS is set. Most of a
# run's time is the host's (the CPU reference, synthetic weights), and the device machine has 16
# cores; each run's output is printed whole and in the list's order as soon as it and every run
# before it are done, so a time limit still leaves the finished runs' results.
# SUITE_RUNS=FROM-TO runs only those runs (0-based, inclusive): a suite split over device calls.
# Exit status: non-zero if any run failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
bash tools/device/unpack.sh  # .carry/bins.tar.xz -> .carry/bin
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEEPINFER_SOURCE_DIR="$PWD"
export DEEPINFER_TEST_MODELS_DIR="${DEEPINFER_TEST_MODELS_DIR:-/tmp/deepinfer-test-models}"
export DEEPINFER_CACHE_DIR="${DEEPINFER_CACHE_DIR:-/tmp/deepinfer-cache}"
# The engine tests open the tokenizer (grammar rows): carried xz-compressed (tools/device/pack.sh's
# README line), so decompress it when only the .xz is there.
if [ ! -f .carry/tokenizer.json ] && [ -f .carry/tokenizer.json.xz ]; then
  python3 -c "import lzma,shutil;shutil.copyfileobj(lzma.open('.carry/tokenizer.json.xz'),open('.carry/tokenizer.json','wb'))"
fi
[ -f .carry/tokenizer.json ] && export DEEPINFER_TOKENIZER="$PWD/.carry/tokenizer.json"
# What the runs under other kernel settings take: those settings change kernels, not what the
# engine does above them, so the engine tests (~16 s of host work per run) run in the default run,
# under DEEPINFER_ATTN_CLUSTER=2, the copy-stream, late-join and PDL runs only, and the check that
# the routing in the grouping launch is the routing kernel's (~2 s) under the grouping settings
# only — not again under each GEMM setting (session 41: 527 s of tests in ~1,100 s of calls). The
# V4.1 model tests (cuda_model_v41_test.cc) run in the default run only, likewise.
MODEL_RUN='-CudaEngineTest.*:*V41*'
GEMM_RUN='*Linear*:*Gemm*:*Moe*:-*MoeRouteInTheGrouping*'
MOE_RUN='*Moe*:-*MoeRouteInTheGrouping*'
JOBS=()
job() { JOBS+=("$(printf '%q ' "$@")"); }  # queued; run by the loop at the end
job .carry/bin/cuda_ops_test
job DEEPINFER_GEMV_MAX_SPC=8 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMV_LEAN=0 DEEPINFER_GEMV_LEAN_EXPERTS=0 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMV_LEAN_TILES=1 DEEPINFER_GEMV_LEAN_EXPERTS=512 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMV_LEAN_TILES=4 DEEPINFER_GEMV_LEAN_EXPERTS=512 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMV_LEAN_TILES=6 DEEPINFER_GEMV_LEAN_EXPERTS=512 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_GEMV_LEAN_TILES=6 DEEPINFER_GEMV_LEAN_WIDE_COMPACT=1 DEEPINFER_GEMV_LEAN_EXPERTS=512 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_GEMM_KERNEL=mma .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMM_PACKED_ROWS=1 DEEPINFER_GEMM_PACKED_MIN_TILES=1 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMM_PACKED_ROWS=1 DEEPINFER_GEMM_PACKED_MIN_TILES=1 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN"
job DEEPINFER_GEMM_PACKED_EXPERTS=0 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_MOE_SWIGLU_QUANT=0 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_MOE_QUANT_ONCE=0 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_GEMM_EXPERT_SWAP=0 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_GEMM_EXPERT_SWAP_SMALL=1 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_GEMM_EXPERT_SWAP_SMALL=1 DEEPINFER_GEMM_EXPERT_SWAP_CTAS=1 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_GEMM_EXPERT_SWAP_SMALL=1 DEEPINFER_GEMM_EXPERT_SWAP_CTAS=1 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN"
job DEEPINFER_GEMM_EXPERT_SWAP_SMALL=1 DEEPINFER_GEMM_EXPERT_TRIM=0 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_GEMM_EXPERT_SWAP=0 DEEPINFER_GEMM_EXPERT_PRODUCERS=1 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_GEMV_TRANSPOSED=0 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_TOPK_SMEM=0 .carry/bin/cuda_ops_test --gtest_filter='*Indexer*'
# The attention tests and the model tests with every launch of 2+ tokens on the wgmma attention kernel
# (default: 128+): the batch-invariance test then compares its bits with the mma.sync kernel's.
job DEEPINFER_ATTN_WGMMA_MIN_TOKENS=2 .carry/bin/cuda_ops_test --gtest_filter='*SparseAttention*'
job DEEPINFER_ATTN_WGMMA_MIN_TOKENS=2 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN"
job DEEPINFER_ATTN_WGMMA_MIN_TOKENS=2 DEEPINFER_ATTN_WGMMA_WARPGROUPS=4 .carry/bin/cuda_ops_test --gtest_filter='*SparseAttention*'
job DEEPINFER_ATTN_WGMMA_MIN_TOKENS=2 DEEPINFER_ATTN_WGMMA_WARPGROUPS=4 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN"
# The attention and model tests with every tensor-core launch below the wgmma threshold on the
# cluster attention kernel at two CTAs (the default takes it for decode-sized launches only, at the
# largest size whose clusters run at once), and with it off.
job DEEPINFER_ATTN_CLUSTER=2 .carry/bin/cuda_ops_test --gtest_filter='*SparseAttention*'
job DEEPINFER_ATTN_CLUSTER=2 .carry/bin/cuda_model_test
job DEEPINFER_ATTN_CLUSTER=0 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN"
# The mHC tests with the decode-sized finalize on clusters of two and of four CTAs per token (the
# default is the automatic size: eight at batch 1), and the model tests on the one-CTA finalize.
job DEEPINFER_HC_CLUSTER=2 .carry/bin/cuda_ops_test --gtest_filter='*HyperConnection*:*HcPre*:*HcPost*:*Hc*'
job DEEPINFER_HC_CLUSTER=4 .carry/bin/cuda_ops_test --gtest_filter='*HyperConnection*:*HcPre*:*HcPost*:*Hc*'
job DEEPINFER_HC_CLUSTER=0 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN"
job DEEPINFER_GEMV_EXPERT_CHUNK=32 DEEPINFER_GEMV_LEAN_EXPERTS=0 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMM_SPLIT_FOLD=tile DEEPINFER_GEMV_SPLIT_FOLD=tile .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMV_FUSE_QUANT=32 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMV_TILES_PER_CTA=2 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_GEMV_TILES_PER_CTA=4 .carry/bin/cuda_ops_test --gtest_filter="$GEMM_RUN"
job DEEPINFER_HC_MIX_TOKENS=1 .carry/bin/cuda_ops_test --gtest_filter='*HyperConnection*:*HcPre*:*HcPost*'
job DEEPINFER_HC_MIX_TOKENS=2 .carry/bin/cuda_ops_test --gtest_filter='*HyperConnection*:*HcPre*:*HcPost*'
job DEEPINFER_HC_MIX_TOKENS=4 .carry/bin/cuda_ops_test --gtest_filter='*HyperConnection*:*HcPre*:*HcPost*'
job DEEPINFER_HC_MIX_TOKENS=64 .carry/bin/cuda_ops_test --gtest_filter='*HyperConnection*:*HcPre*:*HcPost*'
job DEEPINFER_MOE_GROUP_SMALL=0 .carry/bin/cuda_ops_test --gtest_filter='*Moe*'
job DEEPINFER_HC_SINKHORN_CTA=0 DEEPINFER_MOE_COMBINE_CHUNK=1024 DEEPINFER_GEMM_PREQUANT=0 .carry/bin/cuda_ops_test --gtest_filter='*Linear*:*Gemm*:*Moe*:*HyperConnection*:*HcPre*:*HcPost*:*Quant*'
job DEEPINFER_HC_SINKHORN_CTA=0 DEEPINFER_MOE_COMBINE_CHUNK=1024 DEEPINFER_GEMM_PREQUANT=0 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN"
job .carry/bin/cuda_model_test
# The shared expert's side region joined before the routed experts' grouping (the default joins it
# just before their combine), and the routing in a kernel of its own before the grouping (the
# default routes decode-sized batches in the grouping launch).
job DEEPINFER_MOE_SHARED_LATE_JOIN=0 DEEPINFER_MOE_ROUTE_GROUP=0 .carry/bin/cuda_model_test
# The step graphs with one copy node per upload instead of one for all of a step's uploads.
job DEEPINFER_CUDA_ONE_UPLOAD=0 .carry/bin/cuda_model_test --gtest_filter='*Graph*:*SideStreams*'
job DEEPINFER_CUDA_COPY_STREAMS=0 .carry/bin/cuda_model_test --gtest_filter='*Engine*:*Graph*'
job DEEPINFER_CUDA_PDL=0 .carry/bin/cuda_ops_test
# The FP8-operand decode kernel (experimental, off by default: fp8_gemv.cuh) on the GEMM tests that
# stay within batches of <= 8 rows or compare with tolerances (its own test runs only here). Not
# LinearMatchesCpuForEveryFormatAndShape: its F32-output bound (1e-5 of the CPU reference) is the
# BF16 order's; the FP8 order's tensor-core accumulation is ~1e-4 of sum |products| off the exact
# sum by design (wgmma_fp8_probe), checked against exact sums by its own test.
job DEEPINFER_GEMM_FP8_ORDER=1 .carry/bin/cuda_ops_test --gtest_filter='*Linear*:*Gemm*:*Fp8Order*:*Quant*:-*BatchInvariant*:*LinearMatchesCpuForEveryFormatAndShape*'
# The other tile counts (one tile at 8 rows and at 9-32: DEEPINFER_GEMM_FP8_TILES / _WIDE_TILES)
# with the decode kernel up to 32 rows (DEEPINFER_GEMM_FP8_DECODE_ROWS, default 8).
job DEEPINFER_GEMM_FP8_ORDER=1 DEEPINFER_GEMM_FP8_TILES=1 DEEPINFER_GEMM_FP8_WIDE_TILES=1 DEEPINFER_GEMM_FP8_DECODE_ROWS=32 .carry/bin/cuda_ops_test --gtest_filter='*Fp8Order*:*LinearPair*:*Prequant*'
# With the large-M kernel of the same order (fp8_gemm.cuh) the FP8 projections are one order at
# every M: the GEMM batch-invariance test and the model tests under the FP8 order, the large-M
# kernel's own test on two consumer warpgroups too (DEEPINFER_GEMM_FP8_CONSUMERS=2; default 3).
job DEEPINFER_GEMM_FP8_ORDER=1 .carry/bin/cuda_ops_test --gtest_filter='*BatchInvariant*:*Fp8OrderLargeM*'
job DEEPINFER_GEMM_FP8_ORDER=1 DEEPINFER_GEMM_FP8_CONSUMERS=2 .carry/bin/cuda_ops_test --gtest_filter='*Fp8OrderLargeM*:*DequantGemmRowsAreBitwiseBatchInvariant*'
# The large-M kernel from 17 rows (DEEPINFER_GEMM_FP8_DECODE_ROWS=16; the default 8 hands it 9-16
# too): the decode test's 32-row launches against their rows alone cross the two kernels (at the
# default, its 13- and 32-row ones).
job DEEPINFER_GEMM_FP8_ORDER=1 DEEPINFER_GEMM_FP8_DECODE_ROWS=16 .carry/bin/cuda_ops_test --gtest_filter='*Fp8Order*:*BatchInvariant*'
# Not MatchesTheCpuReference/Official there: its layer-0 bound (a quarter of official vs plain
# numerics) assumes GEMM sums within ~1e-6 of the CPU's; the FP8 order's are 1e-4 to 4e-4 off
# (LinearMatchesCpuForEveryFormatAndShape above), which flips more of the next quantised inputs'
# E4M3 codes — measured at 830225f on the H100: 0.023 after layer 0 against the default order's
# 0.0015 (bound 0.0082), later layers at 1.01-1.1 x official vs plain (docs/cuda.md "Session 46").
job DEEPINFER_GEMM_FP8_ORDER=1 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN:*MatchesTheCpuReference/Official*"
# The large-M kernel's split form (DEEPINFER_GEMM_FP8_SPLIT=1: a cluster per tile, one K sub-range
# per CTA, for launches of fewer tiles than SMs): its 33-200-row launches against their rows alone
# and the model tests (as above) on it.
job DEEPINFER_GEMM_FP8_ORDER=1 DEEPINFER_GEMM_FP8_SPLIT=1 .carry/bin/cuda_ops_test --gtest_filter='*Fp8Order*:*BatchInvariant*'
job DEEPINFER_GEMM_FP8_ORDER=1 DEEPINFER_GEMM_FP8_SPLIT=1 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN:*MatchesTheCpuReference/Official*"
# The large-M kernel's 32- and 64-token tiles are its default for launches of up to 64 rows
# (DEEPINFER_GEMM_FP8_SMALL_TILES; the runs above take them: the 20- and 33-row launches against
# their rows alone, split, the model tests); 128-token tiles for every launch, with the large-M
# kernel from 9 rows and from 17, against the rows alone and the model tests (as above).
job DEEPINFER_GEMM_FP8_ORDER=1 DEEPINFER_GEMM_FP8_SMALL_TILES=0 .carry/bin/cuda_ops_test --gtest_filter='*Fp8Order*:*BatchInvariant*'
job DEEPINFER_GEMM_FP8_ORDER=1 DEEPINFER_GEMM_FP8_SMALL_TILES=0 DEEPINFER_GEMM_FP8_DECODE_ROWS=16 .carry/bin/cuda_ops_test --gtest_filter='*Fp8OrderLargeM*:*DequantGemmRowsAreBitwiseBatchInvariant*'
job DEEPINFER_GEMM_FP8_ORDER=1 DEEPINFER_GEMM_FP8_SMALL_TILES=0 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN:*MatchesTheCpuReference/Official*"
# The FP4 experts in the FP8 order (DEEPINFER_GEMM_FP8_EXPERTS=1: fold layout, fp8_expert_gemm.cuh,
# every FP4 expert launch): the layout kernel, the MoE tests (CPU tolerance; the lean form of
# launches up to 512 pairs, fp8_expert_gemv.cuh, against the 128-pair tiles bitwise, V4 widths)
# and the model tests minus the official-numerics bound (as above).
job DEEPINFER_GEMM_FP8_EXPERTS=1 .carry/bin/cuda_ops_test --gtest_filter='*Fp4Codes*:*Moe*:*DecodeExperts*'
job DEEPINFER_GEMM_FP8_EXPERTS=1 .carry/bin/cuda_model_test --gtest_filter="$MODEL_RUN:*MatchesTheCpuReference/Official*"
# Without the lean form (DEEPINFER_GEMM_FP8_EXPERTS_LEAN=0): the 32-pair tiles against the 128-pair
# ones, and their split form for decode steps' few tiles (DEEPINFER_GEMM_FP8_SPLIT=1: the
# batch-invariance tests' 1- and 8-token launches as clusters, K over 2 or 8 sub-ranges).
job DEEPINFER_GEMM_FP8_EXPERTS=1 DEEPINFER_GEMM_FP8_EXPERTS_LEAN=0 .carry/bin/cuda_ops_test --gtest_filter='*Moe*:*DecodeExperts*'
job DEEPINFER_GEMM_FP8_EXPERTS=1 DEEPINFER_GEMM_FP8_EXPERTS_LEAN=0 DEEPINFER_GEMM_FP8_SPLIT=1 .carry/bin/cuda_ops_test --gtest_filter='*Moe*:*DecodeExperts*'
# The lean form with its rolling L2 prefetch (DEEPINFER_GEMM_L2_PREFETCH, 8 blocks): a hint, so
# the same bits; the run checks its addresses stay in the rows (a bad one faults the launch).
job DEEPINFER_GEMM_FP8_EXPERTS=1 DEEPINFER_GEMM_L2_PREFETCH=8 .carry/bin/cuda_ops_test --gtest_filter='*Moe*:*DecodeExperts*'
# Two 64-row groups per lean CTA (DEEPINFER_GEMM_FP8_EXPERTS_LEAN_GROUPS=2), with the prefetch
# restarted per group: the batch-invariance tests compare it with the 128-pair tiles bit for bit.
job DEEPINFER_GEMM_FP8_EXPERTS=1 DEEPINFER_GEMM_FP8_EXPERTS_LEAN_GROUPS=2 DEEPINFER_GEMM_L2_PREFETCH=4 .carry/bin/cuda_ops_test --gtest_filter='*Moe*:*DecodeExperts*'
# The same switch on the default path: the lean kernel's multi-tile FP4 expert forms with every
# tile's rows requested up front (lean_gemv_kernel's PF).
job DEEPINFER_GEMM_L2_PREFETCH=8 .carry/bin/cuda_ops_test --gtest_filter="$MOE_RUN"
job DEEPINFER_CUDA_PDL=0 .carry/bin/cuda_model_test
tmp=$(mktemp -d)
status=0
printed=0
flush() {  # prints the finished runs that follow the last printed one, in order
  while [ "$printed" -lt "${#JOBS[@]}" ] && [ -f "$tmp/$printed.rc" ]; do
    cat "$tmp/$printed.log"
    [ "$(cat "$tmp/$printed.rc")" = 0 ] || status=1
    printed=$((printed + 1))
  done
}
# SUITE_RUNS=FROM-TO (0-based, inclusive): only those runs of the list (a suite split over two
# device calls; the first line says which).
if [ -n "${SUITE_RUNS:-}" ]; then
  from=${SUITE_RUNS%-*} to=${SUITE_RUNS#*-}
  echo "suite: runs $from-$to of 0-$((${#JOBS[@]} - 1))"
  JOBS=("${JOBS[@]:$from:$((to - from + 1))}")
fi
# SUITE_PICK=I,J,... (0-based): only those runs, e.g. "0,43" — the default cuda_ops_test and
# cuda_model_test runs — when a session's device time is short (their logs number them 0, 1, ...).
if [ -n "${SUITE_PICK:-}" ]; then
  IFS=',' read -r -a picks <<< "$SUITE_PICK"
  picked=()
  for i in "${picks[@]}"; do picked+=("${JOBS[$i]}"); done
  echo "suite: runs $SUITE_PICK of 0-$((${#JOBS[@]} - 1))"
  JOBS=("${picked[@]}")
fi
# Runs at once share the host's cores: each run's OpenMP regions (the CPU reference) get their
# share, not every core — N runs of nproc spin-waiting threads each oversubscribe the host, which
# is the likely reason SUITE_JOBS=4 finished only 20 runs in 360 s on the H100 (session 41).
if [ "${SUITE_JOBS:-1}" -gt 1 ] && [ -z "${OMP_NUM_THREADS:-}" ]; then
  threads=$(( $(nproc) / SUITE_JOBS ))
  export OMP_NUM_THREADS=$(( threads > 0 ? threads : 1 ))
  echo "suite: $SUITE_JOBS runs at once, OMP_NUM_THREADS=$OMP_NUM_THREADS each"
fi
# Each run's log ends with its wall time ("suite run N: S s, rc R"): gtest's per-test times leave
# out the process's start, CUDA context and fixtures (session 41's 48 runs: 527 s of tests in
# ~1,100 s of calls).
run_one() {
  local i=$1 t0 rc
  t0=$(date +%s.%N)
  bash -c "${JOBS[$i]}" > "$tmp/$i.log" 2>&1
  rc=$?
  echo "suite run $((${from:-0} + i)): $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $t0 }") s, rc $rc" >> "$tmp/$i.log"
  echo $rc > "$tmp/$i.rc.partial"
  mv "$tmp/$i.rc.partial" "$tmp/$i.rc"
}
for i in "${!JOBS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "${SUITE_JOBS:-1}" ]; do wait -n; flush; done
  run_one "$i" &
  flush
done
while [ "$printed" -lt "${#JOBS[@]}" ]; do wait -n 2> /dev/null || sleep 0.2; flush; done
rm -rf "$tmp"
exit $status
