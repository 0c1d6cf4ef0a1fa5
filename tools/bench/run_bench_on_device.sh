#!/usr/bin/env bash
# Runs on the H200 machine (device tool): the transformers baseline, `deepinfer bench` on a
# full-width synthetic V4-Flash generated on the GPU, and the plot. Results in $OUT.
# Usage: COMMIT=<sha> LAYERS=4 bash tools/bench/run_bench_on_device.sh
set -uo pipefail
bash tools/device/unpack.sh  # .carry/bins.tar.xz -> .carry/bin
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LAYERS="${LAYERS:-4}"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
timeout 240 python3 tools/bench/hf_baseline.py --layers "$LAYERS" --batch 1,8,32,128 --context 4096 --prefill 8192 --out "$OUT/hf_baseline.json" \
  || echo '{"rows": [], "error": "baseline did not finish"}' > "$OUT/hf_baseline.json"
.carry/bin/deepinfer bench --layers "$LAYERS" --batch "${BATCHES:-1,8,32,128,256,512}" --context "${CONTEXTS:-4096,32768,131072}" \
  --prefill "${PREFILL:-8192,131072}" --baseline "$OUT/hf_baseline.json" --commit "${COMMIT:-unknown}" --out "$OUT/bench.json"
python3 tools/bench/plot_bench.py "$OUT/bench.json" "$OUT/bench.svg" || true
python3 - "$OUT/bench.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("copy GB/s", d["gpu"].get("copy_bandwidth_gbs"))
for r in d["rows"]:
    print(r["kind"], r["batch"], r["context"], round(r.get("tokens_per_s") or 0, 1), r.get("hbm_roofline_pct", ""), r.get("tensor_peak_pct", ""), r.get("skipped", ""))
PY
