#!/usr/bin/env bash
# One device call for a session's record (after tools/device/pack.sh build-cuda, .carry/ carried):
# the CUDA suite (tools/device/run_cuda_suite.sh, output in $OUT/suite.txt) and, when it passes,
# the benchmark with the transformers baseline (tools/bench/run_bench_on_device.sh: $OUT/bench.json,
# .svg). Each device start costs minutes of the session's device time, so the two share one.
# Back here: tools/device/suite_to_json.py $OUT/suite.txt ... and copy bench.json / .svg under
# bench/results/ (README "Tests" and "CUDA backend and benchmarks"; docs/cuda.md "Benchmark records").
# Usage: COMMIT=<sha> bash tools/device/suite_and_bench.sh   (SUITE_ONLY=1: no benchmark)
# The suite took ~300 s on a fresh machine at be23530 (its synthetic checkpoints generated first)
# and outgrew 340 s at ff76f7b (the 46th run cut off; ~360 s at 63bbb02; 455 s for 47 runs at 99f4c71
# on a fresh machine), hence a 500 s limit; the
# benchmark with its transformers baseline takes ~80 s more, so a call of both may need the
# device's whole 600 s: SUITE_ONLY=1 for the suite alone.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder (the device tool sets it)}"
timeout "${SUITE_TIMEOUT:-500}" bash tools/device/run_cuda_suite.sh > "$OUT/suite.txt" 2>&1
suite=$?
echo "suite: exit $suite, $(grep -cE '^\[  PASSED' "$OUT/suite.txt") passing runs"
grep -E '^\[  FAILED' "$OUT/suite.txt" | sort -u | head -20
if [ "$suite" -ne 0 ]; then
  echo "suite failed: no benchmark (a benchmark of failing kernels is not a record)"
  exit "$suite"
fi
[ "${SUITE_ONLY:-0}" = 1 ] && exit 0
COMMIT="${COMMIT:-unknown}" timeout "${BENCH_TIMEOUT:-240}" bash tools/bench/run_bench_on_device.sh
