#!/usr/bin/env bash
# A/B of launch or tuning settings on the H200 (device tool, after tools/device/pack.sh): one
# `deepinfer bench` per configuration, same binary, same synthetic model; a configuration is a
# space-separated list of environment assignments ("-" = none), configurations separated by "|".
# Repeat a configuration (ABAB) to see the run-to-run spread. JSON per run in $OUT/ab_<i>.json,
# a summary table on stdout (what the tuning records quote).
# Usage: CONFIGS='-|DEEPINFER_CUDA_PDL=0|-' BATCHES=1,8,32 PREFILL=8192 bash tools/bench/ab_on_device.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
bash tools/device/unpack.sh  # .carry/bins.tar.xz -> .carry/bin
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT="${OUT:-/tmp/ab}"
mkdir -p "$OUT"
IFS='|' read -r -a configs <<< "${CONFIGS:--}"
i=0
for cfg in "${configs[@]}"; do
  env_args=()
  [ "$cfg" != "-" ] && read -r -a env_args <<< "$cfg"
  env "${env_args[@]}" .carry/bin/deepinfer bench --layers "${LAYERS:-4}" --batch "${BATCHES:-1,8,32}" \
    --context "${CONTEXTS:-4096}" --prefill "${PREFILL:-8192}" --iters "${ITERS:-10}" --no-breakdown \
    --out "$OUT/ab_$i.json" > "$OUT/ab_$i.log" 2>&1 || echo "config $i ($cfg) failed: $(tail -3 "$OUT/ab_$i.log")"
  python3 - "$OUT/ab_$i.json" "$cfg" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
cells = [f"{r['kind'][0]}{r['batch']}@{r['context']}={r.get('tokens_per_s', 0):.0f}" for r in d["rows"]]
print(f"{sys.argv[2]:<48} " + " ".join(cells))
PY
  i=$((i + 1))
done
