#!/usr/bin/env bash
# Asynchronous scheduling across prompt chunks on the device machine (after tools/device/pack.sh
# build-cuda, .carry/ carried): `deepinfer bench-engine` with prompts longer than a step's token
# budget, so that most steps hold a prompt chunk beside the other requests' decodes — planned ahead
# since session 35 — against the synchronous loop (--no-async-scheduling), in A B A B order so the
# spread of one binary shows. Greedy, 4 layers, 8,192-token prompts in 2,048-token steps, 128
# output tokens, concurrency 1 / 8 / 32. The JSON files (with their commands and steps_ahead) in
# $OUT/engine_chunks.tgz; a summary line per run on stdout.
# Usage: COMMIT=<sha> bash tools/bench/engine_chunks_on_device.sh   (REPEAT=2: A/B pairs)
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder (the device tool sets it)}"
bash tools/device/unpack.sh
export LD_LIBRARY_PATH=$PWD/.carry/lib
BIN=.carry/bin/deepinfer
eng=$(mktemp -d)
for rep in $(seq 1 "${REPEAT:-2}"); do
  for mode in async sync; do
    flag=""
    [ "$mode" = sync ] && flag=--no-async-scheduling
    json="$eng/chunks_${mode}_$rep.json"
    timeout 120 "$BIN" bench-engine --layers 4 --concurrency 1,8,32 --input-len 8192 --output-len 128 \
      --max-num-batched-tokens 2048 --temperature 0 $flag --commit "${COMMIT:-unknown}" --out "$json" \
      > "$eng/chunks_${mode}_$rep.log" 2>&1
    echo "== $mode $rep: $(python3 -c "
import json
d = json.load(open('$json'))
print([(r.get('concurrency'), round(r['output_tokens_per_s']), r.get('steps_ahead')) for r in d['rows']])" 2>&1)"
  done
done
tar -C "$eng" -czf "$OUT/engine_chunks.tgz" .
