#!/usr/bin/env bash
# Several steps in one device call: a cold start costs ~2 of a session's 30 minutes and a refused
# one more, so a session's A/B runs, knob tests and suite go together where they fit in 600 s.
# STEPS names a file of steps, one per line: "NAME: COMMAND" (blank lines and # comments skipped).
# Each runs in order from the repository root under what is left of DEADLINE seconds (default
# 570: the tool's 600 less the copy back), with OUT=$OUT/NAME (its own folder) and
# STEP_SECONDS_LEFT exported (for a step's own limits, e.g. SUITE_TIMEOUT=$STEP_SECONDS_LEFT);
# its stdout and stderr go to $OUT/NAME.log and its last lines to this script's output. A step
# that fails does not stop the next ones; a step with less than MIN_STEP seconds (default 20)
# left is skipped. At the end everything is packed into $OUT/steps.tgz (the tool brings back at
# most 8 files) and a line per step says its exit status and time.
# Usage: OUT=... STEPS=.carry/steps.txt bash tools/device/steps_on_device.sh
#   ab: CONFIGS='-|DEEPINFER_GEMM_L2_PREFETCH=8|-' BATCHES=1,8 PREFILL=0 bash tools/bench/ab_on_device.sh
#   suite: SUITE_JOBS=2 SUITE_ONLY=1 SUITE_TIMEOUT=$STEP_SECONDS_LEFT COMMIT=abc123 bash tools/device/suite_and_bench.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder (the device tool sets it)}"
: "${STEPS:?set STEPS to the file of steps}"
[ -r "$STEPS" ] || { echo "steps file $STEPS not found" >&2; exit 2; }
deadline=$(( $(date +%s) + ${DEADLINE:-570} ))
min_step=${MIN_STEP:-20}
root="$OUT"
summary=()
status=0
while IFS= read -r line || [ -n "$line" ]; do
  [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
  if ! [[ "$line" =~ ^[[:space:]]*([A-Za-z0-9_.-]+):[[:space:]]*(.+)$ ]]; then
    echo "bad step line (want NAME: COMMAND): $line" >&2
    status=2
    continue
  fi
  name="${BASH_REMATCH[1]}" cmd="${BASH_REMATCH[2]}"
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt "$min_step" ]; then
    summary+=("$name: skipped (${left} s left)")
    status=1
    continue
  fi
  mkdir -p "$root/$name"
  echo "== $name (${left} s left): $cmd"
  start=$(date +%s)
  OUT="$root/$name" STEP_SECONDS_LEFT="$left" timeout --kill-after=5 "$left" bash -c "$cmd" > "$root/$name.log" 2>&1
  rc=$?
  tail -n "${TAIL_LINES:-25}" "$root/$name.log"
  summary+=("$name: exit $rc after $(( $(date +%s) - start )) s")
  [ "$rc" -ne 0 ] && status=1
done < "$STEPS"
echo "== steps"
printf '%s\n' "${summary[@]}"
# One archive of every step's folder and log; the loose files stay for a quick look.
(cd "$root" && tar -czf steps.tgz --exclude=steps.tgz ./*) || status=1
exit "$status"
