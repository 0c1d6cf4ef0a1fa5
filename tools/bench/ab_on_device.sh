#!/usr/bin/env bash
# A/B of launch or tuning settings on the H200 (device tool, after tools/device/pack.sh): one
# `deepinfer bench` per configuration, same binary, same synthetic model; a configuration is a
# space-separated list of environment assignments ("-" = none), configurations separated by "|".
# Repeat a configuration (ABAB) to see the run-to-run spread. JSON per run in $OUT/ab_<i>.json (their logs in $OUT/ab_logs.tgz),
# a summary table on stdout (what the tuning records quote).
# A configuration whose first word is bin=PATH runs that binary instead of .carry/bin/deepinfer
# (PATH.xz is decompressed first): a before/after A/B of several builds in one device call
# (tools/device/build_variant.sh builds one from another commit or branch into the archive as
# .carry/bin/deepinfer_<name>).
# BENCH_ARGS: more `deepinfer bench` flags for every run; with --timeline, each run's kernel
# timeline is printed too (tools/bench/timeline_report.py: idle time and gaps of the replayed steps)
# and each decode cell carries the replayed step's GPU span beside the host's share of the step
# (compare spans where the host time varies between runs: it does by tens of us at batch 1).
# Usage: CONFIGS='-|DEEPINFER_CUDA_PDL=0|-' BATCHES=1,8,32 PREFILL=8192 bash tools/bench/ab_on_device.sh
#        CONFIGS='-|DEEPINFER_HC_CLUSTER=auto' BATCHES=1,8 PREFILL=0 BENCH_ARGS=--timeline bash tools/bench/ab_on_device.sh
#        CONFIGS='-|bin=.carry/bin/deepinfer_before|-|bin=.carry/bin/deepinfer_before' ...
set -uo pipefail
cd "$(dirname "$0")/../.."
bash tools/device/unpack.sh  # .carry/bins.tar.xz -> .carry/bin
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT="${OUT:-/tmp/ab}"
mkdir -p "$OUT"
# The runs' logs in one archive at the end ($OUT/ab_logs.tgz): the device tool returns at most 8
# files, so six configurations' JSON and logs side by side lost the last ones (session 44).
LOGS="$(mktemp -d)"
IFS='|' read -r -a configs <<< "${CONFIGS:--}"
i=0
for cfg in "${configs[@]}"; do
  env_args=()
  [ "$cfg" != "-" ] && read -r -a env_args <<< "$cfg"
  bin=.carry/bin/deepinfer
  if [ "${#env_args[@]}" -gt 0 ] && [[ "${env_args[0]}" == bin=* ]]; then
    bin="${env_args[0]#bin=}"
    env_args=("${env_args[@]:1}")
    if [[ "$bin" == *.xz ]]; then
      [ -x "/tmp/${bin##*/}.bin" ] || { xz -dc "$bin" > "/tmp/${bin##*/}.bin" && chmod +x "/tmp/${bin##*/}.bin"; }
      bin="/tmp/${bin##*/}.bin"
    fi
  fi
  env "${env_args[@]}" "$bin" bench --layers "${LAYERS:-4}" --batch "${BATCHES:-1,8,32}" \
    --context "${CONTEXTS:-4096}" --prefill "${PREFILL:-8192}" --iters "${ITERS:-10}" --no-breakdown \
    ${BENCH_ARGS:-} --out "$OUT/ab_$i.json" > "$LOGS/ab_$i.log" 2>&1 \
    || echo "config $i ($cfg) failed: $(tail -3 "$LOGS/ab_$i.log")"
  python3 - "$OUT/ab_$i.json" "$cfg" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
def cell(r):
    c = f"{r['kind'][0]}{r['batch']}@{r['context']}={r.get('tokens_per_s') or 0:.0f}"
    # The host's share of a step moves a batch-1 tok/s by tens of us between runs; the timeline's
    # GPU span does not: both where the run has them.
    if "host_ms" in r:
        c += f" (host {r['host_ms'] * 1e3:.0f} us"
        c += f", span {r['timeline']['span_us']:.0f} us)" if "timeline" in r else ")"
    return c
cells = [cell(r) for r in d["rows"]]
print(f"{sys.argv[2]:<48} " + " ".join(cells))
PY
  if [[ " ${BENCH_ARGS:-} " == *" --timeline "* ]]; then
    python3 tools/bench/timeline_report.py "$OUT/ab_$i.json" --launches "${TIMELINE_LAUNCHES:-0}" --by-name 15 || true
  fi
  i=$((i + 1))
done
tar -czf "$OUT/ab_logs.tgz" -C "$LOGS" . && rm -rf "$LOGS"
