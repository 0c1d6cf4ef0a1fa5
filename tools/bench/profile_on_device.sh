#!/usr/bin/env bash
# Kernel-level profiles on the device machine (after tools/device/pack.sh, .carry/ carried), the
# measurements behind the CUDA tuning records. Results in $OUT.
#   bash tools/bench/profile_on_device.sh kernels            # GPU time per kernel: a batch-1 step
#                                                            # (4K context) and an 8K prefill
#   bash tools/bench/profile_on_device.sh launches           # every launch of one batch-1 decode
#                                                            # step (BATCH=n: batch n; CONTEXT=n:
#                                                            # context, default 4096): GPU time,
#                                                            # DRAM bytes read, grid size
#   bash tools/bench/profile_on_device.sh source NAME SKIP   # source-level profile of the (SKIP+1)-th
#                                                            # launch of kernel NAME in a batch-1 step
#                                                            # (NAME_BASE=demangled: NAME matches the
#                                                            # demangled name, e.g. one instantiation:
#                                                            # 'regex:WeightFmt\)2, \(int\)4, \(bool\)1';
#                                                            # RUN=prefill: a launch of the 8K prefill;
#                                                            # GRID_MIN=n: SKIP counts from the first
#                                                            # launch of NAME with >= n CTAs, e.g. a
#                                                            # prefill's, not the decode warm-up's)
# ncu runs with caches and clocks left alone (--cache-control none --clock-control none): its
# default flushes caches before every kernel, which inflates small decode kernels several-fold.
# CUDA graphs are off so ncu sees each launch; kernel names filter by base name (e.g.
# dequant_gemv_kernel) and SKIP counts earlier launches of that name (warm-up forwards included).
set -uo pipefail
cd "$(dirname "$0")/../.."
bash tools/device/unpack.sh
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" DEEPINFER_CUDA_GRAPHS=0
NCU="${NCU:-/usr/local/cuda/bin/ncu}"  # (a stand-in for testing the script)
LAYERS="${LAYERS:-4}"
BATCH="${BATCH:-1}"  # decode batch of `launches` and `source` (the CSV names it)
# Decode rows only (--prefill 0): the run ends on the measured decode step, which is what `launches`
# prints (before, a trailing 1-token prefill at context 1 was the last forward: same GEMMs, but
# attention, indexer and compressor over no history).
DECODE=(.carry/bin/deepinfer bench --layers "$LAYERS" --batch "$BATCH" --context "${CONTEXT:-4096}" --prefill 0 --iters 1 --no-breakdown)
# The prefill run has no decode rows (--batch 0): their warm-up runs for a time, not a step count,
# so under ncu (every launch slowed in the GRID_MIN pass, only one in the profiling pass) the two
# passes would see different launch sequences and SKIP would land in a decode step.
PREFILL=(.carry/bin/deepinfer bench --layers "$LAYERS" --batch 0 --context 1 --prefill 8192 --iters 1 --no-breakdown)
case "${1:-kernels}" in
  kernels)
    timeout 200 "$NCU" --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
      --kernel-name regex:'^(?!fill_random).*' "${DECODE[@]}" > "$OUT/ncu_decode_b1.csv" 2>&1
    echo "== batch-1 decode (totals over the warm-up and measured forwards)"
    python3 tools/bench/ncu_summary.py "$OUT/ncu_decode_b1.csv" --top 30
    timeout 300 "$NCU" --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
      --kernel-name regex:'^(?!fill_random).*' "${PREFILL[@]}" > "$OUT/ncu_prefill_8k.csv" 2>&1
    echo "== 8K prefill (warm-up and timed runs)"
    python3 tools/bench/ncu_summary.py "$OUT/ncu_prefill_8k.csv" --top 30
    ;;
  launches)
    timeout 200 "$NCU" --cache-control none --clock-control none --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size \
      --kernel-name regex:'^(?!fill_random).*' "${DECODE[@]}" > "$OUT/ncu_launches_b$BATCH.csv" 2>&1
    # The last forward's launches: the measured decode step (warm-up steps before it).
    python3 tools/bench/ncu_launches.py "$OUT/ncu_launches_b$BATCH.csv" --last "${LAST:-200}"
    ;;
  source)
    name="${2:?kernel base name}" skip="${3:-0}"
    run=("${DECODE[@]}")
    [ "${RUN:-decode}" = prefill ] && run=("${PREFILL[@]}")
    if [ -n "${GRID_MIN:-}" ]; then  # the launches' grid sizes first: skip to the first large one
      timeout 200 "$NCU" --cache-control none --clock-control none --csv --metrics launch__grid_size \
        --kernel-name-base "${NAME_BASE:-function}" --kernel-name "$name" "${run[@]}" > "$OUT/grids.csv" 2>&1
      first=$(python3 tools/bench/ncu_launches.py "$OUT/grids.csv" --first-grid-at-least "$GRID_MIN") || exit 1
      skip=$((first + skip))
      echo "first launch of $name with >= $GRID_MIN CTAs: $first; profiling launch $skip"
    fi
    timeout 300 "$NCU" --cache-control none --clock-control none --section SpeedOfLight --section WarpStateStats \
      --section Occupancy --section LaunchStats --section SourceCounters --section MemoryWorkloadAnalysis \
      --section SchedulerStats --kernel-name-base "${NAME_BASE:-function}" --kernel-name "$name" \
      --launch-skip "$skip" --launch-count 1 -o "$OUT/profile" "${run[@]}" > "$OUT/profile.log" 2>&1
    "$NCU" --import "$OUT/profile.ncu-rep" > "$OUT/profile.txt" 2>&1
    "$NCU" --import "$OUT/profile.ncu-rep" --page source --csv --print-source sass > "$OUT/profile_sass.csv" 2>&1
    grep -E "Duration|Throughput|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Spilling|Eligible|Grid Size" "$OUT/profile.txt" | sed 's/  */ /g'
    python3 tools/bench/ncu_sass_hotspots.py "$OUT/profile_sass.csv"
    ;;
  *) echo "usage: $0 kernels | launches | source NAME [SKIP]" >&2; exit 2 ;;
esac
